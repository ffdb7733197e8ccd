// The data plane: a node:http server in front of the model server. Every request is proxied as
// it comes: an inference request on a lean path of its own (upstream-request.ts), everything else
// (other routes, websockets) with http-proxy-3. An inference request additionally gets an
// Exchange: a request timer, a reader of its body (model, stream), a tap on its response and,
// when usage is injected, a filter that removes the injected usage chunk. The tap sees the very
// buffers that are sent to the client, after they are written (relay.ts), so measurement can
// neither delay nor alter them.
import { randomUUID } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { Readable, type Duplex } from 'node:stream';
import { rootCertificates as tlsRootCertificates } from 'node:tls';
import { createProxyServer } from 'http-proxy-3';
import type { TlsFiles } from '../config/security.ts';
import { createConcurrencyLimit } from './concurrency-limit.ts';
import { ms, type AccessLog, type AccessRecord } from '../access-log.ts';
import type { Clock } from '../measure/clock.ts';
import { createRequestTimer, type MeasurementSink, type RequestTimer } from '../measure/request-timer.ts';
import type { InferenceApi, RequestSample } from '../measure/sample.ts';
import type { Logger } from '../log.ts';
import { createBodyScanner } from '../stream-tap/request-body-scanner.ts';
import { tapRequestBody, type UninspectedReason } from '../stream-tap/request-tap.ts';
import { isEventStream, listenTap, tapResponse, type ResponseTap, type TapProblem } from '../stream-tap/response-tap.ts';
import { createUsageStrip } from '../stream-tap/usage-strip.ts';
import { createDeadlines } from './deadlines.ts';
import { forwardHeaders, headerFilter, stripHopByHop } from './hop-by-hop.ts';
import { inferenceApi } from './inference-route.ts';
import { proxyErrorResponse, type ProxyErrorKind } from './openai-error.ts';
import { relay } from './relay.ts';
import { createUpstreamRequest } from './upstream-request.ts';
import { injectUsage, rejectsStreamOptions } from './usage-injection.ts';

export interface UsageInjection {
  /** Whether to inject now: on, and the upstream has not refused stream_options. */
  active(): boolean;
  /** The upstream refused stream_options: stop injecting, say so once. */
  refused(): void;
  injected(): void;
  stripped(bytes: number): void;
}

export interface DataPlaneOptions {
  readonly upstream: URL;
  readonly clock: Clock;
  readonly sink: MeasurementSink;
  readonly log: Logger;
  readonly maxInspectBytes: number;
  readonly maxResponseInspectBytes: number;
  readonly maxEventBytes: number;
  /** Counts bodies that gave no labels. */
  readonly uninspected: (reason: UninspectedReason) => void;
  /** Counts parts of responses that could not be measured. */
  readonly tapProblem: (kind: TapProblem) => void;
  /** Counts failures of the proxy itself to reach or hear the upstream, by kind. */
  readonly proxyError: (kind: ProxyErrorKind) => void;
  /** Usage injection for streaming chat and completions requests; undefined: off. */
  readonly usageInjection?: UsageInjection | undefined;
  /** The per-request log; undefined: off. */
  readonly accessLog?: AccessLog | undefined;
  /** TLS of the data plane's listener; undefined: plain HTTP. */
  readonly tls?: TlsFiles | undefined;
  /** CA certificates trusted for an https:// upstream, besides the system's. */
  readonly upstreamCa?: Buffer | undefined;
  readonly limits?: DataPlaneLimits;
  /** Counts inference requests refused because the concurrency limit's queue was full. */
  readonly rejected?: () => void;
  /** A connection dropped before its request could be read (slow client, not HTTP). */
  readonly clientError?: (kind: ClientErrorKind) => void;
}

/** Why a client connection was dropped before its request was read. */
export type ClientErrorKind = 'timeout' | 'malformed';

