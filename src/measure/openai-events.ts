// What one server-sent event of an OpenAI-compatible stream means for measurement:
// does it carry generated output (a token), a usage report, an error, or the end marker?
// Shapes covered: chat.completion.chunk (delta.content / reasoning_content / reasoning /
// tool_calls / refusal / audio / function_call), text_completion (choices[].text), the
// Responses API (`response.*.delta` events, usage in response.completed), vLLM's flat
// `{"object":"error"}` event and OpenAI's `{"error":{...}}`. It also reads why generation
// stopped: `choices[].finish_reason`, or the Responses API's final status, and the engine's own
// `timings` (llama.cpp) where a chunk or body carries them. Anthropic's Messages
// API events, told apart by their `type`, are read by anthropic-events.ts; llama-server's own
// completion format (`/completion`) by llama-events.ts.
import { classifyMessagesEvent, messageFinishReason } from './anthropic-events.ts';
import { readEngineTimings, type EngineTimings } from './engine-timings.ts';
import { classifyLlamaCompletion } from './llama-events.ts';
import { classifyOllamaObject } from './ollama-events.ts';
import { REASONING, readFinishReason, type EventFacts } from './event-facts.ts';
import { readUsage, type Usage } from './usage.ts';

export type { EventFacts } from './event-facts.ts';

/** Adds `model` to facts when the payload names one (a non-empty string); the key is absent otherwise. */
function withModel<T extends object>(facts: T, model: unknown): T & { readonly model?: string } {
  return typeof model === 'string' && model.length > 0 ? { ...facts, model } : facts;
}

const DONE: EventFacts = { token: false, usage: undefined, error: false, done: true, malformed: false, finishReason: undefined };
const MALFORMED: EventFacts = { token: false, usage: undefined, error: false, done: false, malformed: true, finishReason: undefined };
const ERROR: EventFacts = { token: false, usage: undefined, error: true, done: false, malformed: false, finishReason: undefined };
const NOTHING: EventFacts = { token: false, usage: undefined, error: false, done: false, malformed: false, finishReason: undefined };
const TOKEN: EventFacts = { token: true, usage: undefined, error: false, done: false, malformed: false, finishReason: undefined };

/** The last non-null `finish_reason` of a `choices` array (with n > 1, the last choice to finish). */
function choicesFinishReason(choices: readonly unknown[]): string | undefined {
  let reason: string | undefined;
  for (const choice of choices) {
    if (typeof choice !== 'object' || choice === null) continue;
    reason = readFinishReason((choice as Record<string, unknown>).finish_reason) ?? reason;
  }
  return reason;
}

/**
 * The Responses API's final status as a finish reason, in chat's words: `completed` is "stop";
 * `incomplete` is its `incomplete_details.reason`, with `max_output_tokens` as "length".
 */
function responseFinishReason(response: Record<string, unknown>): string | undefined {
  if (response.status === 'completed') return 'stop';
  if (response.status !== 'incomplete') return undefined;
  const details = response.incomplete_details;
  const reason = typeof details === 'object' && details !== null ? readFinishReason((details as Record<string, unknown>).reason) : undefined;
  return reason === 'max_output_tokens' ? 'length' : reason;
}

/** Classifies the `data` of one SSE event; `eventName` is its `event:` field, if any. */
export function classifyEvent(data: string, eventName?: string): EventFacts {
  if (data === '[DONE]') return DONE;
  let payload: unknown;
  try {
    payload = JSON.parse(data);
  } catch {
    return eventName === 'error' ? ERROR : MALFORMED;
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    return eventName === 'error' ? ERROR : MALFORMED;
  }
  return classifyPayload(payload as Record<string, unknown>, eventName);
}

