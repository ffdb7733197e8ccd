// The client's response head on the measured route: the upstream's status and headers as
// written (hop-by-hop ones dropped), sent as soon as they arrive.
import { validateHeaderName, validateHeaderValue, type ServerResponse } from 'node:http';
import type { UpstreamResponse } from './upstream-response.ts';
import { forwardHeaders, headerFilter } from './hop-by-hop.ts';

// A response's head: the upstream's headers but the hop-by-hop ones (and its content-length
// when the body is rewritten); the connection header is the proxy's.
const RESPONSE = headerFilter();
const REWRITTEN_RESPONSE = headerFilter(['content-length']);

/**
 * Sets the upstream's status and headers as the client's response head (not yet sent); without
 * content-length when the body is rewritten. Throws what Node throws for a head it refuses to
 * send (a status out of range, a reason phrase with a control byte).
 */
export function copyHead(proxyRes: UpstreamResponse, res: ServerResponse, rewritten: boolean): void {
  const headers = forwardHeaders(proxyRes.rawHeaders, rewritten ? REWRITTEN_RESPONSE : RESPONSE, []);
  // The client's connection, not the upstream's: Node decided from the client's request
  // (Connection: close, HTTP/1.0) whether it stays open.
  headers.push('connection', res.shouldKeepAlive ? 'keep-alive' : 'close');
  res.writeHead(proxyRes.statusCode ?? 502, proxyRes.statusMessage || undefined, headers);
}

/**
 * Headers go to the client as they arrive, as they would without us (a streaming upstream often
 * sends them well before its first token; Node would otherwise hold them until the first body
 * byte, and behind a long prefill held headers look like a silent connection). Run with
 * setImmediate, still in the turn of the event loop that brought them, after every socket read
 * of that turn: a body that came with the head leaves with it in one write, and in a burst of
 * requests each is sent upstream before the heads of the answers go out. No timer.
 */
export function flushIdleHeaders(res: ServerResponse, proxyRes: UpstreamResponse, flushing?: () => void): void {
  // headersSent turns true at writeHead, before anything is written; _headerSent (Node's own
  // field, kept since its first releases; a test fails without it) says whether the head left.
  if (!(res as unknown as { _headerSent: boolean })._headerSent && proxyRes.readableLength === 0 && !res.destroyed && !res.writableEnded) {
    flushing?.(); // just before the head leaves: TTFB
    res.flushHeaders();
  }
}

/** A response that breaks off upstream breaks off for the client too (`cut` is told first). */
export function cutWithUpstream(proxyRes: UpstreamResponse, res: ServerResponse, cut: () => void): void {
  // Ending it cleanly would turn a truncated answer into one that looks whole.
  proxyRes.on('error', ignore);
  proxyRes.on('close', () => {
    // Not a cut for the client when its answer has ended already (its own error answer).
    if (proxyRes.complete || res.destroyed || res.writableEnded) return;
    cut();
    res.destroy();
  });
}

function ignore(): void {}

// What Node refuses in a reason phrase (its own check, _http_common's checkInvalidHeaderChar).
const INVALID_REASON = /[^\t\x20-\x7e\x80-\xff]/;

/**
 * Why Node would refuse to send the upstream's head to the client, or undefined when it would
 * send it: a status out of 100-999 (`000`, `099`), a reason phrase or a header with a byte Node
 * does not send. For a route that cannot catch the throw where the head is written.
 */
export function unsendableHead(response: UpstreamResponse): string | undefined {
  const status = response.statusCode ?? 0;
  if (!Number.isInteger(status) || status < 100 || status > 999) return `status ${status}`;
  if (INVALID_REASON.test(response.statusMessage ?? '')) return 'reason phrase';
  const raw = response.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    try {
      validateHeaderName(raw[i]!);
      validateHeaderValue(raw[i]!, raw[i + 1]!);
    } catch {
      return 'header';
    }
  }
  return undefined;
}
