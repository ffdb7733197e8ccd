// The tap of a text/event-stream response: each chunk, read after it was sent on (a tick queued
// after the send, send-tick-queue.ts), is cut into events by the event splitter and each event
// read on its bytes. The shapes engines send take the fast way: a single `data:` line is
// skimmed in place (skim-event.ts), the Messages API's `event: content_block_delta` + `data:`
// pair through its block's template (anthropic-events.ts); an event of any other form (more
// lines, other fields, comments) has its fields read (event-fields.ts) and is classified in
// full. Each event's facts go to the request timer as it arrives.
import { createDeltaSkimmer } from '../measure/anthropic-events.ts';
import { classifyEvent, type EventFacts } from '../measure/openai-events.ts';
import type { RequestTimer } from '../measure/request-timer.ts';
import { createSkimmer } from '../measure/skim-event.ts';
import { readEventFields } from './event-fields.ts';
import { EventSplitter, type EventSink } from './event-splitter.ts';
import { createSendTickQueue } from './send-tick-queue.ts';
import type { ResponseTap, TapOptions } from './tap-contract.ts';

const LF = 0x0a;
const CR = 0x0d;
const CONTENT_BLOCK_DELTA = Buffer.from('content_block_delta');
/** What ends a last event that came without its blank line (the client SDKs count it). */
const BLANK = Buffer.from('\n\n');

/** A `data:` field begins at i. */
const isDataPrefix = (b: Buffer, i: number): boolean => b[i] === 0x64 && b[i + 1] === 0x61 && b[i + 2] === 0x74 && b[i + 3] === 0x61 && b[i + 4] === 0x3a;

/** An `event:` field begins at i. */
const isEventPrefix = (b: Buffer, i: number): boolean =>
  b[i] === 0x65 && b[i + 1] === 0x76 && b[i + 2] === 0x65 && b[i + 3] === 0x6e && b[i + 4] === 0x74 && b[i + 5] === 0x3a;

/** `complete`: whether the upstream's message is complete (its end follows in this turn). */
export function tapEventStream(timer: RequestTimer, options: TapOptions, complete: () => boolean): ResponseTap {
  let live = true;
  const splitter = new EventSplitter(options.maxEventBytes);

  const report = (facts: EventFacts): void => {
    if (facts.token) timer.tokenEvent(facts.usage?.completionTokens, facts.reasoning);
    if (facts.usage !== undefined) timer.usage(facts.usage);
    if (facts.finishReason !== undefined) timer.finishReason(facts.finishReason);
    if (facts.model !== undefined) timer.responseModel(facts.model);
    if (facts.timings !== undefined) timer.engineTimings(facts.timings);
    if (facts.error) timer.streamError();
    if (facts.malformed) options.problem('malformed_event');
  };

  const skim = createSkimmer();
  /** One `data:` line, bytes [start, end) of b: skimmed in place, classified in full only if need be. */
  const dataLine = (b: Buffer, start: number, end: number): void => {
    const from = start + (b[start + 5] === 0x20 ? 6 : 5);
    const skimmed = skim(b, from, end);
    if (skimmed === true) timer.tokenEvent();
    else if (skimmed === undefined) report(classifyEvent(b.toString('utf8', from, end)));
    else if (skimmed !== false) report(skimmed);
  };

  const deltas = createDeltaSkimmer();
  /**
   * An `event:` line [at, lineEnd), then one `data:` line [dataAt, end) (the Messages API's
   * form). A content_block_delta is skimmed in place once its block's template is known; any
   * other, classified in full.
   */
  const namedEvent = (b: Buffer, at: number, lineEnd: number, dataAt: number, end: number): void => {
    const nameStart = at + (b[at + 6] === 0x20 ? 7 : 6);
    const from = dataAt + (b[dataAt + 5] === 0x20 ? 6 : 5);
    const delta = lineEnd - nameStart === CONTENT_BLOCK_DELTA.length && b.compare(CONTENT_BLOCK_DELTA, 0, CONTENT_BLOCK_DELTA.length, nameStart, lineEnd) === 0;
    if (delta) {
      const skimmed = deltas.skim(b, from, end);
      if (skimmed === true) timer.tokenEvent(undefined, deltas.reasoning);
      if (skimmed !== undefined) return;
    }
    const facts = classifyEvent(b.toString('utf8', from, end), b.toString('utf8', nameStart, lineEnd) || undefined);
    report(facts);
    if (delta && facts.token) deltas.learn(b, from, end);
  };

  const sink: EventSink = {
    event(b, start, end, firstEnd, lines) {
      if (lines === 1 && isDataPrefix(b, start)) return dataLine(b, start, end);
      if (lines === 2 && isEventPrefix(b, start)) {
        const dataAt = firstEnd + (b[firstEnd] === CR && b[firstEnd + 1] === LF ? 2 : 1);
        if (isDataPrefix(b, dataAt)) return namedEvent(b, start, firstEnd, dataAt, end);
      }
      const fields = readEventFields(b, start, end);
      if (fields.error) timer.streamError();
      if (fields.data !== undefined) report(classifyEvent(fields.data, fields.name));
    },
    oversized() {
      live = false;
      options.problem('event_too_large');
    },
  };

  const feed = (chunk: Buffer): void => {
    try {
      splitter.feed(chunk, sink);
    } catch (error) {
      live = false;
      options.problem('tap_error', error);
    }
  };
  const queue = createSendTickQueue((chunk, at) => {
    timer.responseBody(at);
    feed(chunk);
    return live;
  });
  return {
    chunk(chunk, sent = false) {
      const at = timer.responseBody();
      if (live) queue.push(chunk, at, complete(), sent);
    },
    end() {
      queue.drain(); // whatever is still queued comes first
      if (live) feed(BLANK);
    },
    // A response cut short, or whose client left, may never end: what came is read still.
    close: queue.drain,
  };
}
