// The dialect table: every dialect INFERMETER_DIALECTS may name, one row each (its name, its
// help line, its histograms' default buckets, its factory, and the optional hook for the routes
// infermeter forwards unmeasured). Everything that lists dialects derives from it: the
// variable's validation (config.ts), the INFERMETER_BUCKETS_<FAMILY> families and the help text
// of both variables (variables.ts, and so --help and the README's table), the dialects
// createMetrics builds and the data plane's pass-through report (start/data-side.ts). A new dialect is its
// own module plus one row here. The table is a value passed down (loadConfig's, createMetrics'
// and startInfermeter's `dialectTable`, this one by default), never a registry mutated at run
// time: a test adds a dialect by passing [...DIALECTS, its row].
import type { Registry } from '@prometheus-io/client';
import { OWN_BUCKETS, type BucketTable } from '../exposition/buckets.ts';
import type { ContainerSamplerOptions } from '../container/container-sampler.ts';
import type { MeasurementState } from '../state/recorder.ts';
import { AOM_BUCKETS, createAomDialect, type AomOptions } from './aom.ts';
import type { Dialect, DialectContext } from './dialect.ts';
import { createMindieDialect, MINDIE_BUCKETS } from './mindie.ts';
import { createOtelDialect, OTEL_BUCKETS, type OtelOptions } from './otel.ts';
import { createVllmDialect, VLLM_BUCKETS } from './vllm.ts';
import { vllmPassThroughLabels } from './vllm-http.ts';

/** The dialects' own options, from the configuration (MetricsOptions carries them); each factory reads its own. */
export interface DialectOptions {
  readonly aom: AomOptions;
  /** Sources of the AOM container metrics; tests pass fixture trees and a fake nvidia-smi. */
  readonly container?: ContainerSamplerOptions;
  /** The otel dialect's constant attributes (provider, upstream address); its defaults when unset. */
  readonly otel?: OtelOptions;
}

export interface DialectRow {
  /** Its INFERMETER_DIALECTS name. */
  readonly name: string;
  /** What it serves, one line of Markdown (the INFERMETER_DIALECTS help and README row). */
  readonly help: string;
  /** The default buckets of every histogram family it registers: each has its INFERMETER_BUCKETS_<FAMILY>. */
  readonly buckets: BucketTable;
  readonly create: (registry: Registry, state: MeasurementState, context: DialectContext, options: DialectOptions) => Dialect;
  /**
   * The bounded labels (route, method) under which a request infermeter forwards without
   * measuring it (the pass-through route) is counted, or undefined to leave it out; set by a
   * dialect whose Dialect.httpRequest counts such requests. Runs in the data plane's process (a
   * worker's with INFERMETER_WORKERS > 1), so only the labels cross the worker bus, never a
   * client's path. No dialect with it enabled: the data plane reports nothing of the kind.
   */
  readonly passThroughLabels?: (target: string, method: string | undefined) => readonly [route: string, method: string] | undefined;
}

export const DIALECTS: readonly DialectRow[] = [
  { name: 'mindie', help: "MindIE's own service metrics, names and buckets", buckets: MINDIE_BUCKETS, create: createMindieDialect },
  {
    name: 'aom',
    help: "ModelArts AOM's `infer_service_*` histograms in milliseconds, collection-period gauges and container metrics",
    buckets: AOM_BUCKETS,
    create: createAomDialect,
  },
  {
    name: 'vllm',
    help: "vLLM's own `vllm:*` names, for vLLM dashboards",
    buckets: VLLM_BUCKETS,
    create: createVllmDialect,
    passThroughLabels: vllmPassThroughLabels,
  },
  {
    name: 'otel',
    help: "the OpenTelemetry GenAI semantic conventions' `gen_ai_*` histograms",
    buckets: OTEL_BUCKETS,
    create: (registry, state, context, options) => createOtelDialect(registry, state, context, options.otel),
  },
];

/** The rows of `names`, in that order (names loadConfig validated against the same table). */
export function dialectRows(names: readonly string[], table: readonly DialectRow[] = DIALECTS): DialectRow[] {
  return names.map((name) => {
    const row = table.find((r) => r.name === name);
    if (row === undefined) throw new Error(`no dialect named ${name} in the dialect table (${table.map((r) => r.name).join(', ')})`);
    return row;
  });
}

/** Every histogram family with an INFERMETER_BUCKETS_<FAMILY> override: the dialects', in table order, then infermeter's own. */
export function histogramFamilies(table: readonly DialectRow[] = DIALECTS): string[] {
  return [...table.flatMap((row) => Object.keys(row.buckets)), ...Object.keys(OWN_BUCKETS)];
}

/** The meaning of INFERMETER_DIALECTS in --help and the README's table. */
export function dialectsHelp(table: readonly DialectRow[] = DIALECTS): string {
  const rows = table.map((row) => `\`${row.name}\` (${row.help})`).join(', ');
  return `metric dialects \`/metrics\` serves, comma-separated: ${rows}, e.g. \`mindie,aom\` or \`mindie,vllm\`; each works alone`;
}

/** The meaning of INFERMETER_BUCKETS_<FAMILY> in --help and the README's table: every family, by whose it is. */
export function bucketFamiliesHelp(table: readonly DialectRow[] = DIALECTS): string {
  const list = (families: readonly string[]) => families.map((f) => `\`${f}\``).join(', ');
  const dialects = table.filter((row) => Object.keys(row.buckets).length > 0).map((row) => `the \`${row.name}\` dialect's ${list(Object.keys(row.buckets))}`);
  return (
    'histogram buckets of one family, comma-separated, strictly increasing, e.g. `INFERMETER_BUCKETS_TIME_TO_FIRST_TOKEN_SECONDS=0.25,0.5,1,2,4`; ' +
    '`<FAMILY>` is the family name in capitals, a `:` written `_` (`INFERMETER_BUCKETS_VLLM_E2E_REQUEST_LATENCY_SECONDS`): ' +
    `${dialects.join('; ')}; infermeter's own (per-tenant metering's, the proxy overhead's) ${list(Object.keys(OWN_BUCKETS))} (defaults in [docs/metrics.md](metrics.md))`
  );
}

/**
 * The data plane's report of a pass-through request: the labels of each dialect in `rows` that
 * counts such requests (passThroughLabels), sent as ProxyEvents.httpRequest to that dialect;
 * undefined (nothing reported, no listener per request) when none does.
 */
export function passThroughReport(
  rows: readonly DialectRow[],
  events: { readonly httpRequest?: ((dialect: string, route: string, method: string, status: number, seconds: number) => void) | undefined },
): ((target: string, method: string | undefined, status: number, seconds: number) => void) | undefined {
  const report = events.httpRequest;
  const labelling = rows.filter((row) => row.passThroughLabels !== undefined);
  if (report === undefined || labelling.length === 0) return undefined;
  return (target, method, status, seconds) => {
    for (const row of labelling) {
      const labels = row.passThroughLabels!(target, method);
      if (labels !== undefined) report(row.name, labels[0], labels[1], status, seconds);
    }
  };
}
