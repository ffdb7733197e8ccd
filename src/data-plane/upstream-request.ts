// Sends one inference request to the model server on undici's dispatcher (the connection
// upstream-connections.ts chooses): llhttp and a handler per request, with no ClientRequest or
// IncomingMessage streams (issue 54: in a bare pass-through, 0.83x the CPU per chunk and per
// round trip of node:http's client). The measured routes take this lean path instead of
// http-proxy-3, which still serves websockets. What it did for these requests is kept: the
// upstream's path prefix and query, its Host, the `trailer` header dropped, a connect timeout,
// and errors told apart from a client that left mid-upload. The request object is its own
// handler and the upstream's answer: statusCode, headers, rawHeaders and the body's events, as
// much of an IncomingMessage as the routes read. The caller gives it up (destroy) when its
// client leaves.
import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { unaskedUpgrade } from './error-answer.ts';
import { forwardHeaders, headerFilter } from './hop-by-hop.ts';
import type { Dispatched, UpstreamConnections, UpstreamLine } from './upstream-connections.ts';

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

export interface UpstreamHandlers {
  /** The upstream's status and headers arrived. */
  response(response: UpstreamResponse): void;
  /** The request could not be sent or answered, or its answer broke off; not called for a client that left. */
  error(error: Error): void;
}

/** The upstream's answer, as the routes read it (the names of IncomingMessage's). */
export interface UpstreamResponse {
  readonly statusCode: number;
  readonly statusMessage: string;
  /** By lower-case name, Node's way: a repeated content-type or content-length the first, set-cookie a list, others joined. */
  readonly headers: IncomingHttpHeaders;
  /** As the upstream wrote them: name, value, name, value. */
  readonly rawHeaders: readonly string[];
  /** The upstream said it closes its connection after this answer. */
  readonly closesConnection: boolean;
  /** Its last byte came. */
  readonly complete: boolean;
  /** Ended, failed or given up: no more events but 'close'. */
  readonly destroyed: boolean;
  /** Always empty: the body is handed on as it is parsed. */
  readonly readableLength: 0;
  on(event: 'data', listener: (chunk: Buffer) => void): this;
  on(event: 'end' | 'close', listener: () => void): this;
  on(event: 'error', listener: (error: Error) => void): this;
  once(event: 'end' | 'close', listener: () => void): this;
  off(event: 'data', listener: (chunk: Buffer) => void): this;
  off(event: 'end' | 'close', listener: () => void): this;
  off(event: 'error', listener: (error: Error) => void): this;
  /** Stops the body (undici's parser pauses) until resume. */
  pause(): this;
  resume(): this;
  /** The upstream connection's last read (the bytes its parser was handed last), if known. */
  lastRead(): Buffer | undefined;
  /** Gives the answer up: the upstream connection is closed. */
  destroy(error?: Error): void;
  /** Its body to `res` with back-pressure, ended with it. */
  pipe(res: ServerResponse): void;
}

/** The request as its sender handles it. */
export interface UpstreamRequestHandle {
  /** Gives the request up (the connection closed); with `error`, reported as its failure. */
  destroy(error?: Error): void;
  /** It went out on a connection that carried an answer before. */
  readonly reusedSocket: boolean;
  /** Its answer ended, or it failed or was given up. */
  readonly destroyed: boolean;
  /** The connection it was written on, once it was (only this request uses it until its answer ends). */
  readonly socket: Socket | null;
}

/**
 * Whether an upstream request that failed may have been worked on: any byte of a response (a
 * 1xx, or part of a head) came, or the upstream had the request for longer than `boundMs`.
 */
export function mayHaveBeenServed(request: UpstreamRequestHandle, boundMs: number, now = performance.now()): boolean {
  const call = request as UpstreamCall;
  const socket = call.line?.socket;
  if (socket === undefined || call.sentAt === undefined) return false; // never sent
  if (call.informed || socket.bytesRead > call.readBefore) return true;
  return now - call.sentAt > boundMs;
}

