// Sends an upstream response's body to the client chunk by chunk, and hands each chunk to the
// tap right after writing it: the order (forward, then read) is in the code, not in the order
// of two listeners, and one 'data' listener does both (an event with two listeners copies its
// listener list on every emit). Back-pressure as a pipe has it: a client that reads slowly
// pauses the upstream.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ResponseTap } from '../stream-tap/response-tap.ts';

/** `sent` counts the bytes handed to the client (the access log); undefined: not counted. */
export function relay(proxyRes: IncomingMessage, res: ServerResponse, tap: ResponseTap | undefined, sent?: (bytes: number) => void): void {
  let waiting = false;
  const onDrain = (): void => {
    waiting = false;
    proxyRes.resume();
  };
  proxyRes.on('data', (chunk: Buffer) => {
    // A client that is gone takes its upstream request down with it (the data plane's 'close').
    if (!res.destroyed && !res.write(chunk) && !waiting) {
      waiting = true;
      proxyRes.pause();
      res.once('drain', onDrain);
    }
    sent?.(chunk.length);
    tap?.chunk(chunk);
  });
  proxyRes.on('end', () => {
    if (!res.destroyed) res.end();
    tap?.end();
  });
  if (tap !== undefined) proxyRes.on('close', tap.close);
}
