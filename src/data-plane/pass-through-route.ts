// The pass-through route: every request that is not inference (other paths and methods,
// websocket upgrades) goes through http-proxy-3 untouched and unmeasured. What it shares with
// the measured route: the upstream connection policy, the hop-by-hop rules, a response cut upstream is cut
// for the client, and the proxy's own failures answered and counted the same way.
import type http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Readable, type Duplex } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import type { Logger } from '../log.ts';
import type { BodyBudget, BodyHold, HeldBodyUse } from './body-budget.ts';
import { actOnFailedLeg, unaskedUpgrade, writeErrorAnswer } from './error-answer.ts';
import { stripHopByHop } from './hop-by-hop.ts';
import type { ProxyErrorKind } from './openai-error.ts';
import { pathOf } from './request-path.ts';
import { copyHead, cutWithUpstream, flushIdleHeaders, unsendableHead } from './response-head.ts';
import type { UpstreamConnections } from './upstream-connections.ts';

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

// The upstream's response of a request, kept on the request: http-proxy-3's error handler gets
// only the request, and must know whether an answer had begun.
const UPSTREAM_RESPONSE = Symbol('infermeter.upstreamResponse');
type Tagged = IncomingMessage & { [UPSTREAM_RESPONSE]?: IncomingMessage };

export function createPassThroughRoute(options: PassThroughOptions): PassThroughRoute {
  const { log } = options;
  // toProxy: the client's target is sent as it came (http-proxy-3 would otherwise rewrite it
  // through URL: dot segments resolved, `\` made `/`, the fragment cut), so that the engine
  // routes the bytes infermeter routed (inference-route.ts), as on the measured route.
  const proxy = createProxyServer({ target: options.upstream, changeOrigin: true, ws: true, connectTimeout: options.connectTimeoutMs, toProxy: true });
  // An upstream silent for longer than the idle timeout is given up on (Node's socket timeout).
  proxy.on('proxyReq', (proxyReq: http.ClientRequest, req: IncomingMessage, res: ServerResponse) => {
    proxyReq.setTimeout(options.idleTimeoutMs, () => proxyReq.destroy(timeoutError()));
    // Every header of the upstream's head (upstream-request.ts says why). http-proxy-3 emits
    // this on the request's socket event, after Node gave its parser the default limit of 1000
    // headers from maxHeadersCount: the parser's own limit (read as the head is parsed) is lifted.
    proxyReq.maxHeadersCount = 0;
    const parser = (proxyReq as { parser?: { maxHeaderPairs?: number } | null }).parser;
    if (parser != null) parser.maxHeaderPairs = 0;
    // A 101 to a request that asked for no upgrade: Node would drop the socket and leave the
    // request waiting for a response that never comes.
    proxyReq.on('upgrade', (_response: IncomingMessage, socket: Duplex) => {
      socket.destroy();
      onError(unaskedUpgrade(), req, res);
    });
  });
  // A websocket: the same idle timeout while its upgrade is awaited, then on the open tunnel
  // (no byte either way for that long closes both sides).
  proxy.on('proxyReqWs', (proxyReq: http.ClientRequest) => {
    proxyReq.setTimeout(options.idleTimeoutMs, () => proxyReq.destroy(timeoutError()));
  });
  proxy.on('open', (proxySocket: Socket) => {
    proxySocket.setTimeout(options.idleTimeoutMs, () => {
      options.proxyError('upstream_timeout');
      proxySocket.destroy();
    });
  });

  proxy.on('proxyRes', (proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse) => {
    (req as Tagged)[UPSTREAM_RESPONSE] = proxyRes;
    // http-proxy-3 writes the head where a throw would reach the process: a head Node refuses
    // to send is answered here instead (http-proxy-3 then leaves the ended response alone).
    const unsendable = unsendableHead(proxyRes);
    if (unsendable !== undefined) {
      proxyRes.destroy();
      options.proxyError('upstream_protocol');
      log.warnThrottled('upstream_head', "the upstream's response head cannot be forwarded", { problem: unsendable, path: pathOf(req) });
      writeErrorAnswer(res, 'upstream_protocol', 'HPE_UNSENDABLE_HEAD');
      return;
    }
    // The head as the upstream wrote it (its names' spelling, order and repeated fields), less
    // the hop-by-hop fields, with the client's connection, as the measured route writes it:
    // http-proxy-3's own passes, skipped once the head is written, set each field from Node's
    // headers object (names in lower case, repeats joined). Checked sendable above.
    copyHead(proxyRes, res, false);
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

  const { connections } = options;
  return {
    web(req, res) {
      const agent = { agent: connections.agentFor(req.socket, res.shouldKeepAlive) };
      // Node's parser let a Transfer-Encoding through only with a chunked body.
      const chunked = req.headers['transfer-encoding'] !== undefined;
      stripHopByHop(req.headers);
      // Node's server answered the client's `Expect: 100-continue` already, and the body is
      // forwarded as it comes. Passed on, it would also make http-proxy-3 skip its proxyReq event,
      // and with it the idle timeout and the guard against an unasked 101 set there.
      if (req.headers.expect !== undefined) delete req.headers.expect;
      if (!chunked) {
        proxy.web(req, res, agent, onError);
        return;
      }
      // The body keeps a framing the upstream reads as this one request: without its
      // Transfer-Encoding, Node writes a GET's or a HEAD's body bytes unframed (an upstream
      // would read them as a request of their own), and http-proxy-3 gives a DELETE or an
      // OPTIONS a content-length of 0. Chunked again, or held and sent with its length.
      if (req.method !== 'DELETE' && req.method !== 'OPTIONS') {
        req.headers['transfer-encoding'] = 'chunked';
        proxy.web(req, res, agent, onError);
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
        req.headers['content-length'] = String(body.length);
        proxy.web(req, res, { ...agent, buffer: Readable.from([body]) }, onError);
      });
    },
    ws(req, socket, head) {
      socket.on('error', ignore);
      // The upgraded connection is the websocket's alone: never pooled.
      proxy.ws(req, socket, head, { agent: connections.fresh }, onError);
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
