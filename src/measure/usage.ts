// Token counts as the upstream reported them. Chat and completions say prompt_tokens /
// completion_tokens, the Responses API says input_tokens / output_tokens; embeddings carry
// prompt tokens only. Anthropic's Messages API says input_tokens / output_tokens too, but counts
// the prompt tokens read from or written to its prompt cache apart, in cache_read_input_tokens and
// cache_creation_input_tokens: they are kept apart here and added to the prompt when the request
// ends (promptTotal), so that its prompt tokens mean what OpenAI's prompt_tokens means, cached
// ones included. A field that is absent or not a non-negative integer stays undefined.
// Two details are read where the upstream states them, never guessed: the prompt tokens served
// from a prompt cache (OpenAI, vLLM, SGLang, xAI: prompt_tokens_details.cached_tokens; the
// Responses API: input_tokens_details.cached_tokens; DeepSeek, SiliconFlow:
// prompt_cache_hit_tokens; Anthropic: cache_read_input_tokens) and the generated tokens spent on
// reasoning (completion_tokens_details.reasoning_tokens, output_tokens_details.reasoning_tokens).
// Usage is the upstream's word, not taken blindly (issue 49): a report with a count above
// MAX_TOKEN_COUNT is refused whole (the request counts as without usage), and a part larger than
// its whole is cut to it (the request timer, where reports are merged; usageTooLarge below).

export interface Usage {
  readonly promptTokens: number | undefined;
  readonly completionTokens: number | undefined;
  /** Anthropic's cache_read_input_tokens: prompt tokens read from its prompt cache. */
  readonly cacheReadTokens?: number | undefined;
  /** Anthropic's cache_creation_input_tokens: prompt tokens written to its prompt cache. */
  readonly cacheCreationTokens?: number | undefined;
  /** OpenAI's prompt_tokens_details.cached_tokens (or DeepSeek's prompt_cache_hit_tokens): part of promptTokens. */
  readonly cachedTokens?: number | undefined;
  /** completion_tokens_details.reasoning_tokens: part of completionTokens. */
  readonly reasoningTokens?: number | undefined;
}

/**
 * The largest token count a report may state: 2^31 - 1. No model reads or writes that many in a
 * request (the largest contexts are 10 million tokens: 200 times less), so no honest report is
 * refused; and a counter fed such counts stays an exact integer in a float64 for 2^22 of them,
 * where one report of 2^53 - 1 would end its exactness at once.
 */
export const MAX_TOKEN_COUNT = 2 ** 31 - 1;

/** Why a report was refused or a part of it cut: the label `reason` of infermeter_usage_rejected_total. */
export type UsageRejection = 'too_large' | 'reasoning_over_completion' | 'cached_over_prompt';

/** A report stating a count above MAX_TOKEN_COUNT: refused whole. */
export function usageTooLarge(u: Usage): boolean {
  return (
    (u.promptTokens ?? 0) > MAX_TOKEN_COUNT ||
    (u.completionTokens ?? 0) > MAX_TOKEN_COUNT ||
    (u.cacheReadTokens ?? 0) > MAX_TOKEN_COUNT ||
    (u.cacheCreationTokens ?? 0) > MAX_TOKEN_COUNT ||
    (u.cachedTokens ?? 0) > MAX_TOKEN_COUNT ||
    (u.reasoningTokens ?? 0) > MAX_TOKEN_COUNT
  );
}

/** Reads a `usage` object; undefined when it holds no usable count (null, {}, garbage). */
export function readUsage(value: unknown): Usage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const u = value as Record<string, unknown>;
  const promptTokens = count(u.prompt_tokens) ?? count(u.input_tokens);
  const completionTokens = count(u.completion_tokens) ?? count(u.output_tokens);
  const cacheReadTokens = count(u.cache_read_input_tokens);
  const cacheCreationTokens = count(u.cache_creation_input_tokens);
  // DeepSeek states prompt_cache_hit_tokens beside prompt_tokens_details.cached_tokens, the same count: one is taken.
  const cachedTokens = detail(u.prompt_tokens_details, 'cached_tokens') ?? detail(u.input_tokens_details, 'cached_tokens') ?? count(u.prompt_cache_hit_tokens);
  const reasoningTokens = detail(u.completion_tokens_details, 'reasoning_tokens') ?? detail(u.output_tokens_details, 'reasoning_tokens');
  if (cacheReadTokens !== undefined || cacheCreationTokens !== undefined || cachedTokens !== undefined || reasoningTokens !== undefined) {
    return { promptTokens, completionTokens, cacheReadTokens, cacheCreationTokens, cachedTokens, reasoningTokens };
  }
  if (promptTokens === undefined && completionTokens === undefined) return undefined;
  return { promptTokens, completionTokens };
}

