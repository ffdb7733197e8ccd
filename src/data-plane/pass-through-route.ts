// The pass-through route: every request that is not inference (other paths and methods) goes
// upstream untouched and unmeasured on undici's dispatcher, as the measured route's do; websocket
// upgrades through http-proxy-3. What it shares with
// the measured route: the upstream connection policy, the hop-by-hop rules, a response cut upstream is cut
// for the client, and the proxy's own failures answered and counted the same way.
import type http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex, Readable } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import type { Logger } from '../log.ts';
import type { BodyBudget, BodyHold, HeldBodyUse } from './body-budget.ts';
import { actOnFailedLeg, writeErrorAnswer } from './error-answer.ts';
import type { ProxyErrorKind } from './openai-error.ts';
import { pathOf } from './request-path.ts';
import { copyHead, cutWithUpstream, flushIdleHeaders, unsendableHead } from './response-head.ts';
import type { UpstreamConnections } from './upstream-connections.ts';
import { createUpstreamRequest } from './upstream-request.ts';
import type { UpstreamResponse } from './upstream-response.ts';

export interface PassThroughOptions {
  readonly upstream: URL;
  /** Which upstream connection a request goes out on: the measured route's policy. */
  readonly connections: UpstreamConnections;
  readonly connectTimeoutMs: number;
  readonly idleTimeoutMs: number;
  /** Largest body held to give it a content-length (a chunked DELETE or OPTIONS). */
  readonly maxHeldBodyBytes: number;
  /** The process's budget for held bodies (INFERMETER_MAX_HELD_BODY_BYTES); undefined: none. */
  readonly bodyBudget?: BodyBudget | undefined;
  /** Counts bodies not held because the budget was spent. */
  readonly bodyUnheld?: ((use: HeldBodyUse) => void) | undefined;
  readonly log: Logger;
  readonly proxyError: (kind: ProxyErrorKind) => void;
}

