// Starts a hono app on node:http through @hono/node-server, leaving Node's globals alone.
import type { Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import type { Hono } from 'hono';
import { resolveListenAddress } from '../config/listen-addresses.ts';
import type { TlsFiles } from '../config/security.ts';

/** A node:http server for the app, or node:https with the given key and certificate. */
export function createAppServer(app: Hono, tls?: TlsFiles): Server {
  if (tls === undefined) return createAdaptorServer({ fetch: app.fetch, overrideGlobalObjects: false }) as Server;
  return createAdaptorServer({
    fetch: app.fetch,
    overrideGlobalObjects: false,
    createServer: createHttpsServer,
    serverOptions: { ...tls },
  }) as unknown as Server;
}

/** Whether every address may be bound, and the variable that named the host (for the refusal). */
export interface ListenPolicy {
  readonly allowAll: boolean;
  readonly variable: string;
}

/**
 * Listens and resolves with the bound address; rejects on EADDRINUSE and the like, and on a host
 * that resolves to the unspecified address without the policy's leave (the address checked is
 * the one bound).
 */
export async function listen(server: Server, host: string, port: number, policy: ListenPolicy): Promise<AddressInfo> {
  const address = await resolveListenAddress(host, policy.allowAll, policy.variable);
  return new Promise((resolve, reject) => {
    const onError = (error: Error): void => reject(error);
    server.once('error', onError);
    server.listen(port, address, () => {
      server.off('error', onError);
      resolve(server.address() as AddressInfo);
    });
  });
}

/** How long close() lets a response in progress finish before its connection is cut (ms). */
const CLOSE_GRACE_MS = 5000;

/**
 * Stops listening and resolves when every connection is gone: idle ones closed now, a kept-alive
 * one busy now (a scraper on a one-second loop never leaves its connection idle for long) as
 * soon as its response ends, and whatever is left after `graceMs` cut.
 */
export function closeServer(server: Server, graceMs = CLOSE_GRACE_MS): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) {
      resolve();
      return;
    }
    const cut = setTimeout(() => server.closeAllConnections(), graceMs);
    cut.unref();
    server.close(() => {
      clearTimeout(cut);
      resolve();
    });
    server.closeIdleConnections();
    // Node reads these when a response ends: the connection is then closed, not kept alive (a
    // keepAliveTimeout of 0 would mean never).
    server.keepAliveTimeout = 1;
    (server as { keepAliveTimeoutBuffer?: number }).keepAliveTimeoutBuffer = 0;
  });
}

export function urlOf(address: AddressInfo, scheme = 'http'): string {
  return `${scheme}://${hostPort(address)}`;
}

/** ip:port, with brackets around an IPv6 address. */
export function hostPort(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `${host}:${address.port}`;
}
