// A test's server on a free loopback port (port 0), closed when the test ends: the one place for
// the listen, the address and the close with its connections cut (a close alone waits for every
// kept-alive connection, which a proxy's pool may hold open past the test).
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { TestContext } from 'node:test';
import { Server as TlsServer } from 'node:tls';

export interface Listening {
  readonly port: number;
  /** `http://127.0.0.1:<port>`; `https://` for a TLS server. */
  readonly url: string;
  /** Stops listening and cuts the open connections; resolves once the server has closed. Once. */
  close(): Promise<void>;
}

/** Listens on 127.0.0.1, port 0; with a test context, closed in its `t.after`. */
export async function listen(t: Pick<TestContext, 'after'> | undefined, server: Server): Promise<Listening> {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closed ??= new Promise<void>((resolve) => {
      server.close(() => resolve()); // called with an error, and so resolved, if the test closed it first
      for (const socket of sockets) socket.destroy();
    }));
  t?.after(close);
  return { port, url: `${server instanceof TlsServer ? 'https' : 'http'}://127.0.0.1:${port}`, close };
}

/**
 * `n` distinct loopback ports that were free a moment ago (listened on together, then closed):
 * for a process that must be told its port beforehand (workers that share one, or start again
 * where they were), or an upstream address where nothing listens.
 */
export async function freePorts(n: number): Promise<number[]> {
  const held = await Promise.all(Array.from({ length: n }, () => listen(undefined, createServer())));
  await Promise.all(held.map((h) => h.close()));
  return held.map((h) => h.port);
}

export async function freePort(): Promise<number> {
  return (await freePorts(1))[0]!;
}
