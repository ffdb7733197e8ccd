// A chat or completions body held whole before it goes upstream, so that usage can be injected
// into it (usage-injection.ts) and the original kept for a re-send. Held up to the inspection
// cap; a larger body is forwarded as it comes, held bytes first.
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { createBodyScanner, type ScanResult } from '../stream-tap/request-body-scanner.ts';

export interface HeldBody {
  /** The whole body, and what the scan of it found. */
  held(body: Buffer, scan: ScanResult): void;
  /** Past the cap: what was held, then the rest as the client sends it. */
  tooLarge(body: Readable): void;
  /** Bytes read from the client so far (the access log). */
  read(bytes: number): void;
}

export function holdBody(req: IncomingMessage, maxBytes: number, handlers: HeldBody): void {
  const chunks: Buffer[] = [];
  let size = 0;
  const scanner = createBodyScanner();
  const onData = (chunk: Buffer): void => {
    size += chunk.length;
    handlers.read(chunk.length);
    chunks.push(chunk);
    if (size > maxBytes) {
      req.off('data', onData);
      req.off('end', onEnd);
      req.pause();
      handlers.tooLarge(joinHeldAndRest(chunks, req));
      return;
    }
    scanner.feed(chunk);
  };
  const onEnd = (): void => handlers.held(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size), scanner.end());
  req.on('data', onData);
  req.on('end', onEnd);
}

/** Held chunks first, then whatever else the client sends. */
function joinHeldAndRest(held: readonly Buffer[], req: IncomingMessage): Readable {
  return Readable.from(
    (async function* () {
      yield* held;
      req.resume();
      for await (const chunk of req) yield chunk as Buffer;
    })(),
  );
}
