// Configuration is read once, from the environment first and an optional MindIE-style
// config.json second, and validated as a whole: every problem is collected into one
// ConfigError so that an operator fixes them all in one go. Nothing else reads process.env.
// The variables table (variables.ts) reads every variable of a row of its own; what needs code
// (addresses, URLs, TLS, tenants, SLOs, the OTLP export) is read by the modules called here.
import { closeSync, openSync } from 'node:fs';
import { availableParallelism, hostname } from 'node:os';
import { dirname } from 'node:path';
import type { BucketOverrides } from '../metrics/exposition/buckets.ts';
import type { AomOptions } from '../metrics/dialects/aom.ts';
import { DIALECTS, histogramFamilies, type DialectRow } from '../metrics/dialects/index.ts';
import { readCpuQuota, type CpuQuota } from '../metrics/container/cgroup.ts';
import { parseAomLabels } from './aom-labels.ts';
import { autoWorkers } from './auto-workers.ts';
import { parseBucketOverrides } from './bucket-overrides.ts';
import type { Limits } from './limits.ts';
import { readListenAddresses, refuseAllAddresses, type ListenAddresses } from './listen-addresses.ts';
import { readMindieServerConfig, type MindieServerConfig } from './parse/mindie-config.ts';
import { parseOtel, type OtelConfig } from '../metrics/export/otel-config.ts';
import { nonEmpty, type Env, type Problem } from './parse/parse.ts';
import { parseSecurity, readBuffer, type Security } from './security.ts';
import { parseSlo, type SloConfig } from '../goodput/slo-config.ts';
import { parseTenant, type TenantConfig } from '../tenants/tenant-config.ts';
import { parseUsage, type UsageConfig } from '../ledger/usage-config.ts';
import { parsePrices, type PricesConfig } from '../chargeback/prices-file.ts';
import { parseMetricsUrl, parseUpstream } from './upstream-url.ts';
import { readGroup, type GroupValues, type Row } from './variables/variable-table.ts';
import { CONFIGURATION_TABLE, unknownVariables } from './variables.ts';
import { MAX_WORKERS } from './variables/proxy.ts';

export type { Env } from './parse/parse.ts';

/** The values of the table's rows of group `config`: each is Config's under the row's key. */
type TableValues = GroupValues<typeof CONFIGURATION_TABLE, 'config'>;

export interface Config extends Omit<TableValues, 'workers'>, ListenAddresses {
  /** Base URL of the model server; undefined only when the caller allows it (tests, demo). */
  readonly upstream: URL | undefined;
  /** MIES_SERVICE_MONITOR_MODE: /metrics is served only when this is true. */
  readonly metricsEnabled: boolean;
  /** Metric dialects /metrics serves, in order: names of the dialect table (metrics/dialects/index.ts). */
  readonly dialects: readonly string[];
  /** Histogram buckets replaced through INFERMETER_BUCKETS_<FAMILY>. */
  readonly buckets: BucketOverrides;
  readonly aom: AomOptions;
  /** The engine's own /metrics, read on an interval; undefined when off. */
  readonly upstreamMetrics: URL | undefined;
  /** MindIE's /metrics-json, for remainBlocks; undefined when unset. */
  readonly upstreamMetricsJson: URL | undefined;
  /** 'stdout', a file path, or undefined (off). */
  readonly accessLog: string | undefined;
  /** Data-plane processes: 1 runs everything in one process; more run a primary and workers. */
  readonly workers: number;
  /** With INFERMETER_WORKERS=auto: what the count was read from (the cgroup's CPU quota or the host's cores). */
  readonly workersFrom: string | undefined;
  /** The label cap on models, the concurrency limit, the timeouts, the drain. */
  readonly limits: Limits;
  /** TLS, the metrics token, the every-address allowance. */
  readonly security: Security;
  /** The otel dialect's provider name and the OTLP export (on when an OTLP endpoint is set). */
  readonly otel: OtelConfig;
  /** Per-tenant metering: the tenant's source, its aliases, the cap. */
  readonly tenant: TenantConfig;
  /** Goodput: the SLO classes (INFERMETER_SLO, INFERMETER_SLO_FILE) and the client allowance; no classes: off. */
  readonly slo: SloConfig;
  /** The usage ledger (INFERMETER_USAGE_DIR); undefined: off. */
  readonly usage: UsageConfig | undefined;
  /** The operator's prices (INFERMETER_PRICES_FILE); `table` undefined: no cost figures. */
  readonly prices: PricesConfig;
}

