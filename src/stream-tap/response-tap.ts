// Reads an inference response on the side: the relay hands it each upstream chunk after writing
// what the client gets of it (those very buffers, or on the usage-strip path the bytes the
// strip took out as well), so the bytes are forwarded first and never wait for this code. By
// the response's head, one of three taps: an event stream's (event-stream-tap.ts), a
// newline-delimited JSON stream's (ndjson-tap.ts: Ollama's own routes) or a JSON body's
// (body-tap.ts). Nothing here can throw into the data path: a problem is counted and the
// tap goes quiet.
import type { IncomingHttpHeaders } from 'node:http';
import type { RequestTimer } from '../measure/request-timer.ts';
import { decoderFor } from './body-decoders.ts';
import { tapBody } from './body-tap.ts';
import { tapEventStream } from './event-stream-tap.ts';
import { isNdjson, tapNdjson } from './ndjson-tap.ts';
import type { ResponseTap, TapOptions } from './tap-contract.ts';

export type { ResponseTap, TapOptions, TapProblem } from './tap-contract.ts';

export function isEventStream(contentType: string | undefined): boolean {
  return contentType?.toLowerCase().includes('text/event-stream') === true;
}

function ignore(): void {}

/** What the tap reads of an upstream response: its status and headers, and whether its body came whole. */
export interface TappedResponse {
  readonly statusCode?: number | undefined;
  readonly headers: IncomingHttpHeaders;
  readonly complete: boolean;
}

/** A tap for an upstream response, from its status and headers; the caller hands it the body. */
export function tapResponse(proxyRes: TappedResponse, timer: RequestTimer, options: TapOptions): ResponseTap {
  const status = proxyRes.statusCode ?? 0;
  const contentType = proxyRes.headers['content-type'];
  const events = isEventStream(contentType);
  const lines = !events && isNdjson(contentType);
  const streamed = events || lines;
  timer.responseHeaders(status, streamed);
  const encoding = proxyRes.headers['content-encoding'];
  const identity = encoding === undefined || encoding === '' || encoding.trim().toLowerCase() === 'identity';

  if (streamed) {
    if (!identity) {
      options.problem('compressed_stream');
      return { chunk: () => timer.responseBody(), end: ignore, close: ignore };
    }
    return events ? tapEventStream(timer, options, () => proxyRes.complete) : tapNdjson(timer, options, () => proxyRes.complete);
  }
  const decode = identity ? undefined : decoderFor(encoding);
  if (!identity && decode === undefined) options.problem('unknown_encoding');
  // Only a successful answer carries usage worth reading; error bodies are forwarded unread.
  const wantBody = status >= 200 && status <= 299 && (identity || decode !== undefined);
  return tapBody(timer, options, wantBody, decode);
}
