// Anthropic's Messages API (`POST /v1/messages`, served by Anthropic and by vLLM, SGLang and
// llama.cpp beside their OpenAI routes): what one stream event means for measurement. A stream is
// `event: <type>` + `data: {"type":"<type>",...}` events: message_start (the message, its model
// and its first usage), content blocks (content_block_start, content_block_delta...,
// content_block_stop), message_delta (stop_reason and the final usage), message_stop, ping, and
// error. Only a content_block_delta that carries output is a token: text (text_delta), tool
// input (input_json_delta), thinking (thinking_delta); a signature or a citation is not output,
// nor are starts, stops and pings. Usage is merged field by field by the timer (mergeUsage), as
// the Anthropic SDK merges message_start's and message_delta's.
import { readFinishReason, type EventFacts } from './openai-events.ts';
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
      return nonEmpty(delta.text) || nonEmpty(delta.partial_json) || nonEmpty(delta.thinking) ? TOKEN : NOTHING;
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
