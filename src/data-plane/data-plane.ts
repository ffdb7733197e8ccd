// The data plane: a node:http server in front of the model server, wiring the routes to the
// listener. An inference request (inference-route.ts says which) takes the measured route
// (measured-route.ts), everything else (other routes, websockets) the pass-through route
// (pass-through-route.ts, http-proxy-3). Both take their upstream connections from one policy
// (upstream-connections.ts); the measured route's
// timeouts are kept by one sweep (deadlines.ts), its admission by the concurrency limit.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { rootCertificates as tlsRootCertificates } from 'node:tls';
import { DEFAULT_LIMITS, type Limits } from '../config/limits.ts';
import type { TlsFiles } from '../config/security.ts';
import type { AccessLog } from '../access-log.ts';
import type { Clock } from '../measure/clock.ts';
import { createArrivalClock } from '../measure/arrival-clock.ts';
import type { MeasurementSink } from '../measure/request-timer.ts';
import type { Logger } from '../log.ts';
import type { UninspectedReason } from '../stream-tap/request-tap.ts';
import type { TapProblem } from '../stream-tap/response-tap.ts';
import { trackConnections } from './client-connections.ts';
import { createBodyBudget, type HeldBodyUse } from './body-budget.ts';
import { createConcurrencyLimit } from './concurrency-limit.ts';
import { createDeadlines } from './deadlines.ts';
import { createSettleQueue } from './settle-queue.ts';
import { inferenceRoute } from './inference-route.ts';
import type { LifecycleViolation, ResendReason } from './lifecycle.ts';
import { createMeasuredRoute, type UsageInjection } from './measured-route.ts';
import type { ProxyErrorKind } from './openai-error.ts';
import { createPassThroughRoute } from './pass-through-route.ts';
import { BAD_TARGET_BODY, originForm } from './request-target.ts';
import { createUpstreamConnections, type UpstreamConnectionPolicy } from './upstream-connections.ts';
import { createUpstreamRequest } from './upstream-request.ts';
import type { TenantOf } from '../tenants/tenant-of.ts';
import type { RejectReason } from '../metrics/own/proxy-families.ts';
import type { ClientErrorKind } from './client-connections.ts';
import { boundBufferPool } from './buffer-pool.ts';
import type { UsageWriter } from '../ledger/ledger.ts';

export interface DataPlaneOptions {
  readonly upstream: URL;
  readonly clock: Clock;
  readonly sink: MeasurementSink;
  readonly log: Logger;
  readonly maxInspectBytes: number;
  /** Total bytes of request bodies held at once, over every connection; undefined: no total. */
  readonly maxHeldBodyBytes?: number | undefined;
  /** Of that total, the most one client address holds; undefined: the total. */
  readonly maxHeldBodyBytesPerClient?: number | undefined;
  /** Counts bodies not held because that total was reached, by what holding was for. */
  readonly bodyUnheld?: ((use: HeldBodyUse) => void) | undefined;
  readonly maxResponseInspectBytes: number;
  /** Total bytes of answers kept to be read at once, over every connection; undefined: no total. */
  readonly maxHeldAnswerBytes?: number | undefined;
  readonly maxEventBytes: number;
  /** Counts bodies that gave no labels. */
  readonly uninspected: (reason: UninspectedReason) => void;
  /** Counts parts of responses that could not be measured. */
  readonly tapProblem: (kind: TapProblem) => void;
  /** Counts failures of the proxy itself to reach or hear the upstream, by kind. */
  readonly proxyError: (kind: ProxyErrorKind) => void;
  /** Counts inference requests sent upstream again, by why. */
  readonly retried?: (reason: ResendReason) => void;
  /** Usage injection for streaming chat and completions requests; undefined: off. */
  readonly usageInjection?: UsageInjection | undefined;
  /** The per-request log; undefined: off. */
  readonly accessLog?: AccessLog | undefined;
  /** The usage ledger's writer (INFERMETER_USAGE_DIR); undefined: off. */
  readonly usage?: UsageWriter | undefined;
  /** Who sent an inference request (per-tenant metering); undefined: off. */
  readonly tenantOf?: TenantOf | undefined;
  /** TLS of the data plane's listener; undefined: plain HTTP. */
  readonly tls?: TlsFiles | undefined;
  /** CA certificates trusted for an https:// upstream, besides the system's. */
  readonly upstreamCa?: Buffer | undefined;
  /** Which upstream connection a request goes out on (upstream-connections.ts); default `mirror`. */
  readonly upstreamConnections?: UpstreamConnectionPolicy | undefined;
  readonly limits?: DataPlaneLimits;
  /** Counts inference requests refused with 503, by why. */
  readonly rejected?: (reason: RejectReason) => void;
  /** A connection dropped before its request could be read (slow client, not HTTP). */
  readonly clientError?: (kind: ClientErrorKind) => void;
  /**
   * A request the pass-through route answered (not an inference request: those are measured),
   * when its response closes: its path (with the query), method, status and seconds since it
   * arrived. Undefined: nobody listens (no dialect serves HTTP families), and nothing is added.
   */
  readonly httpRequest?: ((target: string, method: string | undefined, status: number, seconds: number) => void) | undefined;
  /**
   * An impossible move of a request's lifecycle (a bug of the data plane). Default: logged as
   * an error; the tests make it fail the test.
   */
  readonly lifecycleViolation?: (error: LifecycleViolation) => void;
}

