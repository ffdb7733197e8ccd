// Sends an upstream response's body to the client, and hands what it wrote to the tap right
// after writing it: the order (forward, then read) is in the code, not in the order of two
// listeners. Chunks that arrive in the same turn (one socket read holds many small HTTP chunks
// when the upstream streams fast) are written as one, in a tick queued at the first of them:
// the same bytes, leaving in the same turn as before, but one write through Node's HTTP and
// stream machinery instead of one per upstream chunk, as nginx writes what one read brought.
// When the upstream's end came in the same read, the batch waits for it and leaves with the
// end in one write, as the upstream sent them (the last event and the chunked terminator in one
// packet). Back-pressure as a pipe has it: a client that reads slowly pauses the upstream.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ResponseTap } from '../stream-tap/response-tap.ts';
import type { BodyFilter } from '../stream-tap/usage-strip.ts';

export interface RelayHooks {
  /** Counts the bytes handed to the client (the access log); undefined: not counted. */
  readonly sent?: ((bytes: number) => void) | undefined;
  /** Told just before the first write (the head leaves with it, unless it was flushed before). */
  readonly firstWrite?: () => void;
  /** Told just before the last bytes are written (the end of e2e). */
  readonly lastWrite?: () => void;
  /**
   * What the client gets of each batch (the usage strip): still one write per batch; the tap
   * reads the upstream's bytes as they came, the count is of what was written.
   */
  readonly filter?: BodyFilter | undefined;
  /** Told when a batch's first chunk arrives (the start of the proxy's own time on it). */
  readonly arrived?: () => void;
}

export function relay(proxyRes: IncomingMessage, res: ServerResponse, tap: ResponseTap | undefined, hooks: RelayHooks = {}): void {
  const { sent, lastWrite, filter, arrived } = hooks;
  let firstWrite = hooks.firstWrite;
  const batch: Buffer[] = [];
  let batchLength = 0;
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
  const flush = (): void => {
    if (batch.length === 0) return; // written already, with the end
    // The upstream's end came in the same read (the parser saw the body complete): the batch
    // leaves with it, in one write, as the upstream sent it ('end' follows in this turn).
    if (proxyRes.complete && !proxyRes.destroyed) return;
    write();
  };
  const write = (): void => {
    const read = take();
    const out = filter === undefined ? read : filter.pass(read);
    // A client that is gone takes its upstream request down with it (the data plane's 'close');
    // an answer ended already (the total timeout's 504) gets nothing more.
    if (out !== undefined) {
      if (firstWrite !== undefined) {
        firstWrite();
        firstWrite = undefined;
      }
      if (!res.destroyed && !res.writableEnded && !res.write(out) && !waiting) {
        waiting = true;
        proxyRes.pause();
        res.once('drain', onDrain);
      }
      sent?.(out.length);
    }
    tap?.chunk(read);
  };
  proxyRes.on('data', (chunk: Buffer) => {
    if (batch.length === 0) {
      process.nextTick(flush);
      arrived?.();
    }
    batch.push(chunk);
    batchLength += chunk.length;
  });
  proxyRes.on('end', () => {
    const read = batch.length === 0 ? undefined : take();
    let out = read;
    if (filter !== undefined) {
      const passed = read === undefined ? undefined : filter.pass(read);
      const rest = filter.end();
      out = rest === undefined ? passed : passed === undefined ? rest : Buffer.concat([passed, rest]);
    }
    // The last bytes and the end go out in one write.
    if (!res.destroyed && !res.writableEnded) {
      firstWrite?.();
      lastWrite?.();
      res.end(out);
    }
    if (out !== undefined) sent?.(out.length);
    if (read !== undefined) tap?.chunk(read);
    tap?.end();
  });
  // Complete but destroyed before its 'end' (its client left): what was held is handed on.
  proxyRes.on('close', () => {
    if (batch.length > 0) write();
    tap?.close();
  });
}