export interface DataPlaneLimits {
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly upstreamConnectTimeoutMs: number;
  readonly upstreamIdleTimeoutMs: number;
  /** 0: none. */
  readonly totalTimeoutMs: number;
  /** 0: none. */
  readonly maxConcurrency: number;
}

const DEFAULT_LIMITS: DataPlaneLimits = {
  headersTimeoutMs: 60_000,
  requestTimeoutMs: 300_000,
  upstreamConnectTimeoutMs: 10_000,
  upstreamIdleTimeoutMs: 600_000,
  totalTimeoutMs: 3_600_000,
  maxConcurrency: 0,
};

export interface DataPlane {
  readonly server: http.Server;
  /** Client connections open now. */
  connections(): number;
  /**
   * Stops accepting; lets requests in flight finish (connections close after their current
   * response) for up to `timeoutMs`, then cuts what is left. Resolves when no connection is open.
   */
  drain(timeoutMs: number): Promise<void>;
  /** Stops accepting, ends idle and unused connections and upstream sockets; resolves when no connection is left. */
  close(): Promise<void>;
}

/** One inference request on its way through. */
interface Exchange {
  readonly api: InferenceApi;
  readonly timer: RequestTimer;
  readonly requestId: string | undefined;
  bytesIn: number;
  bytesOut: number;
  /** Set when usage was injected: the original body, for the one retry without it. */
  injection: { readonly original: Buffer; refused: boolean } | undefined;
  /** The request to the upstream, once there is one (a timeout or a client that left aborts it). */
  upstreamRequest: http.ClientRequest | undefined;
  /** The upstream's response, once it began. */
  upstreamResponse: IncomingMessage | undefined;
}

// The upstream response of a request proxied by http-proxy-3 (no Exchange).
const UPSTREAM_RESPONSE = Symbol('infermeter.upstreamResponse');
type Tagged = IncomingMessage & { [UPSTREAM_RESPONSE]?: IncomingMessage };

const TIMEOUTS = new Set(['ECONNECT_TIMEOUT', 'ETIMEDOUT']);
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;
/** An upstream's answer to an injected request that may be a refusal of stream_options. */
const MAX_REFUSAL_BYTES = 64 * 1024;
// A response's head: the upstream's headers but the hop-by-hop ones (and its content-length
// when the body is rewritten); the connection header is the proxy's.
const RESPONSE = headerFilter();
const REWRITTEN_RESPONSE = headerFilter(['content-length']);

