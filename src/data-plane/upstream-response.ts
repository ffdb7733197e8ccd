// The answer to one upstream request on undici's dispatcher: the request's handler
// (onRequestStart .. onResponseEnd | onResponseError) and what the routes read of the answer
// (`UpstreamResponse`: IncomingMessage's names, the raw headers as the upstream wrote them, the
// body's slices as 'data' events, views of the read), with no stream between. A 1xx is skipped
// (noted for the stale re-send's rule); undici's errors are named as Node's client named them.
// Over 300 lines: undici's handler and the answer the routes read are one object, the errors' naming with them.
import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Dispatcher } from 'undici';
import type { Dispatched, UpstreamLine } from './upstream-connections.ts';

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
  /**
   * Calls `fn` once the parser is done with the read it parses now, in the same turn (when it
   * reads the connection next), before its next 'data' of another read; false: not known, `fn`
   * is not called. At most one is waiting; it is dropped at the answer's end or failure.
   */
  afterRead(fn: () => void): boolean;
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
const FIRST_WINS = new Set(
  'content-type content-length user-agent referer host authorization proxy-authorization if-modified-since if-unmodified-since from location max-forwards retry-after etag last-modified server age expires'.split(
    ' ',
  ),
);
const CLOSE = /(?:^|,)[\t ]*close[\t ]*(?:,|$)/i;

/** One request upstream: undici's handler of it, and the answer the routes read. */
export class UpstreamCall extends EventEmitter implements UpstreamResponse, UpstreamRequestHandle, Dispatcher.DispatchHandler, Dispatched {
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
      line.afterRead = undefined;
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
    if (this.line !== undefined && this.socket !== null) {
      this.line.busy = false;
      this.line.afterRead = undefined;
    }
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

  afterRead(fn: () => void): boolean {
    const line = this.line;
    if (line === undefined || this.destroyed) return false;
    line.afterRead = fn;
    return true;
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
      // A 101 to a request that asked for no upgrade.
      if (error.message === 'bad upgrade')
        return Object.assign(new Error('the model server switched protocols on a request that asked for no upgrade'), { code: 'HPE_UNEXPECTED_UPGRADE' });
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