export interface PassThroughRoute {
  /** An HTTP request, proxied as it is. */
  web(req: IncomingMessage, res: ServerResponse): void;
  /** A websocket upgrade, proxied as it is. */
  ws(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

export function createPassThroughRoute(options: PassThroughOptions): PassThroughRoute {
  const { log, connections } = options;
  // Websockets only: toProxy, the client's target is sent as it came (http-proxy-3 would
  // otherwise rewrite it through URL: dot segments resolved, `\` made `/`, the fragment cut), so
  // that the engine routes the bytes infermeter routed (inference-route.ts).
  const proxy = createProxyServer({ target: options.upstream, changeOrigin: true, ws: true, connectTimeout: options.connectTimeoutMs, toProxy: true });
  // The same idle timeout while its upgrade is awaited, then on the open tunnel (no byte either
  // way for that long closes both sides).
  proxy.on('proxyReqWs', (proxyReq: http.ClientRequest) => {
    proxyReq.setTimeout(options.idleTimeoutMs, () => proxyReq.destroy(timeoutError()));
  });
  proxy.on('open', (proxySocket: Socket) => {
    proxySocket.setTimeout(options.idleTimeoutMs, () => {
      options.proxyError('upstream_timeout');
      proxySocket.destroy();
    });
  });
  proxy.on('error', (_error: Error, _req: IncomingMessage, socket: ServerResponse | Socket) => {
    socket.destroy(); // a websocket: nothing to answer on
  });
  proxy.on('econnreset', ignore); // the client went away mid-upload

  // Every HTTP request on undici's dispatcher, as the measured route's (upstream-request.ts): the
  // same connection for both routes under mirror; an upstream silent for longer than the idle
  // timeout is given up on (undici's headers and body timeouts).
  const send = createUpstreamRequest({ upstream: options.upstream, connections, idleTimeoutMs: options.idleTimeoutMs });

  /** `body`: the client's request streaming, a held one, or none. */
  const forward = (req: IncomingMessage, res: ServerResponse, body: Buffer | Readable | null): void => {
    let answer: UpstreamResponse | undefined;
    const call = send(
      req,
      body,
      {
        response: (response) => {
          answer = response;
          if (res.destroyed || res.writableEnded) {
            response.destroy();
            return;
          }
          // A head Node refuses to send is answered 502 instead.
          const unsendable = unsendableHead(response);
          if (unsendable !== undefined) {
            response.destroy();
            options.proxyError('upstream_protocol');
            log.warnThrottled('upstream_head', "the upstream's response head cannot be forwarded", { problem: unsendable, path: pathOf(req) });
            writeErrorAnswer(res, 'upstream_protocol', 'HPE_UNSENDABLE_HEAD');
            return;
          }
          // The upstream closes its connection after this answer: the client's closes too (mirror).
          if (response.closesConnection) res.shouldKeepAlive = false;
          // The head as the upstream wrote it (its names' spelling, order and repeated fields), less
          // the hop-by-hop fields, with the client's connection, as the measured route writes it.
          copyHead(response, res, false);
          cutWithUpstream(response, res, () => {
            options.proxyError('upstream_reset');
            log.warnThrottled('upstream_reset', 'upstream closed a response before its end', { path: pathOf(req) });
          });
          setImmediate(flushIdleHeaders, res, response);
          response.pipe(res);
        },
        error: (error) =>
          actOnFailedLeg({
            error,
            res,
            response: answer,
            path: pathOf(req),
            log,
            proxyError: options.proxyError,
            answer: (kind, code) => writeErrorAnswer(res, kind, code),
          }),
      },
      undefined,
      false,
      res.shouldKeepAlive,
    );
    // A client that leaves gives its upstream request up.
    res.on('close', () => {
      if (!res.writableFinished) call.destroy();
    });
  };
  return {
    web(req, res) {
      res.on('error', (error: Error) => log.warnThrottled('response_error', 'error on a client response', { error: String(error) }));
      // Node's parser let a Transfer-Encoding through only with a chunked body.
      const chunked = req.headers['transfer-encoding'] !== undefined;
      if (!chunked) {
        // No body, or one of the client's length; none is sent as none (no chunked GET).
        forward(req, res, req.headers['content-length'] === undefined ? null : req);
        return;
      }
      // A chunked body goes chunked again (undici frames a body of no length so), except a
      // DELETE's or an OPTIONS': held and sent with its length, which more servers read.
      if (req.method !== 'DELETE' && req.method !== 'OPTIONS') {
        forward(req, res, req);
        return;
      }
      const hold = options.bodyBudget?.hold(req.socket.remoteAddress);
      if (hold !== undefined) res.once('close', hold.release);
      holdSmallBody(req, options.maxHeldBodyBytes, hold, (body) => {
        if (body === 'over_budget') {
          // The proxy is short of memory for it now, not the body too large: try again later.
          options.bodyUnheld?.('content_length');
          res.shouldKeepAlive = false;
          writeErrorAnswer(res, 'overloaded', 'the bodies held by infermeter reached INFERMETER_MAX_HELD_BODY_BYTES', { 'retry-after': '1' });
          req.resume();
          return;
        }
        if (body === undefined) {
          res.shouldKeepAlive = false;
          writeErrorAnswer(res, 'body_too_large', undefined);
          req.resume();
          return;
        }
        forward(req, res, body);
      });
    },
    ws(req, socket, head) {
      socket.on('error', ignore);
      // The upgraded connection is the websocket's alone: never pooled.
      proxy.ws(req, socket, head, { agent: connections.upgrades });
    },
  };
}

function ignore(): void {}

/**
 * The whole body, or undefined past `max` bytes, or 'over_budget' when the budget for held
 * bodies has no room for it (what was read is dropped, its share given back).
 */
function holdSmallBody(req: IncomingMessage, max: number, hold: BodyHold | undefined, done: (body: Buffer | undefined | 'over_budget') => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  const onData = (chunk: Buffer): void => {
    size += chunk.length;
    const over = size > max;
    if (over || (hold !== undefined && !hold.take(chunk.length))) {
      req.off('data', onData);
      req.off('end', onEnd);
      chunks.length = 0;
      hold?.release();
      done(over ? undefined : 'over_budget');
      return;
    }
    chunks.push(chunk);
  };
  const onEnd = (): void => done(Buffer.concat(chunks, size));
  req.on('data', onData);
  req.on('end', onEnd);
}

function timeoutError(): Error {
  return Object.assign(new Error('the model server was silent too long'), { code: 'ETIMEDOUT' });
}
