// Hop-by-hop headers describe one connection, not the message (RFC 9110 §7.6.1): they are
// dropped at the proxy in both directions, along with any header the Connection header names.
import type { IncomingHttpHeaders } from 'node:http';

/** The names stripHopByHop removes (besides those the Connection header lists). */
export const HOP_BY_HOP_HEADERS: readonly string[] = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'];

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
  // what turn header objects into slow dictionaries. Spelled out, one named load each: a loop
  // over the names makes one megamorphic keyed load of them all (twice a request, measured).
  if (connection !== undefined) delete headers.connection;
  if (headers['keep-alive'] !== undefined) delete headers['keep-alive'];
  if (headers['proxy-connection'] !== undefined) delete headers['proxy-connection'];
  if (headers.te !== undefined) delete headers.te;
  if (headers.trailer !== undefined) delete headers.trailer;
  if (headers['transfer-encoding'] !== undefined) delete headers['transfer-encoding'];
  if (headers.upgrade !== undefined) delete headers.upgrade;
}
