// The tap of a newline-delimited JSON stream (`application/x-ndjson`: Ollama's own routes): each
// chunk, read after it was sent on (send-tick-queue.ts), is cut into lines and each line read as
// one of Ollama's objects (ollama-events.ts), its facts going to the request timer as it
// arrives. A line held across reads longer than INFERMETER_MAX_EVENT_BYTES stops the reading,
// as an event does.
import { classifyOllamaObject } from '../measure/ollama-events.ts';
import type { RequestTimer } from '../measure/request-timer.ts';
import { createSendTickQueue } from './send-tick-queue.ts';
import type { ResponseTap, TapOptions } from './tap-contract.ts';

const LF = 0x0a;

export function isNdjson(contentType: string | undefined): boolean {
  return contentType?.toLowerCase().includes('application/x-ndjson') === true;
}

/** `complete`: whether the upstream's message is complete (its end follows in this turn). */
export function tapNdjson(timer: RequestTimer, options: TapOptions, complete: () => boolean): ResponseTap {
  let live = true;
  /** The start of a line not ended yet, kept across chunks. */
  let pending: Buffer[] = [];
  let pendingSize = 0;

  const line = (text: string): void => {
    if (text.trim() === '') return;
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      options.problem('malformed_event');
      return;
    }
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
      options.problem('malformed_event');
      return;
    }
    const facts = classifyOllamaObject(payload as Record<string, unknown>);
    if (facts === undefined) return;
    if (facts.token) timer.tokenEvent(undefined, facts.reasoning);
    if (facts.usage !== undefined) timer.usage(facts.usage);
    if (facts.finishReason !== undefined) timer.finishReason(facts.finishReason);
    if (facts.model !== undefined) timer.responseModel(facts.model);
    if (facts.error) timer.streamError();
  };

  const feed = (chunk: Buffer): boolean => {
    let from = 0;
    for (let at = chunk.indexOf(LF); at !== -1; at = chunk.indexOf(LF, from)) {
      // A line that came whole in one read was never held: only what waits is bounded.
      if (pendingSize > 0 && pendingSize + at - from > options.maxEventBytes) return tooLarge();
      const part = chunk.subarray(from, at);
      line(pendingSize === 0 ? part.toString('utf8') : Buffer.concat([...pending, part]).toString('utf8'));
      pending = [];
      pendingSize = 0;
      from = at + 1;
    }
    if (from < chunk.length) {
      pendingSize += chunk.length - from;
      if (pendingSize > options.maxEventBytes) return tooLarge();
      pending.push(chunk.subarray(from));
    }
    return true;
  };
  const tooLarge = (): boolean => {
    options.problem('event_too_large');
    pending = [];
    return (live = false);
  };
  const read = (chunk: Buffer, at: number): boolean => {
    timer.responseBody(at);
    try {
      return feed(chunk);
    } catch (error) {
      options.problem('tap_error', error);
      return (live = false);
    }
  };
  const queue = createSendTickQueue(read);
  return {
    chunk(chunk, sent = false) {
      const at = timer.responseBody();
      if (live) queue.push(chunk, at, complete(), sent);
    },
    end() {
      queue.drain();
      // A last line without its newline.
      if (live && pendingSize > 0) line(Buffer.concat(pending).toString('utf8'));
      pending = [];
    },
    close: queue.drain,
  };
}
