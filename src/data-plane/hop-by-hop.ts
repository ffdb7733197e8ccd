// Hop-by-hop headers describe one connection, not the message (RFC 9110 §7.6.1): they are
// dropped at the proxy in both directions, along with any header the Connection header names.
import type { IncomingHttpHeaders } from 'node:http';

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'] as const;

/** Removes hop-by-hop headers in place. */
export function stripHopByHop(headers: IncomingHttpHeaders): void {
  const connection = headers.connection;
  // "keep-alive" and "close" name no other header: the common case needs no split.
  if (typeof connection === 'string' && connection !== 'keep-alive' && connection !== 'close' && connection !== '') {
    for (const token of connection.split(',')) {
      const name = token.trim().toLowerCase();
      if (name !== '' && name !== 'connection') delete headers[name];
    }
  }
  // Delete only what is there: a delete of an absent key still costs a lookup, and deletes are
  // what turn header objects into slow dictionaries.
  for (const name of HOP_BY_HOP) if (headers[name] !== undefined) delete headers[name];
}
