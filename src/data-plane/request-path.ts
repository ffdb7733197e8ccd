import type { IncomingMessage } from 'node:http';

/** A request's path without its query (which may hold secrets), short enough for a log line. */
export function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '';
  const q = url.indexOf('?');
  return (q === -1 ? url : url.slice(0, q)).slice(0, 200);
}
