// What one server-sent event of an OpenAI-compatible stream means for measurement:
// does it carry generated output (a token), a usage report, an error, or the end marker?
// Shapes covered: chat.completion.chunk (delta.content / reasoning_content / reasoning /
// tool_calls / refusal / audio / function_call), text_completion (choices[].text), the
// Responses API (`response.*.delta` events, usage in response.completed), vLLM's flat
// `{"object":"error"}` event and OpenAI's `{"error":{...}}`.
import { readUsage, type Usage } from './usage.ts';

export interface EventFacts {
  /** The event carries generated output: it counts for TTFT and as a token-carrying event. */
  readonly token: boolean;
  /** The usage this event reports, when it reports one. */
  readonly usage: Usage | undefined;
  /** The upstream reported an error inside the stream. */
  readonly error: boolean;
  /** `data: [DONE]`, the chat/completions end marker. */
  readonly done: boolean;
  /** The payload was not JSON: nothing else could be read from it. */
  readonly malformed: boolean;
}

const DONE: EventFacts = { token: false, usage: undefined, error: false, done: true, malformed: false };
const MALFORMED: EventFacts = { token: false, usage: undefined, error: false, done: false, malformed: true };
const ERROR: EventFacts = { token: false, usage: undefined, error: true, done: false, malformed: false };
const NOTHING: EventFacts = { token: false, usage: undefined, error: false, done: false, malformed: false };
const TOKEN: EventFacts = { token: true, usage: undefined, error: false, done: false, malformed: false };

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
export function classifyPayload(p: Record<string, unknown>, eventName?: string): EventFacts {
  const type = p.type;
  if (typeof type === 'string' && (type.startsWith('response.') || type === 'error')) {
    return classifyResponsesEvent(p, type);
  }
  if (eventName === 'error' || p.object === 'error' || (p.error !== undefined && p.error !== null)) {
    return ERROR;
  }
  let token = false;
  const choices = p.choices;
  if (Array.isArray(choices)) {
    for (const choice of choices) {
      if (choiceHasOutput(choice)) {
        token = true;
        break;
      }
    }
  }
  const usage = p.usage === undefined || p.usage === null ? undefined : readUsage(p.usage);
  if (usage === undefined) return token ? TOKEN : NOTHING;
  return { token, usage, error: false, done: false, malformed: false };
}

function classifyResponsesEvent(p: Record<string, unknown>, type: string): EventFacts {
  if (type === 'error') return ERROR;
  if (type.endsWith('.delta')) {
    const delta = p.delta;
    return typeof delta === 'string' && delta.length === 0 ? NOTHING : TOKEN;
  }
  if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') {
    const response = p.response;
    const usage =
      typeof response === 'object' && response !== null
        ? readUsage((response as Record<string, unknown>).usage)
        : undefined;
    return { token: false, usage, error: type === 'response.failed', done: false, malformed: false };
  }
  return NOTHING;
}

function choiceHasOutput(choice: unknown): boolean {
  if (typeof choice !== 'object' || choice === null) return false;
  const c = choice as Record<string, unknown>;
  const text = c.text;
  if (typeof text === 'string' && text.length > 0) return true;
  const delta = c.delta;
  if (typeof delta !== 'object' || delta === null) return false;
  const d = delta as Record<string, unknown>;
  return (
    nonEmpty(d.content) ||
    nonEmpty(d.reasoning_content) ||
    nonEmpty(d.reasoning) ||
    nonEmpty(d.tool_calls) ||
    nonEmpty(d.refusal) ||
    nonEmptyObject(d.audio) ||
    nonEmptyObject(d.function_call)
  );
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

/** Reads what a complete, non-streamed JSON response body reports. */
export function classifyBody(body: string): { usage: Usage | undefined; error: boolean; malformed: boolean } {
  let payload: unknown;
  try {
    payload = JSON.parse(body);
  } catch {
    return { usage: undefined, error: false, malformed: true };
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    return { usage: undefined, error: false, malformed: true };
  }
  const p = payload as Record<string, unknown>;
  const error = p.object === 'error' || (p.error !== undefined && p.error !== null);
  return { usage: readUsage(p.usage), error, malformed: false };
}