/** Why a client connection was dropped before its request was read. */

/** The limits the data plane keeps (config/limits.ts; totalTimeoutMs and maxConcurrency 0: none). */
type DataPlaneLimits = Pick<
  Limits,
  'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'upstreamConnectTimeoutMs' | 'upstreamIdleTimeoutMs' | 'totalTimeoutMs' | 'maxConcurrency'
>;

export interface DataPlane {
  readonly server: http.Server;
  /** Client connections open now. */
  connections(): number;
  /** Upstream connections open now (idle or busy). */
  upstreamConnections(): number;
  /** Client connections with upstream connections of their own, and pipelined requests waiting for their turn (mirror). */
  mirrored(): { readonly clients: number; readonly waiting: number };
  /** Bytes held in memory now: request bodies (within INFERMETER_MAX_HELD_BODY_BYTES), answers kept to be read (INFERMETER_MAX_HELD_ANSWER_BYTES). */
  heldBodyBytes(): { request: number; answer: number };
  /**
   * Stops accepting; lets requests in flight finish (connections close after their current
   * response) for up to `timeoutMs`, then cuts what is left. Resolves when no connection is
   * open, with the number of connections cut.
   */
  drain(timeoutMs: number): Promise<number>;
  /** Stops accepting, ends idle and unused connections and upstream sockets; resolves when no connection is left. */
  close(): Promise<void>;
}

const BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n';
const HEADERS_TOO_LARGE = 'HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n';

