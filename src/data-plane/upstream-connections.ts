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
// kept one. `pool` is one shared keep-alive pool (a client's connect
// saved, at the cost of idle connections the engine keeps threads for); `close` a new
// connection per request. Measured side by side in docs/real-engines.md and docs/performance.md.
import http, { type ClientRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';

export type UpstreamConnectionPolicy = 'mirror' | 'pool' | 'close';
export const UPSTREAM_CONNECTION_POLICIES: readonly UpstreamConnectionPolicy[] = ['mirror', 'pool', 'close'];

export interface UpstreamConnections {
  /** The agent a request from `client` goes out through; `keepAlive`: the client's connection stays open after it. */
  agentFor(client: Socket, keepAlive: boolean): http.Agent;
  /** An agent that opens a new connection for each request and keeps none: a retry's. */
  readonly fresh: http.Agent;
  /** Follows `server`'s requests: each client connection's latest response (mirror). */
  watch(server: Server): void;
  /** Upstream connections open now, idle or busy (for tests and the bench). */
  open(): number;
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
  const make = (keepAlive: boolean, scheduling?: 'lifo'): http.Agent =>
    options.https
      ? new https.Agent({ keepAlive, ...(scheduling === undefined ? {} : { scheduling }), ...tls })
      : new http.Agent({ keepAlive, ...(scheduling === undefined ? {} : { scheduling }) });
  const fresh = make(false);
  // The pool (LIFO: the warmest connection first). Node's agent keeps no connection whose
  // `Keep-Alive: timeout` hint is 1 s or less; a longer hint it honours only with an agent
  // timeout, which none of these has: an idle connection stays until the upstream closes it, and
  // a request that meets that close as it reuses it is sent again (the stale race, measured-route.ts).
  const pool = policy === 'pool' ? make(true, 'lifo') : undefined;
  const own = new Map<Socket, http.Agent>();
  // Each client connection's latest response: the one whose head an upstream answer becomes
  // (HTTP/1.1 answers a connection's requests in order; pipelining is the rare exception, where a
  // close meant for an earlier answer closes the connection after a later one: a close is always
  // allowed).
  const latest = new WeakMap<Socket, ServerResponse>();

  /** The client connection's agent: each upstream answer that closes its connection closes the client's after it too. */
  const mirrorOf = (client: Socket): http.Agent => {
    const agent = make(true);
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
    watch(server) {
      if (policy !== 'mirror') return;
      // First, so that a route that sends upstream at once finds it.
      server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => latest.set(req.socket, res));
    },
    open: () => count(fresh) + (pool === undefined ? 0 : count(pool)) + [...own.values()].reduce((n, agent) => n + count(agent), 0),
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
