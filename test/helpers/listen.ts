// A test's server on a free loopback port (port 0), closed when the test ends: the one place for
// the listen, the address and the close with its connections cut (a close alone waits for every
// kept-alive connection, which a proxy's pool may hold open past the test).
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
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
 * where they were), or an upstream address where nothing listens. Taken at random below the
 * kernel's ephemeral range, where no listen on port 0 and no outgoing connection of the suite's
 * other processes lands: a port the kernel hands out for port 0 is soon handed out again, and
 * under the suite's churn another process's server took one between its close here and the
 * test's own listen (a probe answered by someone else's /health).
 */
export async function freePorts(n: number): Promise<number[]> {
  const ports: number[] = [];
  const held: Listening[] = [];
  for (let tries = 0; ports.length < n; tries++) {
    if (tries === 1000) throw new Error(`no ${n} free ports in ${FREE_LOW}-${EPHEMERAL_LOW - 1} after ${tries} tries`);
    const port = FREE_LOW + Math.floor(Math.random() * (EPHEMERAL_LOW - FREE_LOW));
    if (ports.includes(port)) continue;
    try {
      held.push(await listenOn(port));
      ports.push(port);
    } catch {} // in use: another
  }
  await Promise.all(held.map((h) => h.close()));
  return ports;
}

// Ports from FREE_LOW up to the ephemeral range's start: clear of the well-known ones, the demo's
// 1025-1027 among them.
const FREE_LOW = 20_000;
const EPHEMERAL_LOW = ephemeralLow();
/** The first port of the kernel's ephemeral range (Linux's default 32768; IANA's 49152 elsewhere). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (low > FREE_LOW + 1000) return low;
  } catch {}
  return process.platform === 'linux' ? 32_768 : 49_152;
}

async function listenOn(port: number): Promise<Listening> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return { port, url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

export async function freePort(): Promise<number> {
  return (await freePorts(1))[0]!;
}
