// Which upstream connection a request goes out on (INFERMETER_UPSTREAM_CONNECTIONS, issue 29).
// Many engine servers give each connection a thread until it closes or idles (cpp-httplib, in
// llama.cpp's llama-server: max(slots + 2, cores - 1) threads, 5 s idle): an upstream connection
// the proxy keeps idle holds a thread that a client then waits for, up to 5 s. The default,
// `mirror`, gives each client connection upstream connections of its own: reused only for that
// client connection's next requests, closed when it closes, and `Connection: close` upstream
// when the client asked for it; an upstream's answer that closes its connection (`Connection:
// close`: cpp-httplib's 100th request on a connection) closes the client's after it too, said in
// the same head, so the client reconnects where it would have directly. A close the upstream
// does not announce (its idle timeout; llama.cpp's close a millisecond after a streamed answer
// that said keep-alive) is not passed on: directly the client's next request would race it and
// fail before any answer, which is the stale race infermeter sends again; through infermeter
// that request goes out on a new upstream connection, the one the client would have opened. The
// engine then sees the connections it would see directly: a client with a connection per
// request gets a fresh upstream connection per request (no thread held, no delayed-ACK stall of
// a reused connection it would not meet directly), a client that keeps its connection gets a
// kept one. A client connection has one upstream connection at a time (issue 49): its pipelined
// requests (Node's server hands JavaScript each one as it parses it, all at once) go upstream
// one after another, each once the response before it has ended, as an engine that reads a
// connection's next request after answering the last one takes them; the wait is the client's
// own (directly, the engine would make it), inside the TTFT measured from arrival. `pool` is one
// shared keep-alive pool (a client's connect saved, at the cost of idle connections the engine
// keeps threads for); `close` a new connection per request. Measured side by side in docs/real-engines.md and docs/performance.md.
import http, { type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { buildConnector as BuildConnector, Client as UndiciClient, Dispatcher } from 'undici';
import { buildConnector, Client, Pool } from './undici-parts.ts';

export type UpstreamConnectionPolicy = 'mirror' | 'pool' | 'close';
export const UPSTREAM_CONNECTION_POLICIES: readonly UpstreamConnectionPolicy[] = ['mirror', 'pool', 'close'];

/**
 * One upstream connection's state, as the request written on it reads it (the stale-connection
 * re-send, upstream-attempt.ts): its socket and how many answers it carried.
 */
export interface UpstreamLine {
  socket: Socket | undefined;
  /** Answers ended on `socket`: a request written after one is on a reused connection. */
  answered: number;
  /** A request is on it, its answer not yet ended. */
  busy: boolean;
  /** What undici's parser read from `socket` last (the relay passes a read of whole chunks on as it came). */
  lastRead: Buffer | undefined;
  /** Called once the parser is done with `lastRead`: at its next read of `socket` (the relay's write of a read's batch). */
  afterRead: (() => void) | undefined;
  /** A one-shot client's (a retry's, `close`'s, a client's last request): a new connection per request. */
  readonly once: boolean;
}

/** What a request's handler learns of the connection it was dispatched on. */
export interface Dispatched {
  line?: UpstreamLine;
}

export interface UpstreamConnections {
  /** The dispatcher a request from `client` goes out through; `keepAlive`: the client's connection stays open after it. */
  dispatcherFor(client: Socket, keepAlive: boolean): Dispatcher;
  /** Each client connection has upstream connections of its own (`mirror`). */
  readonly mirror: boolean;
  /** The dispatcher of requests that each go on a new connection, kept for nothing else (a retry's, `close`'s, a client's last request). */
  fresh(): Dispatcher;
  /** An agent that opens a new connection for each request and keeps none: a websocket's (http-proxy-3). */
  readonly upgrades: http.Agent;
  /**
   * Calls `go` when `res`'s request may go upstream: under mirror once the client connection's
   * earlier responses have ended (Node gives a pipelined request's response the socket then),
   * at once otherwise; never when the client connection closes first.
   */
  turn(res: ServerResponse, go: () => void): void;
  /** Upstream connections open now, idle or busy (for tests and the bench). */
  open(): number;
  /** Client connections with upstream connections of their own, and requests waiting for their turn (mirror; for tests). */
  mirrored(): { readonly clients: number; readonly waiting: number };
  /** Closes every upstream connection. */
  destroy(): void;
}

export interface UpstreamConnectionsOptions {
  readonly policy: UpstreamConnectionPolicy;
  readonly upstream: URL;
  /** CA certificates of an https upstream (with the system's), or {} */
  readonly tls: { readonly ca?: string[] };
  /** A connect that takes longer fails with ECONNECT_TIMEOUT; 0: none. */
  readonly connectTimeoutMs: number;
  /** Bytes that are not HTTP came after an answer's end. */
  readonly strayBytes?: (() => void) | undefined;
}

// undici's own timeouts are off: the data plane's deadlines (deadlines.ts) and the pass-through
// route's idle timeout keep time. An idle connection without a Keep-Alive hint is kept until the
// upstream closes it, as Node's agent kept it. One with a hint is closed 1 s before the hint
// runs out, where Node's agent kept it until the upstream's close: undici has no way to wait
// (its threshold, 2 s by default, set to Node's own bound: a hint of 1 s or less is not reused
// at all). llama.cpp's `timeout=5`: its idle upstream connection closes after 4 s, and the
// client's next request (its own connection kept) goes out on a new one. One request at a time
// per connection: HTTP/1.1 without pipelining, as Node's agent.
const CLIENT_OPTIONS = {
  pipelining: 1,
  headersTimeout: 0,
  bodyTimeout: 0,
  keepAliveTimeout: 2_147_483_647,
  keepAliveMaxTimeout: 2_147_483_647,
  keepAliveTimeoutThreshold: 1_000,
} as const;

/** A Client that tells each request's handler its connection's state (a Pool's clients too). */
class LineClient extends Client {
  readonly line: UpstreamLine;
  constructor(origin: string, options: UndiciClient.Options, line: UpstreamLine) {
    super(origin, options);
    this.line = line;
  }
  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    (handler as Dispatched).line = this.line;
    const socket = this.line.socket;
    if (socket !== undefined && this.line.answered > 0) writeAtOnce(socket);
    return super.dispatch(options, handler);
  }
}

