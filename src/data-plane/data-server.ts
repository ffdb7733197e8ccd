// The data plane's listener (data-plane.ts routes its requests): a node:http server, or https
// with INFERMETER_TLS_*, with the slow-client timeouts, only a websocket offer taken up, and a
// connection that is too slow or not HTTP answered as Node would, without logging its bytes.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type { Limits } from '../config/limits.ts';
import type { TlsFiles } from '../config/security.ts';
import type { ClientErrorKind } from './client-connections.ts';

export const BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n';
const HEADERS_TOO_LARGE = 'HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n';

interface DataServerOptions {
  /** TLS of the listener; undefined: plain HTTP. */
  readonly tls: TlsFiles | undefined;
  readonly limits: Pick<Limits, 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs'>;
  onRequest(req: IncomingMessage, res: ServerResponse): void;
  /** A websocket offer (any other upgrade is served as the HTTP/1.1 request it also is). */
  onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** A connection dropped before its request could be read (slow client, not HTTP). */
  readonly clientError: ((kind: ClientErrorKind) => void) | undefined;
}

export function createDataServer(options: DataServerOptions): http.Server {
  const { limits, onRequest } = options;
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
  server.on('upgrade', options.onUpgrade);
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
  return server;
}

/** Whether a request's Upgrade header offers the websocket protocol (RFC 6455), among others or alone. */
export function offersWebsocket(req: IncomingMessage): boolean {
  const upgrade = req.headers.upgrade;
  return upgrade !== undefined && /(?:^|,)\s*websocket\s*(?:,|$)/i.test(upgrade);
}