/** Classifies an already-parsed event payload. */
function classifyPayload(p: Record<string, unknown>, eventName?: string): EventFacts {
  const type = p.type;
  if (typeof type === 'string') {
    if (type.startsWith('response.') || type === 'error') return classifyResponsesEvent(p, type);
    const facts = classifyMessagesEvent(p, type);
    if (facts !== undefined) return facts;
  }
  if (eventName === 'error' || p.object === 'error' || (p.error !== undefined && p.error !== null)) {
    return ERROR;
  }
  const native = classifyLlamaCompletion(p);
  if (native !== undefined) {
    const timings = p.timings === undefined ? undefined : readEngineTimings(p.timings);
    return withModel(timings === undefined ? native : { ...native, timings }, p.model);
  }
  // 0: no output, 1: reasoning only, 2: visible output (in any choice).
  let output = 0;
  let finishReason: string | undefined;
  const choices = p.choices;
  if (Array.isArray(choices)) {
    for (const choice of choices) {
      const o = choiceOutput(choice);
      if (o > output) output = o;
      if (output === 2) break;
    }
    finishReason = choicesFinishReason(choices);
  }
  const token = output > 0;
  const usage = p.usage === undefined || p.usage === null ? undefined : readUsage(p.usage);
  const timings = p.timings === undefined ? undefined : readEngineTimings(p.timings);
  if (usage === undefined && finishReason === undefined && timings === undefined) return output === 2 ? TOKEN : output === 1 ? REASONING : NOTHING;
  const facts: EventFacts =
    output === 1
      ? { token, usage, error: false, done: false, malformed: false, finishReason, reasoning: true }
      : { token, usage, error: false, done: false, malformed: false, finishReason };
  return withModel(timings === undefined ? facts : { ...facts, timings }, p.model);
}

function classifyResponsesEvent(p: Record<string, unknown>, type: string): EventFacts {
  if (type === 'error') return ERROR;
  if (type.endsWith('.delta')) {
    const delta = p.delta;
    if (typeof delta === 'string' && delta.length === 0) return NOTHING;
    // response.reasoning_text.delta, response.reasoning_summary_text.delta: not what the user sees.
    return type.includes('reasoning') ? REASONING : TOKEN;
  }
  if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') {
    const response = typeof p.response === 'object' && p.response !== null ? (p.response as Record<string, unknown>) : undefined;
    const usage = response === undefined ? undefined : readUsage(response.usage);
    // The event's type is the status when the response object leaves it out.
    const finishReason = response === undefined ? undefined : responseFinishReason({ status: type.slice('response.'.length), ...response });
    return withModel({ token: false, usage, error: type === 'response.failed', done: false, malformed: false, finishReason }, response?.model);
  }
  return NOTHING;
}

/** A choice's output: 0 none, 1 reasoning only, 2 visible (text, tool calls, a refusal, audio). */
function choiceOutput(choice: unknown): 0 | 1 | 2 {
  if (typeof choice !== 'object' || choice === null) return 0;
  const c = choice as Record<string, unknown>;
  const text = c.text;
  if (typeof text === 'string' && text.length > 0) return 2;
  const delta = c.delta;
  if (typeof delta !== 'object' || delta === null) return 0;
  const d = delta as Record<string, unknown>;
  if (nonEmpty(d.content) || nonEmpty(d.tool_calls) || nonEmpty(d.refusal) || nonEmptyObject(d.audio) || nonEmptyObject(d.function_call)) return 2;
  return nonEmpty(d.reasoning_content) || nonEmpty(d.reasoning) ? 1 : 0;
}

function nonEmptyObject(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  for (const _ in value) return true;
  return false;
}

function nonEmpty(value: unknown): boolean {
  if (typeof value === 'string') return value.length > 0;
  if (Array.isArray(value)) return value.length > 0;
  return false;
}

export interface BodyFacts {
  readonly usage: Usage | undefined;
  readonly error: boolean;
  readonly malformed: boolean;
  /** `choices[].finish_reason` (the last non-null one), the Responses API's status as one, or the Messages API's `stop_reason`. */
  readonly finishReason: string | undefined;
  /** The body's `model`, when it names one. */
  readonly model?: string | undefined;
  /** The engine's own `timings` (llama.cpp), when the body carries them. */
  readonly timings?: EngineTimings | undefined;
}

/** Reads what a complete, non-streamed JSON response body reports. */
export function classifyBody(body: string): BodyFacts {
  let payload: unknown;
  try {
    payload = JSON.parse(body);
  } catch {
    return { usage: undefined, error: false, malformed: true, finishReason: undefined };
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    return { usage: undefined, error: false, malformed: true, finishReason: undefined };
  }
  const p = payload as Record<string, unknown>;
  const error = p.object === 'error' || (p.error !== undefined && p.error !== null);
  const native = classifyLlamaCompletion(p) ?? (p.error === undefined ? classifyOllamaObject(p) : undefined);
  const finishReason =
    native !== undefined
      ? native.finishReason
      : Array.isArray(p.choices)
        ? choicesFinishReason(p.choices)
        : p.object === 'response'
          ? responseFinishReason(p)
          : messageFinishReason(p);
  const timings = readEngineTimings(p.timings);
  const facts: BodyFacts = { usage: readUsage(p.usage) ?? native?.usage, error, malformed: false, finishReason };
  return withModel(timings === undefined ? facts : { ...facts, timings }, p.model);
}
