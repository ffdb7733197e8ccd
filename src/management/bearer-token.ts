// The optional bearer token of the management and metrics ports: a scrape or a query without
// it gets 401 and no data. Compared in constant time: both sides are hashed to the same length
// first, so neither the length nor the first wrong byte shows in the timing.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** Paths a load balancer or kubelet probes without credentials: they reveal nothing. */
const OPEN = new Set(['/health', '/ready']);

/** `open`: further paths that need no token because they hold no data (the dashboard's page). */
export function requireBearer(token: string, open: (path: string) => boolean = () => false): MiddlewareHandler {
  const expected = digest(token);
  return async function bearerToken(c, next) {
    if (OPEN.has(c.req.path) || open(c.req.path)) return next();
    const header = c.req.header('authorization') ?? '';
    const given = header.startsWith('Bearer ') ? header.slice(7) : '';
    if (given !== '' && timingSafeEqual(digest(given), expected)) return next();
    c.header('www-authenticate', 'Bearer realm="infermeter"');
    return c.json({ error: { message: 'a bearer token is required', type: 'unauthorized', param: null, code: 401 } }, 401);
  };
}
