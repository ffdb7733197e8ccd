// Sends one inference request to the model server on undici's dispatcher (the connection
// upstream-connections.ts chooses): llhttp and a handler per request, with no ClientRequest or
// IncomingMessage streams (issue 54: 0.83x node:http's CPU per chunk in a bare pass-through;
// through infermeter 0.88 to 0.93x per event in the throughput scenario, per request within
// the noise). The measured routes take this lean path instead of
// http-proxy-3, which still serves websockets. What it did for these requests is kept: the
// upstream's path prefix and query, its Host, the `trailer` header dropped, a connect timeout,
// and errors told apart from a client that left mid-upload. The request object is its own
// handler and the upstream's answer (upstream-response.ts). The caller gives it up (destroy)
// when its client leaves.
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { forwardHeaders, headerFilter } from './hop-by-hop.ts';
import type { UpstreamConnections } from './upstream-connections.ts';
import { UpstreamCall, type UpstreamHandlers, type UpstreamRequestHandle } from './upstream-response.ts';

// What the proxy sets itself is dropped from the client's headers: the Host always, the
// content-length of a held body (or of a streamed one sent longer than the client's), the
// x-request-id when one is given. `Expect` too: Node's server answered the client's
// `100-continue` already, and the body goes as it comes (undici refuses to send it).
const STREAMED = headerFilter(['host', 'expect']);
const HELD = headerFilter(['host', 'expect', 'content-length']);
const STREAMED_WITH_ID = headerFilter(['host', 'expect', 'x-request-id']);
const HELD_WITH_ID = headerFilter(['host', 'expect', 'content-length', 'x-request-id']);

/** A body streamed upstream with a length of its own (the client's Content-Length and the bytes reserved for usage appended at its end). */
export type SizedStream = Readable & { readonly contentLength?: number };

export interface UpstreamRequestOptions {
  readonly upstream: URL;
  /** Which upstream connection a request goes out on (upstream-connections.ts). */
  readonly connections: UpstreamConnections;
  /** The pass-through route's: no byte from the upstream for this long fails the request with ETIMEDOUT; 0: none. */
  readonly idleTimeoutMs?: number;
}

/**
 * Sends `req`'s method, path and headers with `body` (held: sent with its content-length, or
 * still streaming) upstream; `requestId`, when given, as its x-request-id; `fresh`: on a new
 * connection kept for nothing else; `keepAlive`: the client's connection stays open after this
 * request (false: the upstream's closes after it too).
 */
export type SendUpstream = (
  req: IncomingMessage,
  body: Buffer | Readable | null,
  handlers: UpstreamHandlers,
  requestId?: string,
  fresh?: boolean,
  keepAlive?: boolean,
) => UpstreamRequestHandle;

export function createUpstreamRequest(options: UpstreamRequestOptions): SendUpstream {
  const { upstream, connections } = options;
  const origin = upstream.origin;
  // The Host the upstream expects: its own, port included only when not the scheme's default.
  const host = upstream.host;
  const join = pathJoiner(upstream);
  const idle = options.idleTimeoutMs ?? 0;

  return (req, body, handlers, requestId, fresh = false, keepAlive = true) => {
    const held = Buffer.isBuffer(body);
    // A held body's length, or a streamed one's when it differs from the client's (usage appended).
    const length = held ? body.length : body === null ? undefined : (body as SizedStream).contentLength;
    const own = length !== undefined;
    const filter = requestId === undefined ? (own ? HELD : STREAMED) : own ? HELD_WITH_ID : STREAMED_WITH_ID;
    // As the client wrote them (hop-by-hop ones, `trailer` among them, dropped), then ours.
    const headers = forwardHeaders(req.rawHeaders, filter, []);
    headers.push('host', host);
    if (own) headers.push('content-length', String(length));
    if (requestId !== undefined) headers.push('x-request-id', requestId);
    const call = new UpstreamCall(handlers);
    call.mirrored = connections.mirror;
    const onError = (error: NodeJS.ErrnoException): void => {
      // The client went away mid-upload: its response's 'close' accounts for it.
      if (req.socket.destroyed && error.code === 'ECONNRESET') {
        call.destroy();
        return;
      }
      if (!call.destroyed) call.destroy(error);
    };
    req.on('error', onError);
    call.once('close', () => req.off('error', onError));
    if (!held && body !== null) {
      // undici resumes it as it writes it: the side readers must not drain it first.
      (body as Readable).pause();
      // A body of the data plane's own making (request-body.ts) that closes before its end lost
      // its client: the upstream would wait for the rest. The client's own request is heard above.
      if (body !== req) (body as Readable).once('close', () => (body as Readable).readableEnded || call.destroy());
    }
    const oneShot = connections.fresh();
    const dispatcher = fresh ? oneShot : connections.dispatcherFor(req.socket, keepAlive);
    dispatcher.dispatch(
      {
        origin,
        method: req.method as Dispatcher.HttpMethod,
        path: join(req.url ?? '/'),
        headers,
        body,
        // A connection for this request alone (a retry's, the client's last request on its
        // connection, `close`): `Connection: close` upstream too. Said either way: undici would
        // otherwise close a connection after a HEAD, or after a GET with a body.
        reset: dispatcher === oneShot,
        ...(idle > 0 ? { headersTimeout: idle, bodyTimeout: idle } : {}),
      },
      call,
    );
    return call;
  };
}

/**
 * The upstream's path prefix joined with the client's path, as http-proxy-3 joins them: one
 * slash between the two, and the two query strings merged, the upstream's first. A path in
 * absolute form (`http://host/path`) or starting with `//` is reduced to its path and query
 * first; any other is kept as the client sent it (http-proxy-3 runs each through URL, which
 * resolves `..` and drops an empty `?`; the upstream does its own normalising, as behind nginx).
 */
export function pathJoiner(upstream: URL): (url: string) => string {
  const pathname = upstream.pathname;
  const prefix = pathname.endsWith('/') ? pathname.slice(0, -1) : pathname;
  const query = upstream.search.slice(1);
  return (url) => {
    let path = url;
    if (path.charCodeAt(0) !== 0x2f || path.charCodeAt(1) === 0x2f) {
      const parsed = new URL(path.startsWith('//') ? `http://base.invalid${path}` : path, 'http://base.invalid');
      path = `${parsed.pathname}${parsed.search}`;
    }
    if (query === '') return prefix + path;
    const q = path.indexOf('?');
    if (q === -1) return `${prefix}${path}?${query}`;
    const own = path.slice(q + 1);
    return `${prefix}${path.slice(0, q)}?${own === '' ? query : `${query}&${own}`}`;
  };
}
