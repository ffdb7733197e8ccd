// From one parsed engine exposition to the MindIE families' values, per model: pure, so the
// mapping is tested against fixture expositions of every engine. Series without a model_name
// label (TGI, llama.cpp) belong to the model the engine serves. Several series of one model
// (vLLM's data-parallel engines) are summed for counts and averaged for ratios.
import { detectEngine, ENGINE_MAP, type Engine, type EngineFamily, type Source } from './engine-map.ts';
import type { Family, Sample } from './exposition-parser.ts';
import { relabelEngineOnly } from './vllm-families.ts';

export interface EngineSnapshot {
  readonly engine: Engine;
  /** Family -> model -> value. A family absent here has no source in this exposition. */
  readonly values: ReadonlyMap<EngineFamily, ReadonlyMap<string, number>>;
  /** Free KV-cache blocks, where the engine tells enough to know them. */
  readonly remainBlocks: number | undefined;
  /** Raw counter values behind ratio sources, for the next scrape's increase. */
  readonly counters: ReadonlyMap<string, number>;
  /** vLLM: its engine-only families (vllm-families.ts), relabelled, by family name. */
  readonly engineOnly?: ReadonlyMap<string, readonly Sample[]> | undefined;
  /** The proxy's in-flight requests per model when these figures were read (the in-flight rule's cap). */
  readonly proxyAtRead?: ReadonlyMap<string, number> | undefined;
}

export function readEngineState(
  families: readonly Family[],
  options: { servedModel: string; previous?: EngineSnapshot | undefined; engine?: Engine | undefined },
): EngineSnapshot | undefined {
  const bySample = new Map<string, Sample[]>();
  for (const f of families) {
    for (const s of f.samples) {
      let list = bySample.get(s.name);
      if (list === undefined) bySample.set(s.name, (list = []));
      list.push(s);
    }
  }
  const engine = options.engine ?? detectEngine(bySample.keys());
  if (engine === undefined) return undefined;
  const modelOf = (s: Sample): string => s.labels.model_name ?? options.servedModel;
  const values = new Map<EngineFamily, Map<string, number>>();
  const counters = new Map<string, number>();

  const perModel = (samples: readonly Sample[], combine: 'sum' | 'mean'): Map<string, number> => {
    const acc = new Map<string, { sum: number; n: number }>();
    for (const s of samples) {
      if (!Number.isFinite(s.value)) continue;
      // Tensor- and pipeline-parallel ranks repeat one engine's figures: count rank 0 only.
      if ((s.labels.tp_rank ?? '0') !== '0' || (s.labels.pp_rank ?? '0') !== '0') continue;
      const model = modelOf(s);
      const a = acc.get(model) ?? { sum: 0, n: 0 };
      a.sum += s.value;
      a.n++;
      acc.set(model, a);
    }
    return new Map([...acc].map(([m, a]) => [m, combine === 'sum' ? a.sum : a.sum / a.n]));
  };

  const read = (source: Source, combine: 'sum' | 'mean'): Map<string, number> | undefined => {
    if (typeof source === 'string') {
      const samples = bySample.get(source);
      if (samples === undefined || samples.length === 0) return undefined;
      const result = perModel(samples, combine);
      return result.size === 0 ? undefined : result;
    }
    // A hit rate from two counters: over the increase since the previous scrape when there was
    // traffic in between, else over the engine's lifetime.
    const [numName, denName] = source.ratio;
    const num = bySample.get(numName);
    const den = bySample.get(denName);
    if (num === undefined || den === undefined) return undefined;
    const nums = perModel(num, 'sum');
    const dens = perModel(den, 'sum');
    const result = new Map<string, number>();
    for (const [model, d] of dens) {
      const n = nums.get(model) ?? 0;
      counters.set(`${numName}|${model}`, n);
      counters.set(`${denName}|${model}`, d);
      const prevN = options.previous?.counters.get(`${numName}|${model}`);
      const prevD = options.previous?.counters.get(`${denName}|${model}`);
      if (prevN !== undefined && prevD !== undefined && d - prevD > 0 && n >= prevN) result.set(model, (n - prevN) / (d - prevD));
      else if (d > 0) result.set(model, n / d);
    }
    return result.size === 0 ? undefined : result;
  };

  for (const row of ENGINE_MAP) {
    for (const source of row.sources[engine] ?? []) {
      const v = read(source, row.combine);
      if (v !== undefined) {
        values.set(row.family, v);
        break;
      }
    }
  }

  const engineOnly = engine === 'vllm' ? relabelEngineOnly(families) : undefined;
  return { engine, values, remainBlocks: remainBlocks(engine, bySample, values), counters, engineOnly };
}

/** vLLM: blocks from cache_config_info's num_gpu_blocks label, times the free share of the KV cache. */
function remainBlocks(
  engine: Engine,
  bySample: ReadonlyMap<string, Sample[]>,
  values: ReadonlyMap<EngineFamily, ReadonlyMap<string, number>>,
): number | undefined {
  if (engine !== 'vllm') return undefined;
  const info = bySample.get('vllm:cache_config_info');
  const usage = values.get('npu_cache_usage_perc');
  if (info === undefined || usage === undefined || usage.size === 0) return undefined;
  let blocks = 0;
  for (const s of info) {
    const n = Number(s.labels.num_gpu_blocks);
    if (!Number.isFinite(n) || n <= 0) return undefined;
    blocks += n;
  }
  let used = 0;
  for (const u of usage.values()) used += u;
  const share = Math.min(1, Math.max(0, used / usage.size));
  return Math.round(blocks * (1 - share));
}

/** MindIE's own /metrics-json: its remainBlocks and request counts, when its URL is configured. */
export function readMindieJson(body: unknown): { remainBlocks?: number; waiting?: number; processing?: number } | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const result = (body as { result?: unknown }).result;
  if (!Array.isArray(result)) return undefined;
  const out: { remainBlocks?: number; waiting?: number; processing?: number } = {};
  for (const entry of result) {
    const metric = (entry as { metric?: unknown }).metric;
    const first = Array.isArray(metric) ? (metric[0] as { __name__?: unknown } | undefined) : (metric as { __name__?: unknown } | undefined);
    const name = first?.__name__;
    const value = Number((entry as { value?: unknown }).value);
    if (typeof name !== 'string' || !Number.isFinite(value)) continue;
    if (name === 'remainBlocks') out.remainBlocks = value;
    else if (name === 'waitingInferRequestNum') out.waiting = value;
    else if (name === 'processingInferRequestNum') out.processing = value;
  }
  return out;
}
