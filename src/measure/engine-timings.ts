// The engine's own account of where a request's time went, where it sends one: llama.cpp's
// `timings` object, on the last chunk of a stream and in a non-streamed answer. Its clock starts
// when a slot begins the prompt (`prompt_ms` runs to the first token sampled) and `predicted_ms`
// runs from that first token to the last: the split a proxy can only estimate from the outside.
// Cached prompt tokens are not in `prompt_n` but in `cache_n` (usage's prompt_tokens is their
// sum in llama.cpp's server: n_prompt_tokens = n_prompt_tokens_cache + n_prompt_tokens_processed).
// A stream without usage takes its token counts from here (request-timer.ts): the current
// llama-server moves `timings` to the usage-only chunk when usage is asked, and states them on
// its last chunk when not, so infermeter need not ask (usage-injection.ts).

export interface EngineTimings {
  /** `prompt_n`: prompt tokens the engine evaluated for this request (cached ones excluded). */
  readonly promptTokens: number;
  /** `prompt_ms`: milliseconds from the start of prompt processing to the first token. */
  readonly promptMs: number;
  /** `predicted_n`: tokens generated. */
  readonly predictedTokens: number;
  /** `predicted_ms`: milliseconds from the first generated token to the last. */
  readonly predictedMs: number;
  /** `cache_n`: prompt tokens served from the slot's cache (not in promptTokens); undefined where not stated (older servers). */
  readonly cachedTokens?: number | undefined;
}

/** Reads a `timings` object; undefined unless all four figures are finite non-negative numbers. */
export function readEngineTimings(value: unknown): EngineTimings | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const t = value as Record<string, unknown>;
  const promptTokens = figure(t.prompt_n);
  const promptMs = figure(t.prompt_ms);
  const predictedTokens = figure(t.predicted_n);
  const predictedMs = figure(t.predicted_ms);
  if (promptTokens === undefined || promptMs === undefined || predictedTokens === undefined || predictedMs === undefined) return undefined;
  const cachedTokens = figure(t.cache_n);
  return cachedTokens === undefined
    ? { promptTokens, promptMs, predictedTokens, predictedMs }
    : { promptTokens, promptMs, predictedTokens, predictedMs, cachedTokens };
}

function figure(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}