/** A count inside a `*_tokens_details` object. */
function detail(details: unknown, key: string): number | undefined {
  return typeof details === 'object' && details !== null ? count((details as Record<string, unknown>)[key]) : undefined;
}

/**
 * A later report over an earlier one, field by field: what the later one states wins, what it
 * leaves out is kept (Anthropic's message_delta may restate input_tokens, or not; as its SDK
 * merges them). Reports are cumulative, so nothing is ever summed.
 */
export function mergeUsage(earlier: Usage | undefined, later: Usage): Usage {
  // The common case, a report that states both counts over one without details: no copy.
  if (
    earlier === undefined ||
    (later.promptTokens !== undefined &&
      later.completionTokens !== undefined &&
      earlier.cacheReadTokens === undefined &&
      earlier.cacheCreationTokens === undefined &&
      earlier.cachedTokens === undefined &&
      earlier.reasoningTokens === undefined)
  ) {
    return later;
  }
  return {
    promptTokens: later.promptTokens ?? earlier.promptTokens,
    completionTokens: later.completionTokens ?? earlier.completionTokens,
    cacheReadTokens: later.cacheReadTokens ?? earlier.cacheReadTokens,
    cacheCreationTokens: later.cacheCreationTokens ?? earlier.cacheCreationTokens,
    cachedTokens: later.cachedTokens ?? earlier.cachedTokens,
    reasoningTokens: later.reasoningTokens ?? earlier.reasoningTokens,
  };
}

/** The prompt's tokens, cached ones included: prompt + cache reads + cache writes, when any is known. */
export function promptTotal(u: Usage): number | undefined {
  const { promptTokens, cacheReadTokens, cacheCreationTokens } = u;
  if (cacheReadTokens === undefined && cacheCreationTokens === undefined) return promptTokens;
  return (promptTokens ?? 0) + (cacheReadTokens ?? 0) + (cacheCreationTokens ?? 0);
}

/**
 * The prompt tokens a prompt cache served, when the usage says: OpenAI's cached_tokens (part of
 * the prompt), else Anthropic's cache_read_input_tokens (added to it by promptTotal).
 */
function cachedPromptTokens(u: Usage): number | undefined {
  return u.cachedTokens ?? u.cacheReadTokens;
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/**
 * Parts no larger than their wholes: reasoning within the completion, cached within the prompt,
 * each cut counted as a rejection (beside `too_large` when the request's usage was refused).
 */
export function clampParts(
  stated: Usage | undefined,
  promptTokens: number | undefined,
  completionTokens: number | undefined,
  refused: boolean,
): { reasoningTokens: number | undefined; cachedTokens: number | undefined; rejections: UsageRejection[] | undefined } {
  let rejections: UsageRejection[] | undefined = refused ? ['too_large'] : undefined;
  let reasoningTokens = stated?.reasoningTokens;
  if (reasoningTokens !== undefined && completionTokens !== undefined && reasoningTokens > completionTokens) {
    reasoningTokens = completionTokens;
    (rejections ??= []).push('reasoning_over_completion');
  }
  let cachedTokens = stated === undefined ? undefined : cachedPromptTokens(stated);
  if (cachedTokens !== undefined && promptTokens !== undefined && cachedTokens > promptTokens) {
    cachedTokens = promptTokens;
    (rejections ??= []).push('cached_over_prompt');
  }
  return { reasoningTokens, cachedTokens, rejections };
}