/**
 * undici (8.14, GHSA-35p6-xmwp-9g52) writes a request on a reused idle connection only in the
 * turn's check phase, after every other read of the turn: in a wave (32 streams ending as the
 * next 32 requests arrive) each request then waits upstream for the whole turn, and for the
 * recording of the ends before it (settle-queue.ts), 1.4 ms of the added TTFT p50 (npm run
 * bench:arrival, docs/performance.md). Written at once instead, as Node's own client writes it
 * (the floor, and infermeter's client until undici). What the wait guards against is handled
 * here: a connection the upstream closed as it was reused is the stale race, sent again
 * (upstream-attempt.ts); bytes after an answer's end that were read before the request close
 * the connection and fail no request; bytes still unread when it is written are read as its
 * answer, as Node's client reads them. The state is undici's own, found by name on the socket
 * and set before each dispatch on a reused connection; when undici has none, it has no wait.
 */
function writeAtOnce(socket: Socket): void {
  // Looked up once, on a socket undici has set up (it carried an answer); a plain write of the
  // value undici gives a validated socket (2), so that no socket changes shape.
  if (validation === undefined) validation = Object.getOwnPropertySymbols(socket).find((key) => key.description === 'kIdleSocketValidation') ?? null;
  if (validation !== null) (socket as unknown as Record<symbol, unknown>)[validation] = VALIDATED;
}
const VALIDATED = 2;
/** undici's key of a socket's validation state; null: this undici has none. */
let validation: symbol | null | undefined;

