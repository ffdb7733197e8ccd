// The goodput verdict of one finished inference request, with the rules of vLLM's benchmark
// (benchmarks/benchmark_serving.py calculate_metrics, the `--goodput` check): a request that
// completed is good when every SLO of its class holds, inclusive (`slo_ms / 1000 >= value_s`,
// vLLM's own comparison, in its order of operations), where
//   tpot = (e2el - ttft) / (n - 1) over its n completion tokens, and 0 when n <= 1;
// else missed. Failed and cancelled requests are never good. The figures are the sample's, the
// ones the histograms observe: goodput and the histograms never disagree about a request.
import type { SloKey, SloTargets } from './slo-config.ts';
import { REAL_APIS, type InferenceApiRow, type InferenceApis } from '../measure/inference-apis.ts';
import type { RequestSample } from '../measure/sample.ts';
import { isClientError } from '../metrics/own/failure-classes.ts';

export type Verdict = 'good' | 'missed' | 'failed' | 'cancelled';
export const VERDICTS: readonly Verdict[] = ['good', 'missed', 'failed', 'cancelled'];

/**
 * Why a request got no verdict: the client's own mistake, an API that gets none (its row says:
 * embeddings, no generation), under the API's name, no SLO of its class.
 */
export type Exclusion = string;

/** Every exclusion of an API table, in the order of their series. */
export function exclusions(apis: InferenceApis): Exclusion[] {
  return ['client_error', ...apis.rows.filter((row) => !row.goodput).map((row) => row.name), 'no_slo'];
}

export interface Judgement {
  readonly verdict: Verdict;
  /** For `missed`: the SLOs it missed (one or more). */
  readonly missed: readonly SloKey[];
  /** Completion tokens (n): the upstream's count, else the token events seen. */
  readonly tokens: number;
}

/** The figures vLLM's check compares, in seconds. */
export interface SloFigures {
  readonly ttft: number;
  readonly tpot: number;
  readonly e2el: number;
}

/** Completion tokens of a request: the upstream's usage when it told one, else one per token event. */
function completionTokensOf(sample: RequestSample): number {
  const usage = sample.usageSource === 'upstream' || sample.usageSource === 'timings' || sample.usageSource === 'events' ? sample.completionTokens : undefined;
  return usage !== undefined && usage > 0 ? usage : sample.tokenEvents;
}

/**
 * vLLM's figures of a completed request: its ttft (a non-streamed answer's first token reaches
 * the client with the body: its ttft is its e2e), its e2e latency, and tpot over n tokens.
 * Undefined for a stream that completed without a token: vLLM's client marks it failed ("Never
 * received a valid chunk to calculate TTFT").
 */
export function figuresOf(sample: RequestSample, n: number): SloFigures | undefined {
  const e2el = sample.e2e ?? sample.duration;
  if (e2el === undefined) return undefined;
  const ttft = sample.streamed ? sample.ttft : e2el;
  if (ttft === undefined) return undefined;
  const tpot = n > 1 ? (e2el - ttft) / (n - 1) : 0;
  return { ttft, tpot, e2el };
}

/** vLLM's check of one request: `s >= r` for every configured SLO s (seconds) and figure r. */
function missedSlos(figures: SloFigures, targets: SloTargets, allowanceMs: Readonly<Record<SloKey, number>>): SloKey[] {
  const missed: SloKey[] = [];
  for (const key of ['ttft', 'tpot', 'e2el'] as const) {
    const slo = targets[key];
    if (slo === undefined) continue;
    // The allowance (0 unless set) moves infermeter's figure to where a client would read it.
    const value = allowanceMs[key] === 0 ? figures[key] : figures[key] + allowanceMs[key] / 1000;
    if (!(slo / 1000 >= value)) missed.push(key);
  }
  return missed;
}

/** The verdict of a finished request under `targets`, or why it has none. */
export function judge(sample: RequestSample, targets: SloTargets, allowanceMs: Readonly<Record<SloKey, number>>): Judgement {
  const tokens = completionTokensOf(sample);
  if (sample.outcome === 'cancelled') return { verdict: 'cancelled', missed: [], tokens };
  if (sample.outcome === 'failed') return { verdict: 'failed', missed: [], tokens };
  const figures = figuresOf(sample, tokens);
  if (figures === undefined) return { verdict: 'failed', missed: [], tokens };
  const missed = missedSlos(figures, targets, allowanceMs);
  return { verdict: missed.length === 0 ? 'good' : 'missed', missed, tokens };
}

/** Requests that get no verdict at all, whatever their SLO class (undefined: judged); `api`: the sample's row of the API table. */
export function exclusionOf(sample: RequestSample, api: InferenceApiRow | undefined = REAL_APIS.of(sample.api)): Exclusion | undefined {
  if (api?.goodput === false) return api.name;
  if (sample.outcome === 'failed' && isClientError(sample.status)) return 'client_error';
  return undefined;
}
