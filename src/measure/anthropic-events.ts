// Anthropic's Messages API (`POST /v1/messages`, served by Anthropic and by vLLM, SGLang and
// llama.cpp beside their OpenAI routes): what one stream event means for measurement. A stream is
// `event: <type>` + `data: {"type":"<type>",...}` events: message_start (the message, its model
// and its first usage), content blocks (content_block_start, content_block_delta...,
// content_block_stop), message_delta (stop_reason and the final usage), message_stop, ping, and
// error. Only a content_block_delta that carries output is a token: text (text_delta), tool
// input (input_json_delta), thinking (thinking_delta, a reasoning token: TTFT, not visible output); a signature or a citation is not output,
// nor are starts, stops and pings. Usage is merged field by field by the timer (mergeUsage), as
// the Anthropic SDK merges message_start's and message_delta's.
import { REASONING, readFinishReason, type EventFacts } from './event-facts.ts';
import { QUOTE } from '../json-bytes/bytes.ts';
import { isString, stringEnd } from '../json-bytes/strings.ts';
import { readUsage } from './usage.ts';

const NOTHING: EventFacts = { token: false, usage: undefined, error: false, done: false, malformed: false, finishReason: undefined };
const TOKEN: EventFacts = { token: true, usage: undefined, error: false, done: false, malformed: false, finishReason: undefined };

/** The facts of a Messages API stream event of type `type`; undefined for a type it does not name. */
export function classifyMessagesEvent(p: Record<string, unknown>, type: string): EventFacts | undefined {
  switch (type) {
    case 'content_block_delta': {
      const d = p.delta;
      if (typeof d !== 'object' || d === null) return NOTHING;
      const delta = d as Record<string, unknown>;
      if (nonEmpty(delta.text) || nonEmpty(delta.partial_json)) return TOKEN;
      return nonEmpty(delta.thinking) ? REASONING : NOTHING;
    }
    case 'message_start': {
      const m = p.message;
      if (typeof m !== 'object' || m === null) return NOTHING;
      const message = m as Record<string, unknown>;
      const usage = readUsage(message.usage);
      const facts: EventFacts = { token: false, usage, error: false, done: false, malformed: false, finishReason: undefined };
      return typeof message.model === 'string' && message.model.length > 0 ? { ...facts, model: message.model } : facts;
    }
    case 'message_delta': {
      const usage = readUsage(p.usage);
      const delta = p.delta;
      const finishReason = typeof delta === 'object' && delta !== null ? readFinishReason((delta as Record<string, unknown>).stop_reason) : undefined;
      return usage === undefined && finishReason === undefined ? NOTHING : { token: false, usage, error: false, done: false, malformed: false, finishReason };
    }
    case 'content_block_start':
    case 'content_block_stop':
    case 'message_stop':
    case 'ping':
      return NOTHING;
    default:
      return undefined;
  }
}

/** A non-streamed Messages API answer (`"type":"message"`): its stop_reason, as the finish reason. */
export function messageFinishReason(p: Record<string, unknown>): string | undefined {
  return p.type === 'message' ? readFinishReason(p.stop_reason) : undefined;
}

function nonEmpty(value: unknown): boolean {
  return typeof value === 'string' && value.length > 0;
}

// Where a delta's output string may sit: `"text":"`, `"thinking":"`, `"partial_json":"`.
const VALUE_KEYS = ['text', 'thinking', 'partial_json'].map((key) => Buffer.from(`"${key}":"`, 'latin1'));

/**
 * The hot path's reading of one stream's content_block_delta payloads, without decoding them or
 * JSON.parse. A block's deltas repeat their bytes but for the output string:
 * `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"<text>"}}`. Once
 * the full classifier has read one (`learn`), the bytes around its string become the template;
 * a later payload that is template + a JSON string + template is the same event with another
 * string, a token when that string is not empty (`skim`: true or false); anything else answers
 * undefined, for the full classifier. A template is kept only when a probe proves it: with the
 * empty string in its place the event is no token, with a one-character string it is one.
 */
export interface DeltaSkimmer {
  skim(b: Buffer, start: number, end: number): boolean | undefined;
  learn(b: Buffer, start: number, end: number): void;
  /** The template's tokens are reasoning (a thinking block's), not visible output. */
  readonly reasoning: boolean;
}

export function createDeltaSkimmer(): DeltaSkimmer {
  return new BlockTemplate();
}

// A class, not an object literal with a getter: one per stream, made on the hot path.
class BlockTemplate implements DeltaSkimmer {
  private prefix: Buffer | undefined = undefined;
  private suffix: Buffer | undefined = undefined;
  reasoning = false;

  skim(b: Buffer, start: number, end: number): boolean | undefined {
    const { prefix, suffix } = this;
    if (prefix === undefined || suffix === undefined) return undefined;
    const from = start + prefix.length;
    const to = end - suffix.length;
    if (
      to - from < 2 ||
      b[from] !== QUOTE ||
      b.compare(prefix, 0, prefix.length, start, from) !== 0 ||
      b.compare(suffix, 0, suffix.length, to, end) !== 0 ||
      !isString(b, from, to)
    )
      return undefined;
    return to - from > 2;
  }

  learn(b: Buffer, start: number, end: number): void {
    this.prefix = this.suffix = undefined;
    for (const key of VALUE_KEYS) {
      const at = b.indexOf(key, start);
      if (at === -1 || at >= end) continue;
      const open = at + key.length - 1;
      const quote = stringEnd(b, open + 1, end, false);
      if (quote < 0) return;
      const close = quote + 1;
      const head = b.toString('utf8', start, open);
      const tail = b.toString('utf8', close, end);
      const one = probe(`${head}"x"${tail}`);
      if (probe(`${head}""${tail}`)?.token !== false || one?.token !== true) return;
      this.prefix = Buffer.from(b.subarray(start, open));
      this.suffix = Buffer.from(b.subarray(close, end));
      this.reasoning = one.reasoning === true;
      return;
    }
  }
}

/** What a content_block_delta payload is; undefined for any other payload. */
function probe(payload: string): EventFacts | undefined {
  try {
    const p: unknown = JSON.parse(payload);
    if (typeof p !== 'object' || p === null || Array.isArray(p) || (p as { type?: unknown }).type !== 'content_block_delta') return undefined;
    return classifyMessagesEvent(p as Record<string, unknown>, 'content_block_delta');
  } catch {
    return undefined;
  }
}