export function createUpstreamConnections(options: UpstreamConnectionsOptions): UpstreamConnections {
  const { policy, tls, upstream } = options;
  const origin = upstream.origin;
  const secure = upstream.protocol === 'https:';
  const connector = buildConnector({
    ...tls,
    allowH2: false,
    timeout: options.connectTimeoutMs > 0 ? options.connectTimeoutMs : null,
  } as BuildConnector.BuildOptions);
  const sockets = new Set<Socket>();
  /** A client whose connector tracks its socket on its line. */
  const client = (once: boolean): LineClient => {
    const line: UpstreamLine = { socket: undefined, answered: 0, busy: false, lastRead: undefined, afterRead: undefined, once };
    const connect: BuildConnector.connector = (connectOptions, callback) =>
      connector(connectOptions, (error, socket) => {
        if (error === null && socket != null) {
          const s = socket as Socket;
          line.socket = s;
          line.answered = 0;
          // undici reads the socket in paused mode: each read it parses is kept for the relay,
          // and its next read (null when the socket has no more) says the last one is parsed.
          const read = s.read;
          s.read = function (this: Socket, size?: number) {
            const after = line.afterRead;
            if (after !== undefined) {
              line.afterRead = undefined;
              after();
            }
            const chunk = read.call(this, size) as Buffer | null;
            if (chunk !== null) line.lastRead = chunk;
            return chunk;
          };
          sockets.add(s);
          s.once('close', () => sockets.delete(s));
        }
        callback(error as Error, socket as never);
      });
    const made = new LineClient(origin, { ...CLIENT_OPTIONS, connect }, line);
    // Bytes that are not HTTP after an answer's end (on a kept connection) fail no request: the
    // connection closes, and the protocol error is counted.
    if (options.strayBytes !== undefined)
      made.on('disconnect', (_origin, _targets, error) => {
        if (!line.busy && stray(error)) options.strayBytes?.();
      });
    return made;
  };
  // One-shot requests share a pool of clients, each connecting anew for each request (sent
  // with `Connection: close`): no Client made and closed per request.
  const oneShot = new Pool(origin, { ...CLIENT_OPTIONS, factory: () => client(true) });
  const fresh = (): Dispatcher => oneShot;
  const agentOptions = { keepAlive: false };
  const upgrades = secure ? new https.Agent({ ...agentOptions, ...tls }) : new http.Agent(agentOptions);
  // The pool: undici's Pool hands a request to its first free connection.
  const pool = policy === 'pool' ? new Pool(origin, { ...CLIENT_OPTIONS, factory: () => client(false) }) : undefined;
  const own = new Map<Socket, LineClient>();
  let waiting = 0;

  const dispatcherFor = (clientSocket: Socket, keepAlive: boolean): Dispatcher => {
    if (pool !== undefined) return pool;
    if (policy === 'close') return fresh();
    const mine = own.get(clientSocket);
    if (mine !== undefined) return mine;
    // The client's last request on this connection: the upstream's is its last too.
    if (!keepAlive) return fresh();
    const made = client(false);
    own.set(clientSocket, made);
    clientSocket.once('close', () => {
      own.delete(clientSocket);
      made.destroy().catch(ignore);
    });
    return made;
  };

  return {
    mirror: policy === 'mirror',
    dispatcherFor,
    fresh,
    upgrades,
    turn(res, go) {
      if (policy !== 'mirror') {
        go();
        return;
      }
      // Not pipelined (the common case): its response has the socket already.
      if (res.socket !== null) {
        go();
        return;
      }
      waiting++;
      const onSocket = (): void => {
        res.off('close', onClose);
        waiting--;
        go();
      };
      // The client connection closed (the client left, a reset, infermeter ended it) before its turn.
      const onClose = (): void => {
        res.off('socket', onSocket);
        waiting--;
      };
      res.once('socket', onSocket);
      res.once('close', onClose);
    },
    open: () => sockets.size,
    mirrored: () => ({ clients: own.size, waiting }),
    destroy() {
      upgrades.destroy();
      oneShot.destroy().catch(ignore);
      pool?.destroy().catch(ignore);
      for (const mine of own.values()) mine.destroy().catch(ignore);
      own.clear();
      for (const socket of sockets) socket.destroy();
    },
  };
}

/** undici's error for bytes that came with no request on the connection, or that were not HTTP. */
function stray(error: Error): boolean {
  const code = (error as { code?: string }).code;
  return code?.startsWith('HPE_') === true || (code === 'UND_ERR_SOCKET' && error.message === 'bad response');
}

function ignore(): void {}
