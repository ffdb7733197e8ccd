// llama-server's own completion format (`/completion`, `/completions` without /v1, `/infill`):
// each streamed event `{"content":"...","stop":false,...}`, the last `"stop":true` with
// `tokens_predicted` and `tokens_evaluated` (the request's generated and prompt tokens) and why
// it stopped (`stop_type`); a non-streamed answer is that last object with the whole content.
// Told apart from OpenAI's shapes by a string `content` beside a boolean `stop` and no `choices`.
import type { EventFacts } from './event-facts.ts';
import { readUsage } from './usage.ts';

/** The facts of a llama.cpp native completion object, or undefined when `p` is not one. */
export function classifyLlamaCompletion(p: Record<string, unknown>): EventFacts | undefined {
  if (typeof p.content !== 'string' || typeof p.stop !== 'boolean' || p.choices !== undefined) return undefined;
  const token = p.content.length > 0;
  if (p.stop !== true) return { token, usage: undefined, error: false, done: false, malformed: false, finishReason: undefined };
  const usage = readUsage({ prompt_tokens: p.tokens_evaluated, completion_tokens: p.tokens_predicted });
  return { token, usage, error: false, done: false, malformed: false, finishReason: stopReason(p.stop_type) };
}

/** llama.cpp's stop type in OpenAI's words (its own OpenAI routes map them so). */
function stopReason(type: unknown): string | undefined {
  return type === 'eos' || type === 'word' ? 'stop' : type === 'limit' ? 'length' : undefined;
}
