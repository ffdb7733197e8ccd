// The container's health probe: GET /health where infermeter's management port actually
// listens, found from the same Config infermeter starts with (variables, MIES_*, MindIE's
// config.json), so the probe and the server cannot disagree about the port or the address.
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Config } from '../config/config.ts';

/** The URL of /health on the management listener of this configuration. */
export function healthUrl(config: Pick<Config, 'managementHost' | 'managementPort' | 'security'>): URL {
  // A listener on every address answers on loopback too; a specific address is the container's
  // own, so it is asked directly.
  const wildcard = ['0.0.0.0', '::', '0:0:0:0:0:0:0:0'].includes(config.managementHost);
  const host = wildcard ? '127.0.0.1' : config.managementHost.includes(':') ? `[${config.managementHost}]` : config.managementHost;
  const scheme = config.security.managementTls === undefined ? 'http' : 'https';
  return new URL(`${scheme}://${host}:${config.managementPort}/health`);
}

export interface ProbeResult {
  readonly healthy: boolean;
  /** One line for the engine's health log: the URL and the status or the error. */
  readonly detail: string;
}

/** Asks once; never rejects. TLS is not verified: the probe checks liveness, not identity. */
export function probeHealth(url: URL, timeoutMs: number): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = request(url, { method: 'GET', timeout: timeoutMs, rejectUnauthorized: false, agent: false }, (res) => {
      res.resume();
      const healthy = res.statusCode === 200;
      resolve({ healthy, detail: `${url.href} ${res.statusCode}` });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (error: NodeJS.ErrnoException) =>
      resolve({ healthy: false, detail: `${url.href} ${error.code ?? ''} ${error.message}`.replace(/\s+/g, ' ') }),
    );
    req.end();
  });
}
