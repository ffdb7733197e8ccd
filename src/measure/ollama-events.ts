// Ollama's own format (`/api/chat`, `/api/generate`): newline-delimited JSON objects, streamed by
// default, each `{"message":{"content":"..."},"done":false}` (chat) or `{"response":"...",
// "done":false}` (generate), the last `"done":true` with `prompt_eval_count` and `eval_count`
// (the prompt's and the generated tokens) and `done_reason`; a non-streamed answer is that last
// object with the whole output. An error is `{"error":"..."}`. Told apart by a boolean `done`
// and no `choices`.
import type { EventFacts } from './event-facts.ts';
import { REASONING, readFinishReason } from './event-facts.ts';
import { readUsage } from './usage.ts';

const TOKEN: EventFacts = { token: true, usage: undefined, error: false, done: false, malformed: false, finishReason: undefined };
const NOTHING: EventFacts = { token: false, usage: undefined, error: false, done: false, malformed: false, finishReason: undefined };
const ERROR: EventFacts = { token: false, usage: undefined, error: true, done: false, malformed: false, finishReason: undefined };

/** The facts of one of Ollama's objects, or undefined when `p` is not one. */
export function classifyOllamaObject(p: Record<string, unknown>): EventFacts | undefined {
  if (typeof p.error === 'string') return ERROR;
  if (typeof p.done !== 'boolean' || p.choices !== undefined) return undefined;
  const output = outputOf(p);
  if (p.done !== true) return output === 2 ? TOKEN : output === 1 ? REASONING : NOTHING;
  const usage = readUsage({ prompt_tokens: p.prompt_eval_count, completion_tokens: p.eval_count });
  const facts: EventFacts = { token: output > 0, usage, error: false, done: false, malformed: false, finishReason: readFinishReason(p.done_reason) };
  return typeof p.model === 'string' && p.model.length > 0 ? { ...facts, model: p.model } : facts;
}

/** 0: no output, 1: thinking only, 2: visible output (text or a tool call). */
function outputOf(p: Record<string, unknown>): 0 | 1 | 2 {
  if (typeof p.response === 'string' && p.response.length > 0) return 2;
  const m = p.message;
  const message = typeof m === 'object' && m !== null ? (m as Record<string, unknown>) : undefined;
  if (message !== undefined) {
    if (typeof message.content === 'string' && message.content.length > 0) return 2;
    if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) return 2;
    if (typeof message.thinking === 'string' && message.thinking.length > 0) return 1;
  }
  return typeof p.thinking === 'string' && p.thinking.length > 0 ? 1 : 0;
}
