// The pass-through route: every request that is not inference (other paths and methods,
// websocket upgrades) goes through http-proxy-3 untouched and unmeasured. What it shares with
// the measured route: the upstream agent, the hop-by-hop rules, a response cut upstream is cut
// for the client, and the proxy's own failures answered and counted the same way.
import type http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import type { Logger } from '../log.ts';
import { actOnFailedLeg, writeErrorAnswer } from './error-answer.ts';
import { stripHopByHop } from './hop-by-hop.ts';
import type { ProxyErrorKind } from './openai-error.ts';
import { pathOf } from './request-path.ts';
import { cutWithUpstream, flushIdleHeaders } from './response-head.ts';

export interface PassThroughOptions {
  readonly upstream: URL;
  readonly agent: http.Agent;
  readonly connectTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly log: Logger;
  readonly proxyError: (kind: ProxyErrorKind) => void;
}

export interface PassThroughRoute {
  /** An HTTP request, proxied as it is. */
  web(req: IncomingMessage, res: ServerResponse): void;
  /** A websocket upgrade, proxied as it is. */
  ws(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

// The upstream's response of a request, kept on the request: http-proxy-3's error handler gets
// only the request, and must know whether an answer had begun.
const UPSTREAM_RESPONSE = Symbol('infermeter.upstreamResponse');
type Tagged = IncomingMessage & { [UPSTREAM_RESPONSE]?: IncomingMessage };

export function createPassThroughRoute(options: PassThroughOptions): PassThroughRoute {
  const { log } = options;
  const proxy = createProxyServer({ target: options.upstream, agent: options.agent, changeOrigin: true, ws: true, connectTimeout: options.connectTimeoutMs });
  // An upstream silent for longer than the idle timeout is given up on (Node's socket timeout).
  proxy.on('proxyReq', (proxyReq: http.ClientRequest) => {
    proxyReq.setTimeout(options.idleTimeoutMs, () => proxyReq.destroy(Object.assign(new Error('the model server was silent too long'), { code: 'ETIMEDOUT' })));
  });

  proxy.on('proxyRes', (proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse) => {
    (req as Tagged)[UPSTREAM_RESPONSE] = proxyRes;
    stripHopByHop(proxyRes.headers);
    // The client's connection, not the upstream's. Said explicitly, or http-proxy would answer
    // keep-alive to a client that asked to close.
    proxyRes.headers.connection = res.shouldKeepAlive ? 'keep-alive' : 'close';
    res.on('error', (error: Error) => log.warnThrottled('response_error', 'error on a client response', { error: String(error) }));
    cutWithUpstream(proxyRes, res, () => {
      options.proxyError('upstream_reset');
      log.warnThrottled('upstream_reset', 'upstream closed a response before its end', { path: pathOf(req) });
    });
    setImmediate(flushIdleHeaders, res, proxyRes);
  });

  const onError = (error: Error, req: IncomingMessage, res: ServerResponse | Socket): void => {
    if (!('setHeader' in res)) {
      res.destroy(); // a websocket: nothing to answer on
      return;
    }
    actOnFailedLeg({
      error,
      res,
      response: (req as Tagged)[UPSTREAM_RESPONSE],
      path: pathOf(req),
      log,
      proxyError: options.proxyError,
      answer: (kind, code) => writeErrorAnswer(res, kind, code),
    });
  };
  proxy.on('error', onError);
  proxy.on('econnreset', ignore); // the client went away mid-upload; res 'close' accounts for it

  return {
    web(req, res) {
      stripHopByHop(req.headers);
      proxy.web(req, res, onError);
    },
    ws(req, socket, head) {
      socket.on('error', ignore);
      proxy.ws(req, socket, head, onError);
    },
  };
}

function ignore(): void {}
