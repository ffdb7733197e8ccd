// The simulated engine's own state and its vLLM-style /metrics: each model's queues (waiting,
// running), tokens in flight (the KV-cache usage), prefix-cache counts and tokens per engine step,
// moved by the requests the simulator serves and rendered as vLLM's exposition renders them.
import type { ServerResponse } from 'node:http';
import type { Plan } from './plan.ts';

/** What the simulated engine reports on its vLLM-style /metrics. */
export interface EngineStats {
  waiting: number;
  running: number;
  tokensInFlight: number;
  prefixQueries: number;
  prefixHits: number;
  /** vllm:iteration_tokens_total: tokens per engine step (a prefill step, then one token per decode step). */
  readonly steps: { readonly counts: number[]; sum: number; count: number };
}

/** vLLM's buckets of vllm:iteration_tokens_total (its cudagraph capture sizes' default). */
const STEP_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];

const BLOCKS = 4096;
const BLOCK_SIZE = 16;

/** A model's engine state before any request. */
export function engineStats(): EngineStats {
  return { waiting: 0, running: 0, tokensInFlight: 0, prefixQueries: 0, prefixHits: 0, steps: { counts: STEP_BUCKETS.map(() => 0), sum: 0, count: 0 } };
}

/** Moves one request through the engine's queues: waiting, running, done (or gone). */
export function track(s: EngineStats, plan: Plan, res: ServerResponse): { firstToken: () => void } {
  const tokens = plan.tokens;
  s.waiting++;
  let state: 'waiting' | 'running' | 'done' = 'waiting';
  res.on('close', () => {
    if (state === 'waiting') s.waiting--;
    else if (state === 'running') {
      s.running--;
      s.tokensInFlight -= tokens;
      // One decode step per token after the first (a request left early counts its planned tokens).
      if (tokens > 1) step(s, 1, tokens - 1);
    }
    state = 'done';
  });
  return {
    firstToken() {
      if (state !== 'waiting') return;
      state = 'running';
      s.waiting--;
      s.running++;
      s.tokensInFlight += tokens;
      step(s, plan.promptTokens, 1);
    },
  };
}

function step(s: EngineStats, tokens: number, times: number): void {
  const i = STEP_BUCKETS.findIndex((b) => tokens <= b);
  if (i >= 0) s.steps.counts[i]! += times;
  s.steps.sum += tokens * times;
  s.steps.count += times;
}

/** A float as Python's prometheus_client writes it in the simple cases the sim needs ("1.0"). */
const pyFloat = (n: number): string => (Number.isInteger(n) ? `${n}.0` : String(n));

export function engineMetrics(stats: ReadonlyMap<string, EngineStats>): string {
  const lines: string[] = [];
  const family = (name: string, type: string, help: string, value: (s: EngineStats) => number): void => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [model, s] of stats) lines.push(`${name}{engine="0",model_name="${model}"} ${value(s)}`);
  };
  family('vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.', (s) => s.running);
  family('vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.', (s) => s.waiting);
  family('vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.', (s) => Math.min(1, s.tokensInFlight / (BLOCKS * BLOCK_SIZE)));
  family('vllm:num_preemptions_total', 'counter', 'Cumulative number of preemption from the engine.', () => 0);
  family('vllm:prefix_cache_queries_total', 'counter', 'Prefix cache queries, in terms of number of queried tokens.', (s) => s.prefixQueries);
  family('vllm:prefix_cache_hits_total', 'counter', 'Prefix cache hits, in terms of number of cached tokens.', (s) => s.prefixHits);
  // The engine-only families of vLLM's newer dashboards (vllm/v1/metrics/loggers.py).
  const labelled = (name: string, type: string, help: string, label: string, values: ReadonlyArray<readonly [string, (s: EngineStats) => number]>): void => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [model, s] of stats) for (const [v, read] of values) lines.push(`${name}{engine="0",model_name="${model}",${label}="${v}"} ${read(s)}`);
  };
  labelled('vllm:num_requests_waiting_by_reason', 'gauge', 'Number of requests waiting, by the reason they wait.', 'reason', [
    ['capacity', (s) => s.waiting],
    ['deferred', () => 0],
  ]);
  labelled('vllm:prompt_tokens_by_source_total', 'counter', 'Number of prompt tokens by source.', 'source', [
    ['local_compute', (s) => s.prefixQueries - s.prefixHits],
    ['local_cache_hit', (s) => s.prefixHits],
    ['external_kv_transfer', () => 0],
  ]);
  lines.push('# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.', '# TYPE vllm:iteration_tokens_total histogram');
  for (const [model, s] of stats) {
    const labels = `engine="0",model_name="${model}"`;
    let cumulative = 0;
    STEP_BUCKETS.forEach((b, i) => {
      cumulative += s.steps.counts[i]!;
      lines.push(`vllm:iteration_tokens_total_bucket{${labels},le="${pyFloat(b)}"} ${cumulative}`);
    });
    lines.push(`vllm:iteration_tokens_total_bucket{${labels},le="+Inf"} ${s.steps.count}`);
    lines.push(`vllm:iteration_tokens_total_count{${labels}} ${s.steps.count}`, `vllm:iteration_tokens_total_sum{${labels}} ${s.steps.sum}`);
  }
  lines.push('# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig', '# TYPE vllm:cache_config_info gauge');
  lines.push(`vllm:cache_config_info{block_size="${BLOCK_SIZE}",engine="0",num_gpu_blocks="${BLOCKS}"} 1.0`);
  return `${lines.join('\n')}\n`;
}