export function createDataPlane(options: DataPlaneOptions): DataPlane {
  const { upstream, log } = options;
  boundBufferPool();
  const limits = options.limits ?? DEFAULT_LIMITS;
  // The upstream connections (the client's own by default); a retry's fresh connection comes
  // from an agent that keeps none.
  const ca = options.upstreamCa === undefined ? {} : { ca: [...tlsRootCertificates, options.upstreamCa.toString('utf8')] };
  const connections = createUpstreamConnections({
    policy: options.upstreamConnections ?? 'mirror',
    upstream,
    tls: ca,
    connectTimeoutMs: limits.upstreamConnectTimeoutMs,
    strayBytes: () => options.proxyError('upstream_protocol'),
  });
  const bodyBudget = options.maxHeldBodyBytes === undefined ? undefined : createBodyBudget(options.maxHeldBodyBytes, options.maxHeldBodyBytesPerClient);
  // Answers kept whole to be read (a non-streamed answer's usage, a 4xx read for a refusal).
  const answerBudget = options.maxHeldAnswerBytes === undefined ? undefined : createBodyBudget(options.maxHeldAnswerBytes);
  const passThrough = createPassThroughRoute({
    upstream,
    connections,
    connectTimeoutMs: limits.upstreamConnectTimeoutMs,
    idleTimeoutMs: limits.upstreamIdleTimeoutMs,
    maxHeldBodyBytes: options.maxInspectBytes,
    bodyBudget,
    bodyUnheld: options.bodyUnheld,
    log,
    proxyError: options.proxyError,
  });
  // An upstream silent for longer than the idle timeout (no headers, or no bytes mid-stream) is
  // given up on: 504 when nothing was sent to the client yet, a cut response otherwise.
  const deadlines = createDeadlines(limits.upstreamIdleTimeoutMs, limits.totalTimeoutMs);
  const settle = createSettleQueue((error) => log.error('recording a request failed', { error: String(error) }));
  const measured = createMeasuredRoute({
    ...options,
    bodyBudget,
    violation: options.lifecycleViolation ?? ((error) => log.error(error.message, { code: error.code })),
    arrival: createArrivalClock(options.clock),
    sendUpstream: createUpstreamRequest({ upstream, connections }),
    deadlines,
    turn: connections.turn,
    settle: settle.defer,
    limit: limits.maxConcurrency > 0 ? createConcurrencyLimit(limits.maxConcurrency) : undefined,
    answerBudget,
    answerUnheld: () => options.tapProblem('body_unheld'),
    tap: {
      maxEventBytes: options.maxEventBytes,
      maxBodyBytes: options.maxResponseInspectBytes,
      answerBudget,
      problem(kind: TapProblem, error?: unknown) {
        options.tapProblem(kind);
        if (kind === 'tap_error') log.warnThrottled('tap_error', 'stream tap failed; response forwarded unmeasured', { error: String(error) });
      },
    },
  });
  let draining = false;
  const httpRequest = options.httpRequest;

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    // While draining, each connection closes after its current response.
    if (draining) res.shouldKeepAlive = false;
    const target = originForm(req.url);
    if (target === undefined) {
      refuseTarget(req, res);
      return;
    }
    req.url = target;
    const route = inferenceRoute(req.method, target);
    if (route === undefined) {
      if (httpRequest !== undefined) {
        const at = options.clock();
        res.once('close', () => httpRequest(target, req.method, res.statusCode, (options.clock() - at) / 1000));
      }
      connections.turn(res, () => passThrough.web(req, res));
    } else measured(req, res, route);
  };

  // Node checks the headers and request timeouts every connectionsCheckingInterval (30 s by
  // default): check often enough that a short timeout is kept to within a quarter of itself.
  // Only a websocket offer is taken up (the upgrade event, the pass-through's tunnel); any other
  // (`curl --http2`'s and Java's HttpClient's h2c) is declined as RFC 9110 lets a server decline
  // it: the request is served as the HTTP/1.1 request it also is, its Upgrade and HTTP2-Settings
  // dropped as hop-by-hop headers on the way upstream.
  const serverOptions = {
    noDelay: true,
    connectionsCheckingInterval: Math.min(1000, Math.max(25, Math.floor(limits.headersTimeoutMs / 4))),
    shouldUpgradeCallback: offersWebsocket,
  };
  const server = options.tls === undefined ? http.createServer(serverOptions, onRequest) : https.createServer({ ...serverOptions, ...options.tls }, onRequest);
  // Slow clients: the headers, then the whole request, must arrive within these.
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  // Not Node's 5 s: a client that pauses between requests for longer than that (a chat user
  // reading, a Go client with its 90 s pool) would connect again through infermeter, and under
  // the mirror policy to the engine too, where directly it reuses its connection to an engine
  // that keeps it (Ollama, TGI, a cloud API).
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  const clients = trackConnections(server);
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const target = originForm(req.url);
    if (target === undefined) {
      options.clientError?.('malformed');
      socket.on('error', ignore);
      socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    req.url = target;
    passThrough.ws(req, socket, head);
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    // Too slow (slowloris) or not HTTP: answer 408 or 400 as node would, without logging its bytes.
    if (!socket.writable || error.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const timedOut = error.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    options.clientError?.(timedOut ? 'timeout' : 'malformed');
    socket.end(timedOut ? 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n' : error.code === 'HPE_HEADER_OVERFLOW' ? HEADERS_TOO_LARGE : BAD_REQUEST);
  });

  /** A target no route can resolve: 400, and the connection closes (what follows may be anything). */
  const refuseTarget = (req: IncomingMessage, res: ServerResponse): void => {
    options.clientError?.('malformed');
    res.shouldKeepAlive = false;
    res.writeHead(400, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(BAD_TARGET_BODY) });
    res.end(BAD_TARGET_BODY);
    req.resume();
  };

  return {
    server,
    connections: clients.count,
    upstreamConnections: connections.open,
    mirrored: connections.mirrored,
    heldBodyBytes: () => ({ request: bodyBudget?.held() ?? 0, answer: answerBudget?.held() ?? 0 }),
    drain(timeoutMs) {
      draining = true;
      server.close();
      return clients.drain(timeoutMs);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Not left open for the keep-alive timeout once a response in flight is done.
        clients.closeEach();
        connections.destroy();
        deadlines.close();
      }),
  };
}

function ignore(): void {}

/** Whether a request's Upgrade header offers the websocket protocol (RFC 6455), among others or alone. */
export function offersWebsocket(req: IncomingMessage): boolean {
  const upgrade = req.headers.upgrade;
  return upgrade !== undefined && /(?:^|,)\s*websocket\s*(?:,|$)/i.test(upgrade);
}
