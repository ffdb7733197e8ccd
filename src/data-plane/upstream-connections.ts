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
import http, { type ClientRequest, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';

export type UpstreamConnectionPolicy = 'mirror' | 'pool' | 'close';
export const UPSTREAM_CONNECTION_POLICIES: readonly UpstreamConnectionPolicy[] = ['mirror', 'pool', 'close'];

export interface UpstreamConnections {
  /** The agent a request from `client` goes out through; `keepAlive`: the client's connection stays open after it. */
  agentFor(client: Socket, keepAlive: boolean): http.Agent;
  /** An agent that opens a new connection for each request and keeps none: a retry's. */
  readonly fresh: http.Agent;
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
  readonly https: boolean;
  /** CA certificates of an https upstream (with the system's), or {} */
  readonly tls: { readonly ca?: string[] };
}

export function createUpstreamConnections(options: UpstreamConnectionsOptions): UpstreamConnections {
  const { policy, tls } = options;
  const make = (keepAlive: boolean, scheduling?: 'lifo', maxSockets?: number): http.Agent => {
    const settings = { keepAlive, ...(scheduling === undefined ? {} : { scheduling }), ...(maxSockets === undefined ? {} : { maxSockets }) };
    return options.https ? new https.Agent({ ...settings, ...tls }) : new http.Agent(settings);
  };
  const fresh = make(false);
  // The pool (LIFO: the warmest connection first). Node's agent keeps no connection whose
  // `Keep-Alive: timeout` hint is 1 s or less; a longer hint it honours only with an agent
  // timeout, which none of these has: an idle connection stays until the upstream closes it, and
  // a request that meets that close as it reuses it is sent again (the stale race, measured-route.ts).
  const pool = policy === 'pool' ? make(true, 'lifo') : undefined;
  const own = new Map<Socket, http.Agent>();
  // Each client connection's latest response to go upstream: the one whose head an upstream
  // answer becomes (set at its turn, so a pipelined request's close reaches its own answer).
  const latest = new WeakMap<Socket, ServerResponse>();
  let waiting = 0;

  /** The client connection's agent: each upstream answer that closes its connection closes the client's after it too. */
  const mirrorOf = (client: Socket): http.Agent => {
    // One socket: should a turn come before the last answer's socket was handed back (Node frees
    // it a tick after the answer's end), its request waits for it rather than open a second.
    const agent = make(true, undefined, 1);
    const add = (agent as unknown as AddRequest).addRequest;
    // ClientRequest calls addRequest(req, options): no rest array, no closure per request.
    (agent as unknown as AddRequest).addRequest = function (this: http.Agent, proxyReq: ClientRequest, requestOptions: unknown): void {
      (proxyReq as Mirrored)[CLIENT_RESPONSE] = latest.get(client);
      // Before the route's own listener writes the client's head from res.shouldKeepAlive.
      proxyReq.prependListener('response', closeAfterUpstream);
      add.call(this, proxyReq, requestOptions);
    };
    return agent;
  };

  const agentFor = (client: Socket, keepAlive: boolean): http.Agent => {
    if (pool !== undefined) return pool;
    if (policy === 'close') return fresh;
    const mine = own.get(client);
    if (mine !== undefined) return mine;
    // The client's last request on this connection: the upstream's is its last too.
    if (!keepAlive) return fresh;
    const agent = mirrorOf(client);
    own.set(client, agent);
    client.once('close', () => {
      own.delete(client);
      agent.destroy();
    });
    return agent;
  };

  const count = (agent: http.Agent): number => {
    let n = 0;
    for (const list of Object.values(agent.sockets)) n += list?.length ?? 0;
    for (const list of Object.values(agent.freeSockets)) n += list?.length ?? 0;
    return n;
  };

  return {
    agentFor,
    fresh,
    turn(res, go) {
      if (policy !== 'mirror') {
        go();
        return;
      }
      const client = res.req.socket;
      // Not pipelined (the common case): its response has the socket already.
      if (res.socket !== null) {
        latest.set(client, res);
        go();
        return;
      }
      waiting++;
      const onSocket = (): void => {
        res.off('close', onClose);
        waiting--;
        latest.set(client, res);
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
    open: () => count(fresh) + (pool === undefined ? 0 : count(pool)) + [...own.values()].reduce((n, agent) => n + count(agent), 0),
    mirrored: () => ({ clients: own.size, waiting }),
    destroy() {
      fresh.destroy();
      pool?.destroy();
      for (const agent of own.values()) agent.destroy();
      own.clear();
    },
  };
}

const CLIENT_RESPONSE = Symbol('infermeter.clientResponse');
type Mirrored = ClientRequest & { [CLIENT_RESPONSE]?: ServerResponse | undefined };

/**
 * An upstream request's 'response' (once per request, so a plain listener): Node set its
 * shouldKeepAlive from the upstream's head (`Connection: close`, HTTP/1.0); a close is passed on
 * to the client response that was the connection's latest when the request was sent.
 */
function closeAfterUpstream(this: Mirrored): void {
  const res = this[CLIENT_RESPONSE];
  if (!this.shouldKeepAlive && res !== undefined && !res.headersSent) res.shouldKeepAlive = false;
}

/** Node's Agent#addRequest, through which every request it serves comes (not in its types). */
interface AddRequest {
  addRequest(this: http.Agent, req: ClientRequest, options: unknown): void;
}
