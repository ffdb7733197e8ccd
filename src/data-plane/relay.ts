// Sends an upstream response's body to the client, and hands what it wrote to the tap right
// after writing it: the order (forward, then read) is in the code, not in the order of two
// listeners. A chunk alone in its turn of the event loop (a token every few milliseconds) is
// written at once. Chunks that arrive in the same turn (one socket read holds many small HTTP
// chunks when the upstream streams fast) are written as one after the first, in a tick queued
// at the second: the same bytes, leaving in the same turn, in one write to the socket, with two
// writes through Node's HTTP and stream machinery instead of one per upstream chunk, as nginx
// writes what one read brought.
// Back-pressure as a pipe has it: a client that reads slowly pauses the upstream.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ResponseTap } from '../stream-tap/response-tap.ts';

/** `sent` counts the bytes handed to the client (the access log); undefined: not counted. */
export function relay(proxyRes: IncomingMessage, res: ServerResponse, tap: ResponseTap | undefined, sent?: (bytes: number) => void): void {
  const batch: Buffer[] = [];
  let batchLength = 0;
  /** The socket our cork holds while a batch waits (the response may have left it by the flush). */
  let corked: Socket | null = null;
  let waiting = false;
  const onDrain = (): void => {
    waiting = false;
    proxyRes.resume();
  };
  /** The batch, joined (a lone chunk as it is); the batch starts over. */
  const take = (): Buffer => {
    const out = batch.length === 1 ? batch[0]! : Buffer.concat(batch, batchLength);
    batch.length = 0;
    batchLength = 0;
    return out;
  };
  const write = (out: Buffer): void => {
    // A client that is gone takes its upstream request down with it (the data plane's 'close');
    // an answer ended already (the total timeout's 504) gets nothing more.
    if (!res.destroyed && !res.writableEnded && !res.write(out) && !waiting) {
      waiting = true;
      proxyRes.pause();
      res.once('drain', onDrain);
    }
    handOn(out);
  };
  const uncork = (): void => {
    corked?.uncork();
    corked = null;
  };
  const flush = (): void => {
    if (batch.length === 0) return; // written already, with the end
    write(take());
    uncork(); // the turn's writes leave in one
  };
  /** What was written, counted and handed to the tap. */
  const handOn = (out: Buffer): void => {
    sent?.(out.length);
    tap?.chunk(out);
  };
  proxyRes.on('data', (chunk: Buffer) => {
    if (batch.length !== 0) {
      batch.push(chunk);
      batchLength += chunk.length;
      return;
    }
    const socket = res.socket;
    // Node corks the socket at a response's write and uncorks it in the next tick: corked here
    // means this turn wrote already. The first chunk of a turn is written at once; the others
    // are gathered and written as one in a tick queued now, under a cork of ours that holds
    // the first write back until then, so the turn still leaves in one write to the socket.
    if (socket === null || socket.writableCorked === 0) {
      write(chunk);
      return;
    }
    socket.cork();
    corked = socket;
    process.nextTick(flush);
    batch.push(chunk);
    batchLength += chunk.length;
  });
  proxyRes.on('end', () => {
    const out = batch.length === 0 ? undefined : take();
    // The last bytes and the end go out in one write.
    if (!res.destroyed && !res.writableEnded) res.end(out);
    uncork();
    if (out !== undefined) handOn(out);
    tap?.end();
  });
  if (tap !== undefined) proxyRes.on('close', tap.close);
}
