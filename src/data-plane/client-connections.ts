// The data plane's client connections: counted, drained on a graceful stop, closed on a hard
// one.
import type http from 'node:http';
import type { Socket } from 'node:net';

/** Why a client connection was answered 400/408 before any request was read (`clientError`). */
export type ClientErrorKind = 'timeout' | 'malformed';

export interface ClientConnections {
  /** Connections open now. */
  count(): number;
  /**
   * Lets requests in flight finish (connections close after their current response) for up
   * to `timeoutMs`, then cuts what is left. Resolves when none is open, with how many were cut.
   */
  drain(timeoutMs: number): Promise<number>;
  /** Ends idle and unused connections now, and each other one as soon as its response is done. */
  closeEach(): void;
}

export function trackConnections(server: http.Server): ClientConnections {
  const sockets = new Set<Socket>();
  let drained: (() => void) | undefined;
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      if (sockets.size === 0) drained?.();
    });
  });
  const closeIdle = (): void => {
    server.closeIdleConnections();
    // closeIdleConnections leaves alone a connection that has not sent a byte yet (a client's
    // spare connection, a load balancer's pre-connect): nothing is in flight on it.
    for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
  };
  const closeEach = (): void => {
    closeIdle();
    // A connection whose response ends from now on is closed at once, not kept alive: Node
    // reads these when a response finishes (a keepAliveTimeout of 0 would mean never).
    server.keepAliveTimeout = 1;
    (server as { keepAliveTimeoutBuffer?: number }).keepAliveTimeoutBuffer = 0;
  };
  return {
    count: () => sockets.size,
    closeEach,
    drain(timeoutMs) {
      closeEach();
      if (sockets.size === 0) return Promise.resolve(0);
      return new Promise<number>((resolve) => {
        const timer = setTimeout(() => {
          // Past the drain timeout: what is left is cut.
          const cut = sockets.size;
          server.closeAllConnections();
          resolve(cut);
        }, timeoutMs);
        timer.unref();
        drained = () => {
          clearTimeout(timer);
          resolve(0);
        };
      });
    },
  };
}