// Node's rules for a header repeated in a head (IncomingMessage's headers): these keep the first.
const FIRST_WINS = new Set([
  'content-type',
  'content-length',
  'user-agent',
  'referer',
  'host',
  'authorization',
  'proxy-authorization',
  'if-modified-since',
  'if-unmodified-since',
  'from',
  'location',
  'max-forwards',
  'retry-after',
  'etag',
  'last-modified',
  'server',
  'age',
  'expires',
]);
const CLOSE = /(?:^|,)[\t ]*close[\t ]*(?:,|$)/i;

/** One request upstream: undici's handler of it, and the answer the routes read. */
class UpstreamCall extends EventEmitter implements UpstreamResponse, UpstreamRequestHandle, Dispatcher.DispatchHandler, Dispatched {
  statusCode = 0;
  statusMessage = '';
  headers: IncomingHttpHeaders = EMPTY_HEADERS;
  rawHeaders: string[] = NO_HEADERS;
  closesConnection = false;
  complete = false;
  destroyed = false;
  readonly readableLength = 0 as const;
  /** The connection it was dispatched on (set by the dispatcher: upstream-connections.ts). */
  line?: UpstreamLine;
  reusedSocket = false;
  socket: Socket | null = null;
  sentAt: number | undefined = undefined;
  readBefore = 0;
  informed = false;
  /** Sent on a client connection's own upstream connection (mirror): its close is passed on. */
  mirrored = false;
  private controller: Dispatcher.DispatchController | null = null;
  private answered = false;
  private readonly handlers: UpstreamHandlers;

  constructor(handlers: UpstreamHandlers) {
    super();
    this.handlers = handlers;
  }

  /** The request is being written (pipelining 1: on its connection's socket, now). */
  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.destroyed) {
      controller.abort(aborted());
      return;
    }
    const line = this.line;
    const socket = line?.socket;
    if (line === undefined || socket === undefined) return;
    this.socket = socket;
    line.busy = true;
    this.reusedSocket = line.answered > 0;
    this.readBefore = socket.bytesRead;
    this.sentAt = performance.now();
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, _headers: unknown, statusMessage?: string): void {
    // A 1xx (undici passes each on; Node's client took them apart): the answer is still to come.
    if (statusCode < 200) {
      this.informed = true;
      return;
    }
    if (this.destroyed) return;
    const raw = (controller as { rawHeaders?: Buffer[] | null }).rawHeaders ?? [];
    const list: string[] = new Array(raw.length);
    const headers: IncomingHttpHeaders = {};
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!.toString('latin1');
      const value = raw[i + 1]!.toString('latin1');
      list[i] = name;
      list[i + 1] = value;
      addHeader(headers, name.toLowerCase(), value);
    }
    this.statusCode = statusCode;
    this.statusMessage = statusMessage ?? '';
    this.headers = headers;
    this.rawHeaders = list;
    const connection = headers.connection;
    this.closesConnection = this.line?.once === false && this.mirrored && connection !== undefined && CLOSE.test(connection);
    this.answered = true;
    this.handlers.response(this);
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.destroyed) this.emit('data', chunk);
  }

  onResponseEnd(): void {
    const line = this.line;
    if (line !== undefined) {
      line.answered++;
      line.busy = false;
    }
    if (this.destroyed) return;
    this.complete = true;
    this.destroyed = true;
    this.emit('end');
    this.emit('close');
  }

  onResponseError(_controller: Dispatcher.DispatchController | null, error: Error): void {
    const given = this.destroyed;
    this.destroyed = true;
    if (this.line !== undefined && this.socket !== null) this.line.busy = false;
    // Given up by its sender (the client left): nothing to report but the answer's close.
    const quiet = given && (error as { code?: string }).code === 'UND_ERR_ABORTED';
    const mapped = quiet ? error : nodeError(error);
    if (!this.answered) {
      if (!quiet) this.handlers.error(mapped);
      return;
    }
    if (!quiet) {
      // As Node's client: a connection that broke mid-answer cuts the answer (its 'close' before
      // its end); a parse error or a timeout is the leg's failure as well.
      const code = (mapped as { code?: string }).code;
      if (code !== 'ECONNRESET' && code !== 'EPIPE') this.handlers.error(mapped);
    }
    // On the next tick, as a destroyed stream's: whoever gave it up finishes first (an error answer written).
    process.nextTick(closed, this, quiet ? undefined : mapped);
  }

  lastRead(): Buffer | undefined {
    return this.line?.lastRead;
  }

  pause(): this {
    this.controller?.pause();
    return this;
  }

  resume(): this {
    this.controller?.resume();
    return this;
  }

  destroy(error?: Error): void {
    if (this.destroyed && this.complete) return;
    const controller = this.controller;
    if (controller !== null && !controller.aborted) {
      // Reported through onResponseError, as a failure of its own when given one (a timeout).
      if (error === undefined) this.destroyed = true;
      controller.abort(error ?? aborted());
      return;
    }
    if (this.destroyed) return;
    this.destroyed = true;
    if (error !== undefined) this.onResponseError(null, error);
  }

  pipe(res: ServerResponse): void {
    const onDrain = (): void => {
      this.resume();
    };
    this.on('data', (chunk: Buffer) => {
      if (!res.write(chunk)) {
        this.pause();
        res.once('drain', onDrain);
      }
    });
    this.once('end', () => res.end());
    this.resume();
  }
}