export function createDataPlane(options: DataPlaneOptions): DataPlane {
  const { upstream, clock, sink, log, usageInjection, accessLog } = options;
  const limits = options.limits ?? DEFAULT_LIMITS;
  const agent =
    upstream.protocol === 'https:'
      ? new https.Agent({ keepAlive: true, scheduling: 'lifo', ...(options.upstreamCa === undefined ? {} : { ca: [...tlsRootCertificates, options.upstreamCa.toString('utf8')] }) })
      : new http.Agent({ keepAlive: true, scheduling: 'lifo' });
  const proxy = createProxyServer({ target: upstream, agent, changeOrigin: true, ws: true, connectTimeout: limits.upstreamConnectTimeoutMs });
  const sendUpstream = createUpstreamRequest({ upstream, agent, connectTimeoutMs: limits.upstreamConnectTimeoutMs });
  const limit = limits.maxConcurrency > 0 ? createConcurrencyLimit(limits.maxConcurrency) : undefined;
  let draining = false;

  // An upstream silent for longer than the idle timeout (no headers, or no bytes mid-stream) is
  // given up on: 504 when nothing was sent to the client yet, a cut response otherwise. The
  // measured routes' timeouts are kept by one sweep for all (deadlines.ts); http-proxy-3's
  // requests by Node's socket timeout.
  const deadlines = createDeadlines(limits.upstreamIdleTimeoutMs, limits.totalTimeoutMs);
  const idleTimeout = (proxyReq: http.ClientRequest): void => {
    proxyReq.setTimeout(limits.upstreamIdleTimeoutMs, () => proxyReq.destroy(timeoutError('the model server was silent too long')));
  };
  proxy.on('proxyReq', idleTimeout);

  const tapOptions = {
    maxEventBytes: options.maxEventBytes,
    maxBodyBytes: options.maxResponseInspectBytes,
    problem(kind: TapProblem, error?: unknown) {
      options.tapProblem(kind);
      if (kind === 'tap_error') log.warnThrottled('tap_error', 'stream tap failed; response forwarded unmeasured', { error: String(error) });
    },
  };

  // Not expected: a write after end would be a bug, but one that must not take the proxy down.
  const onResponseError = (error: Error): void => log.warnThrottled('response_error', 'error on a client response', { error: String(error) });

  /** What every upstream response gets, however it is proxied. */
  function upstreamResponded(proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse, exchange: Exchange | undefined): void {
    res.on('error', onResponseError);
    // A response that breaks off upstream must break off for the client too: ending it
    // cleanly would turn a truncated answer into one that looks whole.
    proxyRes.on('error', ignore);
    proxyRes.on('close', () => {
      // Not a cut for the client when its answer has ended already (its own error answer).
      if (proxyRes.complete || res.destroyed || res.writableEnded) return;
      exchange?.timer.fail('upstream_reset');
      options.proxyError('upstream_reset');
      log.warnThrottled('upstream_reset', 'upstream closed a response before its end', { path: pathOf(req) });
      res.destroy();
    });
  }

  proxy.on('proxyRes', (proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse) => {
    (req as Tagged)[UPSTREAM_RESPONSE] = proxyRes;
    stripHopByHop(proxyRes.headers);
    // The client's connection, not the upstream's (see head()). Said explicitly, or http-proxy
    // would answer keep-alive to a client that asked to close.
    proxyRes.headers.connection = res.shouldKeepAlive ? 'keep-alive' : 'close';
    upstreamResponded(proxyRes, req, res, undefined);
    setImmediate(flushIdleHeaders, res, proxyRes);
  });

  /** An inference request's response: status and headers copied, the body relayed, then tapped. */
  function answer(proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse, exchange: Exchange): void {
    exchange.upstreamResponse = proxyRes;
    if (res.writableEnded || res.destroyed) {
      // Answered already (the total timeout) or the client is gone: nothing to forward.
      proxyRes.resume();
      return;
    }
    upstreamResponded(proxyRes, req, res, exchange);
    if (exchange.injection !== undefined && !exchange.injection.refused) {
      answerInjected(proxyRes, req, res, exchange);
      return;
    }
    if (!head(proxyRes, req, res, exchange, false)) return;
    setImmediate(flushIdleHeaders, res, proxyRes);
    relay(proxyRes, res, startTap(proxyRes, exchange), bytesSent(exchange));
  }

  /**
   * The upstream's status and headers, as the client's response head (not yet sent); without
   * content-length when the body is rewritten. False when Node refuses them (a status out of
   * range): the client gets a 502 instead.
   */
  function head(proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse, exchange: Exchange, rewritten: boolean): boolean {
    const headers = forwardHeaders(proxyRes.rawHeaders, rewritten ? REWRITTEN_RESPONSE : RESPONSE, []);
    // The client's connection, not the upstream's: Node decided from the client's request
    // (Connection: close, HTTP/1.0) whether it stays open.
    headers.push('connection', res.shouldKeepAlive ? 'keep-alive' : 'close');
    try {
      res.writeHead(proxyRes.statusCode ?? 502, proxyRes.statusMessage || undefined, headers);
      return true;
    } catch (error) {
      proxyRes.destroy();
      const unsendable = new Error(`the upstream's response head cannot be forwarded: ${(error as Error).message}`);
      onProxyError(Object.assign(unsendable, { code: 'HPE_UNSENDABLE_HEAD' }), req, res, exchange, false);
      return false;
    }
  }

  function startTap(proxyRes: IncomingMessage, exchange: Exchange): ResponseTap | undefined {
    try {
      return tapResponse(proxyRes, exchange.timer, tapOptions);
    } catch (error) {
      tapOptions.problem('tap_error', error);
      return undefined;
    }
  }

  const bytesSent = (exchange: Exchange): ((bytes: number) => void) | undefined =>
    accessLog === undefined ? undefined : (bytes) => (exchange.bytesOut += bytes);

  /**
   * The response to a request we added stream_options to. A 4xx that names stream_options is
   * the upstream refusing the field: the request is sent again, once, as the client wrote it,
   * and injection stops. Otherwise the response goes to the client with the usage-only chunk
   * removed from an event stream.
   */
  function answerInjected(proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse, exchange: Exchange): void {
    const injection = exchange.injection!;
    const status = proxyRes.statusCode ?? 0;
    if (status >= 400 && status < 500) {
      // Held to read whether it names stream_options; one too large to be such a refusal is
      // passed on as it is, held bytes first.
      const chunks: Buffer[] = [];
      let size = 0;
      // A 4xx status: Node sends any head the upstream's parser let through.
      const answerAsIs = (): void => {
        exchange.timer.responseHeaders(status, false);
        if (accessLog !== undefined) exchange.bytesOut += size;
        if (head(proxyRes, req, res, exchange, false)) res.flushHeaders();
      };
      const onData = (chunk: Buffer): void => {
        chunks.push(chunk);
        size += chunk.length;
        if (size <= MAX_REFUSAL_BYTES) return;
        proxyRes.off('data', onData);
        proxyRes.off('end', onEnd);
        answerAsIs();
        for (const c of chunks) res.write(c);
        if (accessLog !== undefined) proxyRes.on('data', (c: Buffer) => (exchange.bytesOut += c.length));
        proxyRes.pipe(res);
      };
      const onEnd = (): void => {
        const body = Buffer.concat(chunks, size);
        if (rejectsStreamOptions(status, body.toString('utf8'))) {
          injection.refused = true;
          usageInjection?.refused();
          forward(req, res, exchange, injection.original);
          return;
        }
        // Not a refusal: the client gets this answer as it is.
        answerAsIs();
        res.end(body);
      };
      proxyRes.on('data', onData);
      proxyRes.on('end', onEnd);
      return;
    }
    const streamed = isEventStream(proxyRes.headers['content-type']);
    // The usage-only chunk is taken out of a stream: its length changes.
    if (!head(proxyRes, req, res, exchange, streamed)) return;
    setImmediate(flushIdleHeaders, res, proxyRes);
    if (!streamed) {
      relay(proxyRes, res, startTap(proxyRes, exchange), bytesSent(exchange));
      return;
    }
    const strip = createUsageStrip({
      maxEventBytes: options.maxEventBytes,
      stripped: (bytes) => {
        usageInjection?.stripped(bytes);
        if (accessLog !== undefined) exchange.bytesOut -= bytes;
      },
    });
    proxyRes.pipe(strip).pipe(res);
    const tap = startTap(proxyRes, exchange);
    if (tap !== undefined) listenTap(proxyRes, tap); // after the pipe: forward first, then read
    const sent = bytesSent(exchange);
    if (sent !== undefined) proxyRes.on('data', (chunk: Buffer) => sent(chunk.length));
  }

  /**
   * Sends an inference request upstream, its body held (a Buffer: sent in one write with the
   * headers, with its content-length) or still streaming.
   */
  function forward(req: IncomingMessage, res: ServerResponse, exchange: Exchange, body: Buffer | Readable): void {
    const proxyReq = sendUpstream(
      req,
      body,
      {
        response: (proxyRes) => answer(proxyRes, req, res, exchange),
        error: (error) => onProxyError(error, req, res, exchange),
      },
      exchange.requestId,
    );
    exchange.upstreamRequest = proxyReq;
    exchange.upstreamResponse = undefined; // a retry's: the refusal was not the answer
  }

  // Errors of one request: the upstream could not be reached, or failed before answering.
  const onProxyError = (error: Error, req: IncomingMessage, res: ServerResponse | Socket, exchange?: Exchange, began = true): void => {
    const code = (error as NodeJS.ErrnoException).code;
    if (!('setHeader' in res)) {
      res.destroy(); // a websocket: nothing to answer on
      return;
    }
    if (res.destroyed || res.writableEnded) return; // the client is gone; the timer saw it
    const answered = began ? (exchange === undefined ? (req as Tagged)[UPSTREAM_RESPONSE] : exchange.upstreamResponse) : undefined;
    if (answered !== undefined && !TIMEOUTS.has(code ?? '')) {
      // The upstream's response had begun: it is not answered a second time. An error after
      // its last byte (bytes that are not HTTP, on a kept-alive connection) leaves it to finish
      // reaching the client; one before cuts it, as a reset would (its 'close' handler counts).
      log.warnThrottled(`proxy:${code ?? error.message}`, 'upstream connection failed after its response began', { code, path: pathOf(req) });
      if (answered.complete) options.proxyError('upstream_protocol');
      else answered.destroy();
      return;
    }
    const kind: ProxyErrorKind = code !== undefined && TIMEOUTS.has(code) ? 'upstream_timeout' : code?.startsWith('HPE_') === true ? 'upstream_protocol' : 'upstream_unreachable';
    options.proxyError(kind);
    log.warnThrottled(`proxy:${code ?? error.message}`, 'upstream request failed', { code, path: pathOf(req) });
    const timer = exchange?.timer;
    if (res.headersSent) {
      timer?.fail(kind === 'upstream_timeout' ? 'upstream_timeout' : 'upstream_reset');
      res.destroy();
      return;
    }
    const answer = proxyErrorResponse(kind, code);
    timer?.fail(kind, answer.status);
    res.writeHead(answer.status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(answer.body),
    });
    res.end(answer.body);
  };
  // http-proxy-3 passes the target as a fourth argument: not an Exchange.
  const hp3Error = (error: Error, req: IncomingMessage, res: ServerResponse | Socket): void => onProxyError(error, req, res);
  proxy.on('error', hp3Error);
  proxy.on('econnreset', ignore); // the client went away mid-upload; res 'close' accounts for it

  function identify(
    exchange: Exchange,
    result: { ok: true; model: string | undefined; stream: boolean | undefined; maxTokens?: number | undefined; n?: number | undefined } | { ok: false; reason: UninspectedReason },
  ): void {
    if (result.ok) {
      const { maxTokens, n } = result;
      exchange.timer.identify(result.model ?? 'unknown', result.stream === true, maxTokens === undefined && n === undefined ? undefined : { maxTokens, n });
    } else {
      options.uninspected(result.reason);
      exchange.timer.identify('unknown', false);
    }
  }

  /** Holds a chat or completions body (up to the cap) to see whether usage is to be injected. */
  function holdAndForward(req: IncomingMessage, res: ServerResponse, exchange: Exchange): void {
    const chunks: Buffer[] = [];
    let size = 0;
    const scanner = createBodyScanner();
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      exchange.bytesIn += chunk.length;
      if (size > options.maxInspectBytes) {
        // Too large to inspect: forward what was held, then the rest as it comes.
        req.off('data', onData);
        req.off('end', onEnd);
        req.pause();
        identify(exchange, { ok: false, reason: 'too_large' });
        chunks.push(chunk);
        forward(req, res, exchange, joinHeldAndRest(chunks, req));
        return;
      }
      chunks.push(chunk);
      scanner.feed(chunk);
    };
    const onEnd = (): void => {
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
      const scan = scanner.end();
      identify(exchange, scan);
      const injected = usageInjection?.active() === true ? injectUsage(body, scan) : undefined;
      if (injected === undefined) {
        forward(req, res, exchange, body);
        return;
      }
      usageInjection?.injected();
      exchange.injection = { original: body, refused: false };
      forward(req, res, exchange, injected);
    };
    req.on('data', onData);
    req.on('end', onEnd);
  }

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    // While draining, each connection closes after its current response.
    if (draining) res.shouldKeepAlive = false;
    const api = inferenceApi(req.method, req.url);
    if (api === undefined) {
      stripHopByHop(req.headers);
      proxy.web(req, res, hp3Error);
      return;
    }
    let requestId: string | undefined;
    if (accessLog !== undefined) {
      const given = req.headers['x-request-id'];
      requestId = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID(); // passed upstream, so both logs share it
    }
    const exchange: Exchange = { api, timer: createRequestTimer(api, clock, sink), requestId, bytesIn: 0, bytesOut: 0, injection: undefined, upstreamRequest: undefined, upstreamResponse: undefined };
    let release = (): void => {};
    let unwatch: (() => void) | undefined;
    let begun = false;
    const begin = (): void => {
      begun = true;
      if (limit !== undefined) exchange.timer.admitted();
      res.on('finish', () => exchange.timer.responseFinished());
      unwatch = deadlines.watch(
        exchange,
        () => exchange.upstreamRequest?.destroy(timeoutError('the model server was silent too long')),
        () => overTime(res, exchange),
      );
      const encoded = req.headers['content-encoding'] !== undefined && req.headers['content-encoding'].trim().toLowerCase() !== 'identity';
      if (usageInjection !== undefined && (api === 'chat' || api === 'completions') && !encoded) {
        holdAndForward(req, res, exchange);
        return;
      }
      tapRequestBody(req, options.maxInspectBytes, (result, size) => {
        exchange.bytesIn = size;
        identify(exchange, result);
      });
      forward(req, res, exchange, req);
    };
    res.on('close', () => {
      if (begun) {
        // A client that left gives its upstream request up.
        if (!res.writableFinished) exchange.upstreamRequest?.destroy();
        const sample = exchange.timer.close(res.writableFinished);
        if (sample !== undefined && accessLog !== undefined) accessLog.write(accessRecord(req, exchange, sample));
      }
      unwatch?.();
      release(); // a request that waited and left gives up its place
    });
    if (limit === undefined) begin();
    else {
      release = limit.acquire(begin, () => {
        // Refused at once: never forwarded, not counted as received (the engine never saw it).
        options.rejected?.();
        const answer = proxyErrorResponse('overloaded', undefined);
        res.writeHead(answer.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer.body), 'retry-after': '1' });
        res.end(answer.body);
        req.resume();
      });
    }
  };

  /** Past INFERMETER_TOTAL_TIMEOUT_MS: the upstream request is aborted, the client told or cut. */
  const overTime = (res: ServerResponse, exchange: Exchange): void => {
    if (res.writableEnded || res.destroyed) return;
    exchange.timer.fail('upstream_timeout', 504);
    options.proxyError('upstream_timeout');
    exchange.upstreamRequest?.destroy();
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const answer = proxyErrorResponse('upstream_timeout', 'total timeout');
    res.writeHead(answer.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer.body) });
    res.end(answer.body);
  };

  // Node checks the headers and request timeouts every connectionsCheckingInterval (30 s by
  // default): check often enough that a short timeout is kept to within a quarter of itself.
  const serverOptions = { noDelay: true, connectionsCheckingInterval: Math.min(1000, Math.max(25, Math.floor(limits.headersTimeoutMs / 4))) };
  const server = options.tls === undefined ? http.createServer(serverOptions, onRequest) : https.createServer({ ...serverOptions, ...options.tls }, onRequest);
  // Slow clients: the headers, then the whole request, must arrive within these.
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  const sockets = new Set<Socket>();
  let drained: (() => void) | undefined;
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      if (sockets.size === 0) drained?.();
    });
  });
  // closeIdleConnections leaves alone a connection that has not sent a byte yet (a client's
  // spare connection, a load balancer's pre-connect): nothing is in flight on it.
  const closeUnused = (): void => {
    for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
  };
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', ignore);
    proxy.ws(req, socket, head, hp3Error);
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    // Too slow (slowloris) or not HTTP: answer 408 or 400 as node would, without logging its bytes.
    if (!socket.writable || error.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const timedOut = error.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    options.clientError?.(timedOut ? 'timeout' : 'malformed');
    socket.end(timedOut ? 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n' : 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
  });

  return {
    server,
    connections: () => sockets.size,
    drain(timeoutMs) {
      draining = true;
      server.close();
      server.closeIdleConnections();
      closeUnused();
      // A connection whose response ends from now on is closed at once, not kept alive: Node
      // reads these when a response finishes (a keepAliveTimeout of 0 would mean never).
      server.keepAliveTimeout = 1;
      (server as { keepAliveTimeoutBuffer?: number }).keepAliveTimeoutBuffer = 0;
      if (sockets.size === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          // Past the drain timeout: what is left is cut.
          server.closeAllConnections();
          resolve();
        }, timeoutMs);
        timer.unref();
        drained = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        closeUnused();
        agent.destroy();
        deadlines.close();
      }),
  };
}

