// Sends one inference request to the model server. The measured routes take this lean path
// instead of http-proxy-3 (which still serves every other route and websockets): side by side,
// http-proxy-3's per-request machinery (options copied and URL-parsed per request, headers set one
// by one) cost about 10 µs of CPU and 40 µs of latency per one-token round trip, more than the
// performance goals leave for a whole hop. What it did for these requests is kept: the
// upstream's path prefix and query, its Host, the `trailer` header dropped, a connect timeout,
// and errors told apart from a client that left mid-upload. The caller gives the upstream
// request up (destroy) when its client leaves.
import http, { type ClientRequest, type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { unaskedUpgrade } from './error-answer.ts';
import { forwardHeaders, headerFilter } from './hop-by-hop.ts';
import type { UpstreamConnections } from './upstream-connections.ts';

// What the proxy sets itself is dropped from the client's headers: the Host always, the
// content-length of a held body (or of a streamed one sent longer than the client's), the
// x-request-id when one is given.
const STREAMED = headerFilter(['host']);
const HELD = headerFilter(['host', 'content-length']);
const STREAMED_WITH_ID = headerFilter(['host', 'x-request-id']);
const HELD_WITH_ID = headerFilter(['host', 'content-length', 'x-request-id']);

/** A body streamed upstream with a length of its own (the client's Content-Length and the bytes reserved for usage appended at its end). */
export type SizedStream = Readable & { readonly contentLength?: number };

export interface UpstreamRequestOptions {
  readonly upstream: URL;
  /** Which upstream connection a request goes out on (upstream-connections.ts). */
  readonly connections: UpstreamConnections;
  readonly connectTimeoutMs: number;
}

export interface UpstreamHandlers {
  /** The upstream's status and headers arrived. */
  response(proxyRes: IncomingMessage): void;
  /** The request could not be sent or answered; not called for a client that left. */
  error(error: Error): void;
}

// When an attempt's request went out on its socket, what the socket had read by then, and
// whether a 1xx came: kept on the request itself (no closure or map entry per request).
const SENT_AT = Symbol('infermeter.sentAt');
const READ_BEFORE = Symbol('infermeter.readBefore');
const INFORMED = Symbol('infermeter.informed');
type Tracked = ClientRequest & { [SENT_AT]?: number; [READ_BEFORE]?: number; [INFORMED]?: boolean };

/**
 * Whether an upstream request that failed may have been worked on: any byte of a response (a
 * 1xx, or part of a head) came, or the upstream had the request for longer than `boundMs`.
 */
export function mayHaveBeenServed(proxyReq: ClientRequest, boundMs: number, now = performance.now()): boolean {
  const tracked = proxyReq as Tracked;
  const socket = proxyReq.socket;
  const sentAt = tracked[SENT_AT];
  if (socket === null || sentAt === undefined) return false; // never sent
  if (tracked[INFORMED] === true || socket.bytesRead > (tracked[READ_BEFORE] ?? 0)) return true;
  return now - sentAt > boundMs;
}

/** The head (and a held body) is written as the socket is assigned: a reused one at once, a new one on connect. */
function sent(this: Tracked, socket: Socket): void {
  this[READ_BEFORE] = socket.bytesRead;
  this[SENT_AT] = performance.now();
  if (socket.connecting) socket.once('connect', () => (this[SENT_AT] = performance.now()));
}

function informed(this: Tracked): void {
  this[INFORMED] = true;
}

/**
 * Sends `req`'s method, path and headers with `body` (held: sent with its content-length, or
 * still streaming) upstream; `requestId`, when given, as its x-request-id; `fresh`: on a new
 * connection kept for nothing else; `keepAlive`: the client's connection stays open after this
 * request (false: the upstream's closes after it too).
 */
export type SendUpstream = (
  req: IncomingMessage,
  body: Buffer | Readable,
  handlers: UpstreamHandlers,
  requestId?: string,
  fresh?: boolean,
  keepAlive?: boolean,
) => ClientRequest;

export function createUpstreamRequest(options: UpstreamRequestOptions): SendUpstream {
  const { upstream, connections, connectTimeoutMs } = options;
  const request = upstream.protocol === 'https:' ? https.request : http.request;
  const hostname = upstream.hostname.startsWith('[') ? upstream.hostname.slice(1, -1) : upstream.hostname;
  const port = upstream.port === '' ? (upstream.protocol === 'https:' ? 443 : 80) : Number(upstream.port);
  // The Host the upstream expects: its own, port included only when not the scheme's default.
  const host = upstream.host;
  const join = pathJoiner(upstream);

  // One 'socket' listener (a second would make the event's listeners an array per request).
  const onSocket = function (this: Tracked, socket: Socket): void {
    sent.call(this, socket);
    if (connectTimeoutMs > 0 && socket.connecting) connectTimeout(socket, connectTimeoutMs);
  };

  return (req, body, handlers, requestId, fresh = false, keepAlive = true) => {
    const held = Buffer.isBuffer(body);
    // A held body's length, or a streamed one's when it differs from the client's (usage appended).
    const length = held ? body.length : (body as SizedStream).contentLength;
    const own = length !== undefined;
    const filter = requestId === undefined ? (own ? HELD : STREAMED) : own ? HELD_WITH_ID : STREAMED_WITH_ID;
    // As the client wrote them (hop-by-hop ones, `trailer` among them, dropped), then ours.
    const headers = forwardHeaders(req.rawHeaders, filter, []);
    headers.push('host', host);
    if (own) headers.push('content-length', String(length));
    if (requestId !== undefined) headers.push('x-request-id', requestId);
    const proxyReq = request({
      hostname,
      port,
      method: req.method,
      path: join(req.url ?? '/'),
      headers,
      agent: fresh ? connections.fresh : connections.agentFor(req.socket, keepAlive),
    });
    // Every header of the upstream's head, not Node's first 1000 (the rest, content-type among
    // them, would be dropped unsaid); its size stays bounded by the parser's maxHeaderSize.
    proxyReq.maxHeadersCount = 0;
    proxyReq.on('socket', onSocket);
    proxyReq.on('information', informed);
    const onError = (error: NodeJS.ErrnoException): void => {
      // The client went away mid-upload: its response's 'close' accounts for it.
      if (req.socket.destroyed && error.code === 'ECONNRESET') {
        proxyReq.destroy();
        return;
      }
      handlers.error(error);
    };
    req.on('error', onError);
    proxyReq.on('error', onError);
    // A retry listens to the client's request again: each attempt's listener goes with it.
    // ('on': a request closes once; `once` would wrap the listener per request.)
    proxyReq.on('close', () => req.off('error', onError));
    proxyReq.on('response', handlers.response);
    // A 101 to a request that asked for no upgrade: Node would drop the socket and leave the
    // request waiting for a response that never comes.
    proxyReq.on('upgrade', (_response: IncomingMessage, socket: Socket) => {
      socket.destroy();
      handlers.error(unaskedUpgrade());
    });
    if (held) proxyReq.end(body);
    else {
      // A body of the data plane's own making (request-body.ts) that closes before its end lost
      // its client: the upstream would wait for the rest. The client's own request is heard above.
      if (body !== req) body.once('close', () => body.readableEnded || proxyReq.destroy());
      body.pipe(proxyReq);
    }
    return proxyReq;
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

/** A socket still connecting after `ms` is destroyed with ECONNECT_TIMEOUT (as http-proxy-3 does). */
function connectTimeout(socket: Socket, ms: number): void {
  const cleanup = (): void => {
    clearTimeout(timer);
    socket.off('connect', cleanup);
    socket.off('error', cleanup);
    socket.off('close', cleanup);
  };
  const timer = setTimeout(() => {
    cleanup();
    socket.destroy(Object.assign(new Error('ECONNECT_TIMEOUT'), { code: 'ECONNECT_TIMEOUT' }));
  }, ms);
  timer.unref();
  socket.once('connect', cleanup);
  socket.once('error', cleanup);
  socket.once('close', cleanup);
}
