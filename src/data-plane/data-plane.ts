// The data plane: a node:http server in front of the model server (data-server.ts), wiring the
// routes to the listener. An inference request (inference-route.ts says which) takes the measured route
// (measured-route.ts), everything else (other routes, websockets) the pass-through route
// (pass-through-route.ts, http-proxy-3). Both take their upstream connections from one policy
// (upstream-connections.ts); the measured route's
// timeouts are kept by one sweep (deadlines.ts), its admission by the concurrency limit.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
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
import { createInferenceRouter, inferenceRoute as realRouter } from './inference-route.ts';
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
import { BAD_REQUEST, createDataServer } from './data-server.ts';
import type { UsageWriter } from '../ledger/ledger.ts';
import type { InferenceApiRow } from '../measure/inference-apis.ts';

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
  /** The stale race's window (upstream-attempt.ts; tests only). */
  readonly staleRaceMs?: number | undefined;
  /** The inference APIs and their routes (default: INFERENCE_APIS; a test adds its own). */
  readonly apiTable?: readonly InferenceApiRow[] | undefined;
}

/** Why a client connection was dropped before its request was read. */

/** The limits the data plane keeps (config/limits.ts; totalTimeoutMs and maxConcurrency 0: none). */
type DataPlaneLimits = Pick<
  Limits,
  'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'upstreamConnectTimeoutMs' | 'upstreamIdleTimeoutMs' | 'totalTimeoutMs' | 'maxConcurrency'
>;

export interface DataPlane {
  readonly server: Server;
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
  const inferenceRoute = options.apiTable === undefined ? realRouter : createInferenceRouter(options.apiTable);
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

  const server = createDataServer({
    tls: options.tls,
    limits,
    onRequest,
    onUpgrade(req, socket, head) {
      const target = originForm(req.url);
      if (target === undefined) {
        options.clientError?.('malformed');
        socket.on('error', ignore);
        socket.end(BAD_REQUEST);
        return;
      }
      req.url = target;
      passThrough.ws(req, socket, head);
    },
    clientError: options.clientError,
  });
  const clients = trackConnections(server);

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
