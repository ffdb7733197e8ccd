// The data plane: a node:http server in front of the model server, forwarding with
// http-proxy-3. Every request is proxied as it comes; an inference request additionally gets a
// request timer, a listener on its body (model, stream) and a tap on its response. The tap sees
// the very buffers http-proxy pipes to the client, after they are handed on, so measurement can
// neither delay nor alter them.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import type { Clock } from '../measure/clock.ts';
import { createRequestTimer, type MeasurementSink, type RequestTimer } from '../measure/request-timer.ts';
import { tapRequestBody, type UninspectedReason } from '../stream-tap/request-tap.ts';
import { tapResponse, type TapProblem } from '../stream-tap/response-tap.ts';
import type { Logger } from '../log.ts';
import { stripHopByHop } from './hop-by-hop.ts';
import { inferenceApi } from './inference-route.ts';
import { proxyErrorResponse, type ProxyErrorKind } from './openai-error.ts';

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
}

export interface DataPlane {
  readonly server: http.Server;
  /** Client connections open now. */
  connections(): number;
  /** Stops accepting, ends idle keep-alive connections and upstream sockets. */
  close(): Promise<void>;
}

const TIMER = Symbol('infermeter.timer');
type Tagged = IncomingMessage & { [TIMER]?: RequestTimer };

const CONNECT_TIMEOUTS = new Set(['ECONNECT_TIMEOUT', 'ETIMEDOUT']);

export function createDataPlane(options: DataPlaneOptions): DataPlane {
  const { upstream, clock, sink, log } = options;
  const agent =
    upstream.protocol === 'https:'
      ? new https.Agent({ keepAlive: true, scheduling: 'lifo' })
      : new http.Agent({ keepAlive: true, scheduling: 'lifo' });
  const proxy = createProxyServer({ target: upstream, agent, changeOrigin: true, ws: true });

  const tapOptions = {
    maxEventBytes: options.maxEventBytes,
    maxBodyBytes: options.maxResponseInspectBytes,
    problem(kind: TapProblem, error?: unknown) {
      options.tapProblem(kind);
      if (kind === 'tap_error') log.warnThrottled('tap_error', 'stream tap failed; response forwarded unmeasured', { error: String(error) });
    },
  };

  proxy.on('proxyRes', (proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse) => {
    stripHopByHop(proxyRes.headers);
    const timer = (req as Tagged)[TIMER];
    // A response that breaks off upstream must break off for the client too: ending it
    // cleanly would turn a truncated answer into one that looks whole.
    proxyRes.on('error', ignore);
    proxyRes.on('close', () => {
      if (proxyRes.complete || res.destroyed) return;
      timer?.fail('upstream_reset');
      options.proxyError('upstream_reset');
      log.warnThrottled('upstream_reset', 'upstream closed a response before its end', { path: pathOf(req) });
      res.destroy();
    });
    // Headers go to the client when they arrive, as they would without us: a streaming
    // upstream often sends them well before its first token. Node would otherwise hold them
    // until the first body byte. Runs after http-proxy has copied status and headers.
    process.nextTick(() => {
      if (!res.headersSent && proxyRes.readableLength === 0 && !res.destroyed) res.flushHeaders();
    });
    if (timer !== undefined) {
      try {
        tapResponse(proxyRes, timer, tapOptions);
      } catch (error) {
        tapOptions.problem('tap_error', error);
      }
    }
  });

  // Errors of one request: the upstream could not be reached, or failed before answering.
  const onProxyError = (error: Error, req: IncomingMessage, res: ServerResponse | Socket): void => {
    const code = (error as NodeJS.ErrnoException).code;
    if (!('setHeader' in res)) {
      res.destroy(); // a websocket: nothing to answer on
      return;
    }
    if (res.destroyed || res.writableEnded) return; // the client is gone; the timer saw it
    const kind: ProxyErrorKind = code !== undefined && CONNECT_TIMEOUTS.has(code) ? 'upstream_timeout' : 'upstream_unreachable';
    options.proxyError(kind);
    log.warnThrottled(`proxy:${code ?? error.message}`, 'upstream request failed', { code, path: pathOf(req) });
    const timer = (req as Tagged)[TIMER];
    if (res.headersSent) {
      timer?.fail('upstream_reset');
      res.destroy();
      return;
    }
    const answer = proxyErrorResponse(kind, code);
    timer?.fail('upstream_unreachable', answer.status);
    res.writeHead(answer.status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(answer.body),
    });
    res.end(answer.body);
  };
  proxy.on('error', onProxyError);
  proxy.on('econnreset', ignore); // the client went away mid-upload; res 'close' accounts for it

  const server = http.createServer({ noDelay: true }, (req, res) => {
    const api = inferenceApi(req.method, req.url);
    stripHopByHop(req.headers);
    if (api !== undefined) {
      const timer = createRequestTimer(api, clock, sink);
      (req as Tagged)[TIMER] = timer;
      tapRequestBody(req, options.maxInspectBytes, (result) => {
        if (result.ok) timer.identify(result.model ?? 'unknown', result.stream === true);
        else {
          options.uninspected(result.reason);
          timer.identify('unknown', false);
        }
      });
      res.on('finish', () => timer.responseFinished());
      res.on('close', () => timer.close(res.writableFinished));
    }
    proxy.web(req, res, onProxyError);
  });
  let connections = 0;
  server.on('connection', (socket: Socket) => {
    connections++;
    socket.once('close', () => connections--);
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', ignore);
    proxy.ws(req, socket, head, onProxyError);
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    // A malformed request line or headers: answer 400 as node would, without logging its bytes.
    if (socket.writable && error.code !== 'ECONNRESET') socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else socket.destroy();
  });

  return {
    server,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        agent.destroy();
      }),
  };
}

function ignore(): void {}

function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '';
  const q = url.indexOf('?');
  return (q === -1 ? url : url.slice(0, q)).slice(0, 200);
}
