// The start line's fields: where each plane listens and the settings an operator checks first,
// as they are in effect (defaults included).
import type { Config } from './config/config.ts';
import { VERSION } from './version.ts';

export function startedFields(
  config: Config,
  dataUrl: string,
  management: { readonly managementUrl: string; readonly metricsUrl: string | undefined },
): Record<string, string | number> {
  const upstream = config.upstream;
  return {
    version: VERSION,
    data: dataUrl,
    upstream: upstream === undefined ? 'none' : upstream.origin + upstream.pathname.replace(/\/$/, ''),
    management: management.managementUrl,
    metrics: management.metricsUrl ?? 'disabled',
    upstream_metrics: config.upstreamMetrics?.href ?? 'off',
    // The settings an operator checks first, as they are in effect (defaults included).
    dialects: config.dialects.join(','),
    tenants: tenantsSetting(config),
    slo: sloSetting(config),
    workers: config.workers,
    // INFERMETER_WORKERS=auto: whether from a CPU quota or the host's cores.
    ...(config.workersFrom === undefined ? {} : { workers_from: config.workersFrom }),
  };
}

/** INFERMETER_TENANT as in effect: off, header:<name> or api-key, with the alias file and cap. */
function tenantsSetting(config: Config): string {
  const { source, aliasesFile, max } = config.tenant;
  if (source.kind === 'off') return 'off';
  const from = source.kind === 'header' ? `header:${source.header}` : 'api-key';
  return `${from} (at most ${max}${aliasesFile === undefined ? '' : `, aliases ${aliasesFile}`})`;
}

/** Goodput's SLO as in effect: the file's classes and INFERMETER_SLO's default, or off. */
function sloSetting(config: Config): string {
  const { classes, file } = config.slo;
  const parts: string[] = [];
  if (file !== undefined) parts.push(`${file} (${classes.filter((c) => c.name !== 'default').length} classes)`);
  const fallback = classes.find((c) => c.name === 'default')?.targets;
  if (fallback !== undefined)
    parts.push(
      `default ${Object.entries(fallback)
        .map(([k, v]) => `${k}:${v}`)
        .join(' ')}`,
    );
  return parts.length === 0 ? 'off' : parts.join(', ');
}