export interface ConfigProblem {
  readonly variable: string;
  readonly expected: string;
  readonly got: string | undefined;
}

/** Thrown by loadConfig with every problem found, each naming its variable. */
export class ConfigError extends Error {
  readonly code = 'INFERMETER_CONFIG_INVALID';
  readonly problems: readonly ConfigProblem[];
  constructor(problems: readonly ConfigProblem[]) {
    const lines = problems.map((p) => `  ${p.variable}: expected ${p.expected}${p.got === undefined ? '' : `, got ${JSON.stringify(p.got)}`}`);
    super(`invalid configuration:\n${lines.join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export interface LoadOptions {
  /** Throw when INFERMETER_UPSTREAM is missing (npm start); tests and the demo pass false. */
  readonly requireUpstream?: boolean;
  /** Injected for tests; defaults to each file's reader, its size and type checked first (parse.ts readCapped). */
  readonly readFile?: (path: string) => string;
  /** The default of the AOM `source` label; defaults to os.hostname(). */
  readonly hostname?: string;
  /** Injected for tests; reads TLS files and token files. */
  readonly readBinary?: (path: string) => Buffer;
  /** Injected for tests: the cgroup's CPU quota (default: read from /sys/fs/cgroup) and the host's CPUs. */
  readonly cpuQuota?: () => CpuQuota | undefined;
  readonly hostCpus?: number;
  /** Open INFERMETER_ACCESS_LOG's file to check it can be appended to, and INFERMETER_USAGE_DIR to check it takes a file (default true; the healthcheck does not). */
  readonly probeAccessLog?: boolean;
  /** The variables table (default: variables.ts'); a test adds a row to show one row is all a variable takes. */
  readonly table?: readonly Row[];
  /** The dialects INFERMETER_DIALECTS may name (default: DIALECTS; a test adds its own). */
  readonly dialectTable?: readonly DialectRow[];
}

const hostCpuQuota = (): CpuQuota | undefined => readCpuQuota({ cgroupRoot: '/sys/fs/cgroup', procRoot: '/proc' });

export function loadConfig(env: Env, options: LoadOptions = {}): Config {
  const table = options.table ?? CONFIGURATION_TABLE;
  const problems: ConfigProblem[] = [];
  const problem = (variable: string, expected: string, got: string | undefined): void => {
    problems.push({ variable, expected, got });
  };

  let file: MindieServerConfig = {};
  const configPath = nonEmpty(env.INFERMETER_CONFIG);
  if (configPath !== undefined) {
    const read = readMindieServerConfig(configPath, options.readFile);
    if (read.ok) file = read.value;
    else problem('INFERMETER_CONFIG', read.expected, configPath);
  }

  // A mistyped name would otherwise be ignored in silence, its setting left at the default.
  for (const { variable, closest } of unknownVariables(env, table)) {
    problem(variable, `a variable infermeter reads${closest === undefined ? '' : `: did you mean ${closest}?`} (infermeter --help lists them all)`, undefined);
  }

  const upstream = parseUpstream(env.INFERMETER_UPSTREAM, options.requireUpstream ?? false, problem);
  const listen = readListenAddresses(env, file, problem, table);
  const monitorMode = env.MIES_SERVICE_MONITOR_MODE;
  const metricsEnabled = monitorMode === undefined || monitorMode === '1';

  const values = readGroup(table, 'config', env, problem, file) as unknown as TableValues;
  const limits = readGroup(table, 'limits', env, problem, file) as unknown as Limits;
  const dialectTable = options.dialectTable ?? DIALECTS;
  const dialects = parseDialects(env.INFERMETER_DIALECTS, problem, dialectTable);
  const buckets = parseBucketOverrides(env, problem, histogramFamilies(dialectTable));
  const aom: AomOptions = {
    ...(readGroup(table, 'aom', env, problem, file) as { periodSeconds: number }),
    labels: parseAomLabels(env, options.hostname ?? hostname(), problem),
  };

  const upstreamMetrics = parseMetricsUrl(
    'INFERMETER_UPSTREAM_METRICS',
    env.INFERMETER_UPSTREAM_METRICS,
    upstream === undefined ? undefined : new URL('/metrics', upstream.origin),
    problem,
  );
  const upstreamMetricsJson = parseMetricsUrl('INFERMETER_UPSTREAM_METRICS_JSON', env.INFERMETER_UPSTREAM_METRICS_JSON, undefined, problem);
  if (values.relayUpstreamMetrics && upstreamMetrics === undefined && env.INFERMETER_UPSTREAM_METRICS?.trim().toLowerCase() === 'off') {
    problem(
      'INFERMETER_RELAY_UPSTREAM_METRICS',
      'INFERMETER_UPSTREAM_METRICS not to be off (the relay re-serves what it reads)',
      env.INFERMETER_RELAY_UPSTREAM_METRICS,
    );
  }
  const accessLog = parseAccessLog(env.INFERMETER_ACCESS_LOG, options.probeAccessLog !== false, problem);

  const security = parseSecurity({
    env,
    file,
    fileDir: configPath === undefined ? undefined : dirname(configPath),
    readFile: options.readBinary ?? readBuffer,
    problem,
  });
  refuseAllAddresses(listen, security.allowAllZeroIp, problem);
  const auto =
    values.workers === 'auto' ? autoWorkers(options.hostCpus ?? availableParallelism(), (options.cpuQuota ?? hostCpuQuota)(), MAX_WORKERS) : undefined;
  const otel = {
    ...(readGroup(table, 'otel', env, problem, file) as { providerName: string }),
    ...parseOtel(env, options.hostname ?? hostname(), problem),
  };
  const tenant = { ...parseTenant(env, problem, options.readFile), ...(readGroup(table, 'tenant', env, problem, file) as { max: number }) };
  const slo = parseSlo(env, problem, options.readFile);
  const prices = parsePrices(env, problem, options.readFile);
  const usage = parseUsage(env, values, options.hostname ?? hostname(), listen.port, problem, options.probeAccessLog !== false);

  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({
    ...values,
    ...listen,
    upstream,
    metricsEnabled,
    dialects,
    buckets,
    aom,
    upstreamMetrics,
    upstreamMetricsJson,
    accessLog,
    workers: auto?.workers ?? (values.workers as number),
    workersFrom: auto?.from,
    limits: Object.freeze(limits),
    security,
    otel,
    tenant,
    slo,
    usage,
    prices,
  });
}

/** 'stdout', a file path, or undefined (off); a path is opened once here to check it can be appended to. */
function parseAccessLog(raw: string | undefined, probe: boolean, problem: Problem): string | undefined {
  const value = nonEmpty(raw);
  const accessLog = value === undefined || value.toLowerCase() === 'off' ? undefined : value;
  // Opened (and created) once here: a path that cannot be appended to stops the start, instead
  // of a proxy that drops every line with only a counter to say so.
  if (accessLog !== undefined && accessLog !== 'stdout' && probe) {
    try {
      closeSync(openSync(accessLog, 'a'));
    } catch (error) {
      const e = error as NodeJS.ErrnoException;
      problem('INFERMETER_ACCESS_LOG', `stdout, off, or a file infermeter can append to (opening it failed: ${e.message})`, value);
    }
  }
  return accessLog;
}

function parseDialects(raw: string | undefined, problem: Problem, table: readonly DialectRow[]): string[] {
  const value = nonEmpty(raw);
  if (value === undefined) return ['mindie'];
  const names = value.split(',').map((n) => n.trim().toLowerCase());
  const known = table.map((row) => row.name);
  const expected = `a comma-separated list of ${known.join(', ')}, each at most once`;
  const valid = names.every((n) => known.includes(n)) && new Set(names).size === names.length;
  if (!valid) {
    problem('INFERMETER_DIALECTS', expected, raw);
    return ['mindie'];
  }
  return names;
}
