// Reads an inference response on the side, from the upstream's bytes as they came (the very
// buffers sent to the client, except where the usage strip removes the usage-only chunk from
// what the client gets): the data plane hands each chunk over after writing it, so the bytes
// are forwarded first and never wait for this code. A text/event-stream
// body is decoded and split into events (eventsource-parser), each classified and reported to
// the request timer as it arrives; a JSON body is kept up to a cap and read for `usage` at its
// end. Nothing here can throw into the data path: a problem is counted and the tap goes quiet.
import type { IncomingMessage } from 'node:http';
import { brotliDecompressSync, gunzipSync, inflateSync, zstdDecompressSync } from 'node:zlib';
import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';
import { createDeltaSkimmer } from '../measure/anthropic-events.ts';
import { classifyBody, classifyEvent, type EventFacts } from '../measure/openai-events.ts';
import { createSkimmer } from '../measure/skim-event.ts';
import type { RequestTimer } from '../measure/request-timer.ts';

/** Why part of a response could not be measured; label values of infermeter_stream_tap_problems_total. */
export type TapProblem =
  | 'malformed_event' // an SSE data payload that is not JSON
  | 'event_too_large' // one event exceeded INFERMETER_MAX_EVENT_BYTES; the rest of the stream is not read
  | 'body_too_large' // a JSON body over INFERMETER_MAX_RESPONSE_INSPECT_BYTES; its usage is not read
  | 'malformed_body' // a JSON body that does not parse
  | 'compressed_stream' // a content-encoded event stream: forwarded, not measured
  | 'unknown_encoding' // a content-encoding we cannot decode
  | 'tap_error'; // an unexpected exception inside the tap (a bug; logged)

export interface TapOptions {
  readonly maxEventBytes: number;
  readonly maxBodyBytes: number;
  readonly problem: (kind: TapProblem, error?: unknown) => void;
}

type Decode = (body: Buffer, maxOutputLength: number) => Buffer;

const DECODERS: Readonly<Record<string, Decode>> = {
  gzip: (b, max) => gunzipSync(b, { maxOutputLength: max }),
  'x-gzip': (b, max) => gunzipSync(b, { maxOutputLength: max }),
  deflate: (b, max) => inflateSync(b, { maxOutputLength: max }),
  br: (b, max) => brotliDecompressSync(b, { maxOutputLength: max }),
  zstd: (b, max) => zstdDecompressSync(b, { maxOutputLength: max }),
};

const LF = 0x0a;
const CR = 0x0d;
const BLANK = Buffer.from('\n\n');
const CONTENT_BLOCK_DELTA = Buffer.from('content_block_delta');

/** An `event:` field begins at i. */
const isEventPrefix = (b: Buffer, i: number): boolean =>
  b[i] === 0x65 && b[i + 1] === 0x76 && b[i + 2] === 0x65 && b[i + 3] === 0x6e && b[i + 4] === 0x74 && b[i + 5] === 0x3a;

export function isEventStream(contentType: string | undefined): boolean {
  return contentType?.toLowerCase().includes('text/event-stream') === true;
}

/** What reads a response body: handed each chunk once it was sent on to the client. */
export interface ResponseTap {
  readonly chunk: (chunk: Buffer) => void;
  /** The body ended. */
  readonly end: () => void;
  /** The response closed, ended or not: what was handed over is read still. */
  readonly close: () => void;
}

function ignore(): void {}

/** A tap for an upstream response, from its status and headers; the caller hands it the body. */
export function tapResponse(proxyRes: IncomingMessage, timer: RequestTimer, options: TapOptions): ResponseTap {
  const status = proxyRes.statusCode ?? 0;
  const streamed = isEventStream(proxyRes.headers['content-type']);
  timer.responseHeaders(status, streamed);
  const encoding = proxyRes.headers['content-encoding'];
  const identity = encoding === undefined || encoding === '' || encoding.trim().toLowerCase() === 'identity';

  if (streamed) {
    if (!identity) {
      options.problem('compressed_stream');
      return { chunk: () => timer.responseBody(), end: ignore, close: ignore };
    }
    return tapEventStream(proxyRes, timer, options);
  }
  const decode = identity ? undefined : DECODERS[encoding.trim().toLowerCase()];
  if (!identity && decode === undefined) options.problem('unknown_encoding');
  // Only a successful answer carries usage worth reading; error bodies are forwarded unread.
  const wantBody = status >= 200 && status <= 299 && (identity || decode !== undefined);
  return tapJsonBody(timer, options, wantBody, decode);
}

