// Hop-by-hop headers describe one connection, not the message (RFC 9110 §7.6.1): they are
// dropped at the proxy in both directions, along with any header the Connection header names.
import type { IncomingHttpHeaders } from 'node:http';

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'];

/** Removes hop-by-hop headers in place. `keepUpgrade` leaves Connection/Upgrade for a websocket handshake. */
export function stripHopByHop(headers: IncomingHttpHeaders, keepUpgrade = false): void {
  const connection = headers.connection;
  if (typeof connection === 'string' && connection !== '') {
    for (const token of connection.split(',')) {
      const name = token.trim().toLowerCase();
      if (name === '' || (keepUpgrade && name === 'upgrade')) continue;
      if (name !== 'connection') delete headers[name];
    }
  }
  for (const name of HOP_BY_HOP) {
    if (keepUpgrade && (name === 'connection' || name === 'upgrade')) continue;
    delete headers[name];
  }
}
