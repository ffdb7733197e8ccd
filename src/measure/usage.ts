// Token counts as the upstream reported them. Chat and completions say prompt_tokens /
// completion_tokens, the Responses API says input_tokens / output_tokens; embeddings carry
// prompt tokens only. A field that is absent or not a non-negative integer stays undefined.

export interface Usage {
  readonly promptTokens: number | undefined;
  readonly completionTokens: number | undefined;
}

/** Reads a `usage` object; undefined when it holds no usable count (null, {}, garbage). */
export function readUsage(value: unknown): Usage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const u = value as Record<string, unknown>;
  const promptTokens = count(u.prompt_tokens) ?? count(u.input_tokens);
  const completionTokens = count(u.completion_tokens) ?? count(u.output_tokens);
  if (promptTokens === undefined && completionTokens === undefined) return undefined;
  return { promptTokens, completionTokens };
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}