/** Hands a body that is piped elsewhere to the tap: these listeners land after the pipe's. */
export function listenTap(proxyRes: IncomingMessage, tap: ResponseTap): void {
  proxyRes.on('data', tap.chunk);
  proxyRes.on('end', tap.end);
  proxyRes.on('close', tap.close);
}

/**
 * Event streams are read on two paths. The fast one works on the bytes as they come: it cuts
 * events at their blank line and skims single-line `data:` payloads (skim-event.ts) and the
 * Messages API's `event: content_block_delta` + `data:` pairs (anthropic-events.ts) without
 * decoding them; an event of any other shape (several lines, other `event:` fields, comments) is
 * decoded and classified on its own. A stream that uses CR line ends, or starts with a byte-order
 * mark, moves for good to the general path: TextDecoder and eventsource-parser, which handle
 * every form the SSE specification allows.
 */
function tapEventStream(proxyRes: IncomingMessage, timer: RequestTimer, options: TapOptions): ResponseTap {
  let live = true;
  let general: ((chunk: Buffer | undefined) => void) | undefined; // set once on the general path
  // Bytes of an incomplete event (fast path), kept as pieces and joined only once a line ends,
  // so that an event arriving in many small chunks costs linear, not quadratic, copying.
  let pending: Buffer[] = [];
  let pendingLength = 0;
  let first = true;

  const report = (facts: EventFacts): void => {
    if (facts.token) timer.tokenEvent(facts.usage?.completionTokens, facts.reasoning);
    if (facts.usage !== undefined) timer.usage(facts.usage);
    if (facts.finishReason !== undefined) timer.finishReason(facts.finishReason);
    if (facts.model !== undefined) timer.responseModel(facts.model);
    if (facts.timings !== undefined) timer.engineTimings(facts.timings);
    if (facts.error) timer.streamError();
    if (facts.malformed) options.problem('malformed_event');
  };

  const fail = (error: unknown): void => {
    live = false;
    options.problem('tap_error', error);
  };

  const goGeneral = (): void => {
    const decoder = new TextDecoder();
    const parser: EventSourceParser = createParser({
      onEvent: (event: EventSourceMessage) => report(classifyEvent(event.data, event.event)),
      maxBufferSize: options.maxEventBytes,
      onError(error) {
        if (error.type === 'max-buffer-size-exceeded') {
          live = false;
          options.problem('event_too_large');
        }
      },
    });
    // The parser drops unknown fields (and a partial line of one at a chunk's end) without a word:
    // llama.cpp's `error:` lines are watched for beside it.
    const errorField = createErrorFieldWatch();
    general = (chunk) => {
      if (chunk !== undefined) {
        // stream: true keeps a multibyte character split across chunks for the next call.
        const text = decoder.decode(chunk, { stream: true });
        if (errorField(text)) timer.streamError();
        parser.feed(text);
        return;
      }
      const tail = decoder.decode();
      if (errorField(tail)) timer.streamError();
      if (tail !== '') parser.feed(tail);
      // A last event without its blank line still counts, as the client SDKs count it.
      parser.feed('\n\n');
    };
  };

  /**
   * An event of any shape but one `data:` line: decoded and classified on its own. A line whose
   * field is `error` is llama.cpp's in-stream error (`error: {"code":400,...}` after a 200, then
   * `data: [DONE]`): the SSE specification ignores unknown fields, but the request failed.
   */
  const otherEvent = (event: Buffer): void => {
    let data: string | undefined;
    let name: string | undefined;
    for (const line of event.toString('utf8').split('\n')) {
      if (line.startsWith('data:')) {
        const value = line.slice(line.charCodeAt(5) === 0x20 ? 6 : 5);
        data = data === undefined ? value : `${data}\n${value}`;
      } else if (line.startsWith('event:')) name = line.slice(line.charCodeAt(6) === 0x20 ? 7 : 6) || undefined;
      else if (line.startsWith('error:') || line === 'error') timer.streamError();
    }
    if (data !== undefined) report(classifyEvent(data, name));
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

  const isDataPrefix = (b: Buffer, i: number): boolean =>
    b[i] === 0x64 && b[i + 1] === 0x61 && b[i + 2] === 0x74 && b[i + 3] === 0x61 && b[i + 4] === 0x3a;

  const deltas = createDeltaSkimmer();
  /**
   * An `event:` line, then one `data:` line (the Messages API's form): bytes [at, lf) and
   * [lf + 1, end) of b. A content_block_delta is skimmed in place once its block's template is
   * known; any other, decoded and classified on its own, as otherEvent would.
   */
  const namedEvent = (b: Buffer, at: number, lf: number, end: number): void => {
    const nameStart = at + (b[at + 6] === 0x20 ? 7 : 6);
    const from = lf + 1 + (b[lf + 6] === 0x20 ? 6 : 5);
    const delta = lf - nameStart === CONTENT_BLOCK_DELTA.length && b.compare(CONTENT_BLOCK_DELTA, 0, CONTENT_BLOCK_DELTA.length, nameStart, lf) === 0;
    if (delta) {
      const skimmed = deltas.skim(b, from, end);
      if (skimmed === true) timer.tokenEvent(undefined, deltas.reasoning);
      if (skimmed !== undefined) return;
    }
    const facts = classifyEvent(b.toString('utf8', from, end), b.toString('utf8', nameStart, lf) || undefined);
    report(facts);
    if (delta && facts.token) deltas.learn(b, from, end);
  };

  const fast = (chunk: Buffer): void => {
    if (first) {
      first = false;
      if (chunk[0] === 0xef) {
        goGeneral(); // a byte-order mark: let the parser strip it
        general!(chunk);
        return;
      }
    }
    let b = chunk;
    if (pendingLength > 0) {
      if (chunk.indexOf(LF) === -1 && chunk.indexOf(CR) === -1) {
        pending.push(Buffer.from(chunk));
        pendingLength += chunk.length;
        if (pendingLength > options.maxEventBytes) {
          live = false;
          options.problem('event_too_large');
        }
        return;
      }
      pending.push(chunk);
      b = Buffer.concat(pending, pendingLength + chunk.length);
      pending = [];
      pendingLength = 0;
    }
    // CR line ends are rare: one search per chunk, and the general parser from there on.
    const cr = b.indexOf(CR);
    const limit = cr === -1 ? b.length : cr;
    let at = 0;
    while (at < limit) {
      const lf = b.indexOf(LF, at);
      if (lf === -1 || lf >= limit) break;
      if (lf === at) {
        at++; // a stray blank line
        continue;
      }
      if (b[lf + 1] === LF && isDataPrefix(b, at)) {
        // The common event: one `data:` line, then the blank line.
        dataLine(b, at, lf);
        at = lf + 2;
        continue;
      }
      if (isEventPrefix(b, at) && isDataPrefix(b, lf + 1)) {
        const end = b.indexOf(LF, lf + 1);
        if (end !== -1 && end < limit && b[end + 1] === LF) {
          namedEvent(b, at, lf, end);
          at = end + 2;
          continue;
        }
      }
      const end = b.indexOf(BLANK, at);
      if (end === -1 || end >= limit) break;
      otherEvent(b.subarray(at, end));
      at = end + 2;
    }
    if (cr !== -1) {
      goGeneral();
      general!(b.subarray(at));
      return;
    }
    if (at < b.length) {
      if (b.length - at > options.maxEventBytes) {
        live = false;
        options.problem('event_too_large');
        return;
      }
      // A copy: a view would keep the whole socket read buffer (up to 64 KiB) alive per stream.
      pending = [Buffer.from(b.subarray(at))];
      pendingLength = b.length - at;
    }
  };

  // Node's response corks the client socket on a chunked write and sends the chunk on the next
  // tick: a chunk read right in its 'data' event would be read before it left. So each chunk is
  // read in a tick queued after that send, with the time it arrived. A chunk that came with the
  // response's end (the upstream's message is complete) is read at 'end', after the pipe has
  // ended the client's response: reading it in between would hold the end back.
  const chunks: Buffer[] = [];
  const times: number[] = [];
  let queued = false;
  const readQueued = (): void => {
    queued = false;
    for (let i = 0; i < chunks.length && live; i++) {
      timer.responseBody(times[i]);
      try {
        if (general !== undefined) general(chunks[i]!);
        else fast(chunks[i]!);
      } catch (error) {
        fail(error);
      }
    }
    chunks.length = 0;
    times.length = 0;
  };
  const chunk = (chunk: Buffer): void => {
    const at = timer.responseBody();
    if (!live) return;
    chunks.push(chunk);
    times.push(at);
    if (!queued && !proxyRes.complete) {
      queued = true;
      process.nextTick(readQueued);
    }
  };
  const end = (): void => {
    readQueued(); // whatever is still queued comes first
    if (!live) return;
    try {
      if (general !== undefined) general(undefined);
      else if (pendingLength > 0) {
        // A last event without its blank line still counts, as the client SDKs count it.
        const rest = Buffer.concat(pending, pendingLength);
        pending = [];
        pendingLength = 0;
        const trimmed = rest[rest.length - 1] === LF ? rest.subarray(0, rest.length - 1) : rest;
        if (trimmed.length === 0) return;
        if (trimmed.indexOf(LF) === -1 && isDataPrefix(trimmed, 0)) dataLine(trimmed, 0, trimmed.length);
        else otherEvent(trimmed);
      }
    } catch (error) {
      fail(error);
    }
  };
  // A response cut short, or whose client left, may never end: what came is read still.
  return { chunk, end, close: readQueued };
}

/**
 * Watches decoded SSE text, in pieces cut anywhere, for a line whose field is `error` (see
 * otherEvent): true when such a line began in this piece. Any of CR, LF, CRLF ends a line.
 */
function createErrorFieldWatch(): (text: string) => boolean {
  let head = ''; // the current line's first characters, up to 6
  let decided = false;
  return (text) => {
    let found = false;
    let i = 0;
    while (i < text.length) {
      let j = i;
      while (j < text.length && text.charCodeAt(j) !== LF && text.charCodeAt(j) !== CR) j++;
      if (!decided && head.length < 6) head += text.slice(i, Math.min(j, i + 6 - head.length));
      if (!decided && head === 'error:') {
        found = true;
        decided = true;
      }
      if (j === text.length) break;
      if (!decided && head === 'error') found = true; // the field with no value
      head = '';
      decided = false;
      i = j + 1;
    }
    return found;
  };
}

function tapJsonBody(timer: RequestTimer, options: TapOptions, wantBody: boolean, decode: Decode | undefined): ResponseTap {
  let chunks: Buffer[] | undefined = wantBody ? [] : undefined;
  let size = 0;
  const chunk = (chunk: Buffer): void => {
    timer.responseBody();
    if (chunks === undefined) return;
    size += chunk.length;
    if (size > options.maxBodyBytes) {
      chunks = undefined;
      options.problem('body_too_large');
      return;
    }
    chunks.push(chunk);
  };
  const end = (): void => {
    if (chunks === undefined) return;
    try {
      let body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      chunks = undefined;
      if (body.length === 0) return;
      if (decode !== undefined) body = decode(body, options.maxBodyBytes);
      const facts = classifyBody(body.toString('utf8'));
      if (facts.malformed) options.problem('malformed_body');
      if (facts.usage !== undefined) timer.usage(facts.usage);
      if (facts.finishReason !== undefined) timer.finishReason(facts.finishReason);
      if (facts.model !== undefined) timer.responseModel(facts.model);
      if (facts.timings !== undefined) timer.engineTimings(facts.timings);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      options.problem(code === 'ERR_BUFFER_TOO_LARGE' ? 'body_too_large' : 'malformed_body');
    }
  };
  return { chunk, end, close: ignore };
}
