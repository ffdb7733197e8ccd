// A faithful stand-in for a thread-per-connection engine server (cpp-httplib, llama.cpp's
// llama-server; issue 29): `threads` workers, each given a connection when it is accepted (in
// order; the rest wait for one) and held by it until it closes, idles `idleMs` (cpp-httplib's
// 5 s keep-alive: the connection closed without a word) or has served `maxRequests`
// (CPPHTTPLIB_KEEPALIVE_MAX_COUNT, 100: the last answer says `Connection: close`); Nagle on; a
// non-streamed answer written in two writes (head, then body), as cpp-httplib writes them; a
// streamed answer closes its connection a millisecond after its end
// (llama.cpp says `Keep-Alive: timeout=5, max=100` and closes anyway; `closeAfterStream: false`
// keeps it, as an engine that keeps its word). A request's `max_tokens` is the number of token
// events its streamed answer has (llama.cpp's n_predict; finish_reason `length`). GET /metrics
// answers a small exposition, after `metricsDelayMs` (the first `slowScrapes` of them; the rest
// at once).
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net, { type Socket } from 'node:net';
import type { TestContext } from 'node:test';
import { listen } from './listen.ts';

export interface ThreadServerOptions {
  readonly threads: number;
  /** How long a request is worked on before its answer (ms). */
  readonly workMs: number;
  /** A streamed answer's token events, `tokenGapMs` apart. */
  readonly tokens?: number;
  readonly tokenGapMs?: number;
  readonly idleMs?: number;
  /** Requests a connection serves; the last one's answer says `Connection: close` (default 100). */
  readonly maxRequests?: number;
  readonly metricsDelayMs?: number;
  /** How many scrapes (the first ones) wait `metricsDelayMs`; default all. */
  readonly slowScrapes?: number;
  /** Whether a streamed answer's connection is closed a millisecond after its end (default true, as llama.cpp). */
  readonly closeAfterStream?: boolean;
}

export interface ThreadServer {
  readonly url: string;
  readonly stats: {
    /** Connections accepted, and requests answered. */
    connections: number;
    requests: number;
    /** The longest a connection waited for a thread (ms). */
    maxQueueMs: number;
    /** /metrics requests answered, and those that came on a connection that had served a request before. */
    scrapes: number;
    scrapesOnKeptConnection: number;
  };
  /** Connections open now (held by a thread or waiting for one). */
  open(): number;
  /** The open connections whose last request was GET /metrics. */
  openScrapeConnections(): number;
}

const SSE = (i: number): string => `data: {"choices":[{"index":0,"delta":{"content":"t${i}"}}]}\n\n`;
const USAGE = 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":TOKENS}}\n\ndata: [DONE]\n\n';

export async function startThreadServer(t: TestContext, options: ThreadServerOptions): Promise<ThreadServer> {
  const idleMs = options.idleMs ?? 5000;
  const tokens = options.tokens ?? 4;
  const tokenGapMs = options.tokenGapMs ?? 2;
  const maxRequests = options.maxRequests ?? 100;
  const KEEP_ALIVE = { 'keep-alive': `timeout=${Math.ceil(idleMs / 1000)}, max=${maxRequests}` };
  const stats = { connections: 0, requests: 0, maxQueueMs: 0, scrapes: 0, scrapesOnKeptConnection: 0 };
  const served = new WeakMap<Socket, number>();
  const sockets = new Set<Socket>();
  const scrapeConnections = new Set<Socket>();
  const waiting: Array<{ socket: Socket; at: number }> = [];
  let free = options.threads;
  let scrapesAsked = 0;

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const before = served.get(req.socket) ?? 0;
      served.set(req.socket, before + 1);
      // cpp-httplib's last request on a connection: `Connection: close`, then the connection closes.
      if (before + 1 >= maxRequests) res.shouldKeepAlive = false;
      if (req.url === '/metrics' && before > 0) stats.scrapesOnKeptConnection++;
      if (req.url === '/metrics') scrapeConnections.add(req.socket);
      else scrapeConnections.delete(req.socket);
      const slow = req.url === '/metrics' && scrapesAsked++ < (options.slowScrapes ?? Number.POSITIVE_INFINITY);
      const work = req.url === '/metrics' ? (slow ? (options.metricsDelayMs ?? 0) : 0) : options.workMs;
      setTimeout(() => answer(req, res, Buffer.concat(chunks).toString()), work);
    });
  };

  const answer = (req: IncomingMessage, res: ServerResponse, body: string): void => {
    if (res.destroyed) return;
    if (req.url === '/metrics') {
      stats.scrapes++;
      const text = '# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 0\n';
      res.writeHead(200, { ...keepAlive(res), 'content-type': 'text/plain; version=0.0.4', 'content-length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    stats.requests++;
    if (req.method === 'GET') {
      const models = '{"object":"list","data":[{"id":"m","object":"model"}]}';
      writeInTwo(res, models);
      return;
    }
    if (/"stream"\s*:\s*true/.test(body)) {
      res.writeHead(200, { ...keepAlive(res), 'content-type': 'text/event-stream' });
      const asked = /"max_tokens"\s*:\s*(\d+)/.exec(body)?.[1];
      const count = asked === undefined ? tokens : Number(asked);
      let i = 0;
      const next = (): void => {
        if (res.destroyed) return;
        if (i < count) {
          res.write(SSE(i++));
          setTimeout(next, tokenGapMs);
          return;
        }
        res.end(USAGE.replace('TOKENS', String(count)));
        if (options.closeAfterStream !== false) res.once('finish', () => setTimeout(() => req.socket.end(), 1));
      };
      next();
      return;
    }
    writeInTwo(
      res,
      `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
    );
  };

  const keepAlive = (res: ServerResponse): Record<string, string> => (res.shouldKeepAlive ? KEEP_ALIVE : {});

  /** The head in one write, the body in a second, Nagle on: as cpp-httplib answers. */
  const writeInTwo = (res: ServerResponse, text: string): void => {
    res.writeHead(200, { ...keepAlive(res), 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.flushHeaders();
    res.end(text);
  };

  const http1 = http.createServer({ noDelay: false, keepAliveTimeout: idleMs }, handle);
  http1.keepAliveTimeout = idleMs;
  // Node waits a second more than it says by default: cpp-httplib closes at its timeout.
  (http1 as { keepAliveTimeoutBuffer?: number }).keepAliveTimeoutBuffer = 0;
  http1.headersTimeout = idleMs + 1000;
  const dispatch = (): void => {
    while (free > 0 && waiting.length > 0) {
      const { socket, at } = waiting.shift()!;
      if (socket.destroyed) continue;
      free--;
      stats.maxQueueMs = Math.max(stats.maxQueueMs, performance.now() - at);
      // After Node's own close handling of that socket is done.
      socket.once('close', () => {
        free++;
        setImmediate(dispatch);
      });
      socket.setNoDelay(false);
      http1.emit('connection', socket);
      socket.resume();
    }
  };
  // Accepted at once (the kernel would), read only when a thread takes it.
  const listener = net.createServer({ pauseOnConnect: true }, (socket) => {
    stats.connections++;
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      scrapeConnections.delete(socket);
    });
    socket.on('error', () => socket.destroy());
    waiting.push({ socket, at: performance.now() });
    dispatch();
  });
  const { url } = await listen(t, listener);
  t.after(() => http1.close());
  return {
    url,
    stats,
    open: () => sockets.size,
    openScrapeConnections: () => scrapeConnections.size,
  };
}
