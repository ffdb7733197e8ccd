// The optional bearer token of the management and metrics ports: a scrape or a query without
// it gets 401 and no data. Compared in constant time: both sides are hashed to the same length
// first, so neither the length nor the first wrong byte shows in the timing (hashing the given
// token takes time in its own length, which the client already knows).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** Paths a load balancer or kubelet probes without credentials: they reveal nothing. */
const OPEN = new Set(['/health', '/ready']);

/**
 * The token of an `Authorization: Bearer <token>` header; '' when there is none. The scheme is
 * case-insensitive and may be followed by several spaces (RFC 9110 11.1, 11.4).
 */
export function bearerCredentials(header: string | undefined): string {
  const m = header === undefined ? null : /^bearer +(\S+)$/i.exec(header);
  return m === null ? '' : m[1]!;
}

/** `open`: further paths that need no token because they hold no data (the dashboard's page). */
export function requireBearer(token: string, open: (path: string) => boolean = () => false): MiddlewareHandler {
  const expected = digest(token);
  return async function bearerToken(c, next) {
    if (OPEN.has(c.req.path) || open(c.req.path)) return next();
    const given = bearerCredentials(c.req.header('authorization'));
    if (given !== '' && timingSafeEqual(digest(given), expected)) return next();
    c.header('www-authenticate', 'Bearer realm="infermeter"');
    return c.json({ error: { message: 'a bearer token is required', type: 'unauthorized', param: null, code: 401 } }, 401);
  };
}
