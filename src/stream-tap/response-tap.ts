// Reads an inference response on the side, from the very buffers that are piped to the
// client: the bytes are forwarded first and never wait for this code. A text/event-stream
// body is decoded and split into events (eventsource-parser), each classified and reported to
// the request timer as it arrives; a JSON body is kept up to a cap and read for `usage` at its
// end. Nothing here can throw into the data path: a problem is counted and the tap goes quiet.
import type { IncomingMessage } from 'node:http';
import { brotliDecompressSync, gunzipSync, inflateSync, zstdDecompressSync } from 'node:zlib';
import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';
import { classifyBody, classifyEvent } from '../measure/openai-events.ts';
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

export function isEventStream(contentType: string | undefined): boolean {
  return contentType !== undefined && contentType.toLowerCase().includes('text/event-stream');
}

/** Attaches the tap to an upstream response; call from http-proxy's `proxyRes`, before it pipes. */
export function tapResponse(proxyRes: IncomingMessage, timer: RequestTimer, options: TapOptions): void {
  const status = proxyRes.statusCode ?? 0;
  const streamed = isEventStream(proxyRes.headers['content-type']);
  timer.responseHeaders(status, streamed);
  const encoding = (proxyRes.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  const identity = encoding === 'identity' || encoding === '';

  if (streamed) {
    if (!identity) {
      options.problem('compressed_stream');
      proxyRes.on('data', () => timer.responseBody());
      return;
    }
    tapEventStream(proxyRes, timer, options);
    return;
  }
  const decode = identity ? undefined : DECODERS[encoding];
  if (!identity && decode === undefined) options.problem('unknown_encoding');
  // Only a successful answer carries usage worth reading; error bodies are forwarded unread.
  const wantBody = status >= 200 && status <= 299 && (identity || decode !== undefined);
  tapJsonBody(proxyRes, timer, options, wantBody, decode);
}

function tapEventStream(proxyRes: IncomingMessage, timer: RequestTimer, options: TapOptions): void {
  const decoder = new TextDecoder();
  let live = true;
  const onEvent = (event: EventSourceMessage): void => {
    const facts = classifyEvent(event.data, event.event);
    if (facts.token) timer.tokenEvent(facts.usage?.completionTokens);
    if (facts.usage !== undefined) timer.usage(facts.usage);
    if (facts.error) timer.streamError();
    if (facts.malformed) options.problem('malformed_event');
  };
  const parser: EventSourceParser = createParser({
    onEvent,
    maxBufferSize: options.maxEventBytes,
    onError(error) {
      if (error.type === 'max-buffer-size-exceeded') {
        live = false;
        options.problem('event_too_large');
      }
    },
  });
  const guard = (error: unknown): void => {
    live = false;
    options.problem('tap_error', error);
  };
  proxyRes.on('data', (chunk: Buffer) => {
    timer.responseBody();
    if (!live) return;
    try {
      // stream: true keeps a multibyte character split across chunks for the next call.
      parser.feed(decoder.decode(chunk, { stream: true }));
    } catch (error) {
      guard(error);
    }
  });
  proxyRes.on('end', () => {
    if (!live) return;
    try {
      const tail = decoder.decode();
      if (tail !== '') parser.feed(tail);
      // A last event without its blank line still counts, as a browser's EventSource would not
      // but as the client SDKs do.
      parser.feed('\n\n');
    } catch (error) {
      guard(error);
    }
  });
}

function tapJsonBody(
  proxyRes: IncomingMessage,
  timer: RequestTimer,
  options: TapOptions,
  wantBody: boolean,
  decode: Decode | undefined,
): void {
  let chunks: Buffer[] | undefined = wantBody ? [] : undefined;
  let size = 0;
  proxyRes.on('data', (chunk: Buffer) => {
    timer.responseBody();
    if (chunks === undefined) return;
    size += chunk.length;
    if (size > options.maxBodyBytes) {
      chunks = undefined;
      options.problem('body_too_large');
      return;
    }
    chunks.push(chunk);
  });
  proxyRes.on('end', () => {
    if (chunks === undefined) return;
    try {
      let body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      chunks = undefined;
      if (body.length === 0) return;
      if (decode !== undefined) body = decode(body, options.maxBodyBytes);
      const facts = classifyBody(body.toString('utf8'));
      if (facts.malformed) options.problem('malformed_body');
      if (facts.usage !== undefined) timer.usage(facts.usage);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      options.problem(code === 'ERR_BUFFER_TOO_LARGE' ? 'body_too_large' : 'malformed_body');
    }
  });
}
