// Which engine metric fills which MindIE family: data, not code paths, so that a renamed
// metric is one more entry in a list. Sources are tried in order; the first one present in the
// engine's exposition wins. Names checked against each engine's documentation and source; see
// docs/metrics.md for the versions.

export type Engine = 'vllm' | 'sglang' | 'tgi' | 'llamacpp' | 'mindie';

/** A metric read as is, or a ratio of two counters' increases between scrapes (hits / queries). */
export type Source = string | { readonly ratio: readonly [numerator: string, denominator: string] };

export interface MappingRow {
  /** The MindIE family this fills. */
  readonly family: EngineFamily;
  /** How several series of one model combine (data-parallel ranks, TP ranks): counts add up, ratios average. */
  readonly combine: 'sum' | 'mean';
  readonly sources: Readonly<Partial<Record<Engine, readonly Source[]>>>;
}

export type EngineFamily =
  | 'num_requests_running'
  | 'num_requests_waiting'
  | 'num_requests_swapped'
  | 'num_preemptions_total'
  | 'npu_cache_usage_perc'
  | 'cpu_cache_usage_perc'
  | 'npu_prefix_cache_hit_rate';

export const ENGINE_MAP: readonly MappingRow[] = [
  {
    family: 'num_requests_running',
    combine: 'sum',
    sources: {
      vllm: ['vllm:num_requests_running'],
      sglang: ['sglang:num_running_reqs'],
      tgi: ['tgi_batch_current_size'],
      llamacpp: ['llamacpp:requests_processing'],
      mindie: ['num_requests_running'],
    },
  },
  {
    family: 'num_requests_waiting',
    combine: 'sum',
    sources: {
      vllm: ['vllm:num_requests_waiting'],
      sglang: ['sglang:num_queue_reqs'],
      tgi: ['tgi_queue_size'],
      llamacpp: ['llamacpp:requests_deferred'],
      mindie: ['num_requests_waiting'],
    },
  },
  {
    family: 'num_requests_swapped',
    combine: 'sum',
    sources: { vllm: ['vllm:num_requests_swapped'], mindie: ['num_requests_swapped'] },
  },
  {
    family: 'num_preemptions_total',
    combine: 'sum',
    sources: { vllm: ['vllm:num_preemptions_total', 'vllm:num_preemptions'], mindie: ['num_preemptions_total'] },
  },
  {
    family: 'npu_cache_usage_perc',
    combine: 'mean',
    sources: {
      vllm: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
      sglang: ['sglang:token_usage'],
      llamacpp: ['llamacpp:kv_cache_usage_ratio'],
      mindie: ['npu_cache_usage_perc'],
    },
  },
  {
    family: 'cpu_cache_usage_perc',
    combine: 'mean',
    sources: { vllm: ['vllm:cpu_cache_usage_perc'], mindie: ['cpu_cache_usage_perc'] },
  },
  {
    family: 'npu_prefix_cache_hit_rate',
    combine: 'mean',
    sources: {
      vllm: [
        'vllm:gpu_prefix_cache_hit_rate',
        { ratio: ['vllm:prefix_cache_hits_total', 'vllm:prefix_cache_queries_total'] },
        { ratio: ['vllm:gpu_prefix_cache_hits_total', 'vllm:gpu_prefix_cache_queries_total'] },
      ],
      sglang: ['sglang:cache_hit_rate'],
      mindie: ['npu_prefix_cache_hit_rate'],
    },
  },
];

/** Metric-name prefixes that identify an engine; MindIE's names have none. */
const PREFIXES: ReadonlyArray<readonly [Engine, string]> = [
  ['vllm', 'vllm:'],
  ['sglang', 'sglang:'],
  ['tgi', 'tgi_'],
  ['llamacpp', 'llamacpp:'],
];

const MINDIE_MARKERS = ['npu_cache_usage_perc', 'num_requests_running', 'request_received_total'];

/** The engine whose metrics these are, from the names alone; undefined when none matches. */
export function detectEngine(names: Iterable<string>): Engine | undefined {
  const all = [...names];
  for (const [engine, prefix] of PREFIXES) if (all.some((n) => n.startsWith(prefix))) return engine;
  if (all.some((n) => MINDIE_MARKERS.includes(n))) return 'mindie';
  return undefined;
}