/** Held chunks first, then whatever else the client sends. */
function joinHeldAndRest(held: readonly Buffer[], req: IncomingMessage): Readable {
  return Readable.from(
    (async function* () {
      yield* held;
      req.resume();
      for await (const chunk of req) yield chunk as Buffer;
    })(),
  );
}

function accessRecord(req: IncomingMessage, exchange: Exchange, s: RequestSample): AccessRecord {
  return {
    time: new Date().toISOString(),
    request_id: exchange.requestId,
    method: req.method ?? '',
    path: pathOf(req),
    status: s.status,
    model: s.model,
    stream: s.stream,
    outcome: s.outcome,
    failure: s.failure,
    cancel_phase: s.cancelPhase,
    ttfb_ms: ms(s.ttfb),
    ttft_ms: ms(s.ttft),
    tpot_ms: ms(s.tpot?.seconds),
    e2e_ms: ms(s.e2e),
    prompt_tokens: s.promptTokens,
    completion_tokens: s.completionTokens,
    usage_source: s.usageSource,
    usage_injected: exchange.injection !== undefined && !exchange.injection.refused,
    bytes_in: exchange.bytesIn,
    bytes_out: exchange.bytesOut,
  };
}

function ignore(): void {}

/**
 * Headers go to the client as they arrive, as they would without us (a streaming upstream often
 * sends them well before its first token; Node would otherwise hold them until the first body
 * byte, and behind a long prefill held headers look like a silent connection). Run with
 * setImmediate, still in the turn of the event loop that brought them, after every socket read
 * of that turn: a body that came with the head leaves with it in one write, and in a burst of
 * requests each is sent upstream before the heads of the answers go out. No timer.
 */
function flushIdleHeaders(res: ServerResponse, proxyRes: IncomingMessage): void {
  // headersSent turns true at writeHead, before anything is written; _headerSent (Node's own
  // field, kept since its first releases; a test fails without it) says whether the head left.
  if (!(res as unknown as { _headerSent: boolean })._headerSent && proxyRes.readableLength === 0 && !res.destroyed && !res.writableEnded) res.flushHeaders();
}

function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '';
  const q = url.indexOf('?');
  return (q === -1 ? url : url.slice(0, q)).slice(0, 200);
}

function timeoutError(message: string): Error {
  return Object.assign(new Error(message), { code: 'ETIMEDOUT' });
}
