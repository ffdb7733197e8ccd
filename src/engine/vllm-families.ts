// The vLLM families only the engine can know (its scheduler's reasons, its steps, its caches),
// taken from the engine's exposition as they are and relabelled like the vllm dialect's own
// series: one engine, engine="0" (data-parallel engines summed, tensor- and pipeline-parallel
// ranks other than 0 left out, as engine-state.ts reads them), every other label as the engine
// wrote it (`le` included, in Python's spelling). Pure: the scraper calls it on each good round.
import type { Family, FamilyType, Sample } from './exposition-parser.ts';

export interface EngineOnlyFamily {
  readonly name: string;
  readonly type: Extract<FamilyType, 'counter' | 'gauge' | 'histogram'>;
  readonly help: string;
}

/** vllm/v1/metrics/loggers.py (v0.11 and later), in its order; HELP texts as vLLM's. */
export const VLLM_ENGINE_ONLY: readonly EngineOnlyFamily[] = [
  { name: 'vllm:num_requests_waiting_by_reason', type: 'gauge', help: 'Number of requests waiting, by the reason they wait (capacity, deferred).' },
  { name: 'vllm:prefix_cache_queries_total', type: 'counter', help: 'Prefix cache queries, in terms of number of queried tokens.' },
  { name: 'vllm:prefix_cache_hits_total', type: 'counter', help: 'Prefix cache hits, in terms of number of cached tokens.' },
  {
    name: 'vllm:external_prefix_cache_queries_total',
    type: 'counter',
    help: 'External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.',
  },
  {
    name: 'vllm:external_prefix_cache_hits_total',
    type: 'counter',
    help: 'External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.',
  },
  { name: 'vllm:mm_cache_queries_total', type: 'counter', help: 'Multi-modal cache queries, in terms of number of queried items.' },
  { name: 'vllm:mm_cache_hits_total', type: 'counter', help: 'Multi-modal cache hits, in terms of number of cached items.' },
  { name: 'vllm:prompt_tokens_by_source_total', type: 'counter', help: 'Number of prompt tokens by source.' },
  { name: 'vllm:iteration_tokens_total', type: 'histogram', help: 'Histogram of number of tokens per engine_step.' },
  { name: 'vllm:request_prefill_kv_computed_tokens', type: 'histogram', help: 'Histogram of new KV tokens computed during prefill (excluding cached tokens).' },
];

const RANKS = new Set(['engine', 'tp_rank', 'pp_rank']);

/** The samples of each engine-only family present, relabelled and summed over engines; name -> samples. */
export function relabelEngineOnly(families: readonly Family[], wanted: readonly EngineOnlyFamily[] = VLLM_ENGINE_ONLY): Map<string, Sample[]> {
  const sampleNames = new Map<string, string>();
  for (const f of wanted) {
    const names = f.type === 'histogram' ? [`${f.name}_bucket`, `${f.name}_sum`, `${f.name}_count`] : [f.name];
    for (const n of names) sampleNames.set(n, f.name);
  }
  const out = new Map<string, Map<string, { name: string; labels: Record<string, string>; value: number }>>();
  for (const fam of families) {
    for (const s of fam.samples) {
      const family = sampleNames.get(s.name);
      if (family === undefined || !Number.isFinite(s.value)) continue;
      if ((s.labels.tp_rank ?? '0') !== '0' || (s.labels.pp_rank ?? '0') !== '0') continue;
      const labels: Record<string, string> = {};
      if (s.labels.model_name !== undefined) labels.model_name = s.labels.model_name;
      labels.engine = '0';
      for (const [k, v] of Object.entries(s.labels)) if (!RANKS.has(k) && k !== 'model_name') labels[k] = v;
      const key = `${s.name}${JSON.stringify(labels)}`;
      let series = out.get(family);
      if (series === undefined) out.set(family, (series = new Map()));
      const acc = series.get(key);
      if (acc === undefined) series.set(key, { name: s.name, labels, value: s.value });
      else acc.value += s.value;
    }
  }
  return new Map([...out].map(([name, series]) => [name, [...series.values()].map((x) => ({ ...x, timestamp: undefined }))]));
}