function closed(call: UpstreamCall, error: Error | undefined): void {
  if (error !== undefined) call.emit('error', error);
  call.emit('close');
}

const EMPTY_HEADERS: IncomingHttpHeaders = Object.freeze({}) as IncomingHttpHeaders;
const NO_HEADERS: string[] = [];

function addHeader(headers: IncomingHttpHeaders, name: string, value: string): void {
  const had = headers[name];
  if (had === undefined) {
    headers[name] = name === 'set-cookie' ? [value] : value;
    return;
  }
  if (name === 'set-cookie') (had as string[]).push(value);
  else if (!FIRST_WINS.has(name)) headers[name] = `${had}, ${value}`;
}

function aborted(): Error {
  return Object.assign(new Error('aborted'), { code: 'UND_ERR_ABORTED' });
}

/**
 * undici's errors as Node's client named them, which the attempt's re-send rules and the error
 * answers read (error-answer.ts): a connection the upstream closed is ECONNRESET, a connect or
 * idle timeout ECONNECT_TIMEOUT or ETIMEDOUT, a parse error keeps its HPE_ code.
 */
function nodeError(error: Error): Error {
  const code = (error as { code?: string }).code;
  switch (code) {
    case 'UND_ERR_SOCKET':
      if (error.message === 'bad upgrade') return unaskedUpgrade();
      if (error.message === 'bad response') return Object.assign(new Error(error.message), { code: 'HPE_UNEXPECTED_RESPONSE' });
      return Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    case 'UND_ERR_CONNECT_TIMEOUT':
      return Object.assign(new Error('ECONNECT_TIMEOUT'), { code: 'ECONNECT_TIMEOUT' });
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return Object.assign(new Error('the model server was silent too long'), { code: 'ETIMEDOUT' });
    case 'UND_ERR_HEADERS_OVERFLOW':
      return Object.assign(new Error(error.message), { code: 'HPE_HEADER_OVERFLOW' });
    // undici's parser asserts a status of at least 100 (000 and 099 reach it); Node's parsed them.
    case 'ERR_ASSERTION':
      return Object.assign(new Error(error.message), { code: 'HPE_INVALID_STATUS' });
    case 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH':
      return Object.assign(new Error(error.message), { code: 'HPE_INVALID_CONTENT_LENGTH' });
    case undefined:
      // An HTTPParserError without a code of its own.
      return error.name === 'HTTPParserError' ? Object.assign(new Error(error.message), { code: 'HPE_INVALID' }) : error;
    default:
      return error;
  }
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
    const dispatcher = fresh ? connections.fresh() : connections.dispatcherFor(req.socket, keepAlive);
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
        reset: (dispatcher as { line?: UpstreamLine }).line?.once === true,
        ...(idle > 0 ? { headersTimeout: idle, bodyTimeout: idle } : {}),
      },
      call,
    );
    // A one-shot connection closes once its request is done.
    if (call.line?.once === true) (dispatcher as Dispatcher).close().catch(ignore);
    return call;
  };
}

function ignore(): void {}

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
