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

/** A streamed body's bytes, kept beside the forwarding (up to a cap) so it can be sent again. */
export interface BodyCopy {
  /** The whole body once the client sent it all, within the cap; undefined before, or past it. */
  whole(done: (body: Buffer | undefined) => void): void;
  /** The copy is no longer needed (a response began): its bytes are let go. */
  release(): void;
}

/**
 * Keeps references to a body's chunks as they stream upstream (no copy of the bytes), up to
 * `maxBytes`: a request whose upstream connection failed before answering is replayable.
 */
export function copyBody(req: IncomingMessage, maxBytes: number): BodyCopy {
  let chunks: Buffer[] | undefined = [];
  let size = 0;
  let ended = false;
  let waiting: ((body: Buffer | undefined) => void) | undefined;
  const onData = (chunk: Buffer): void => {
    size += chunk.length;
    if (chunks === undefined) return;
    if (size > maxBytes) {
      chunks = undefined;
      stop();
      return;
    }
    chunks.push(chunk);
  };
  const onEnd = (): void => {
    ended = true;
    stop();
    answer();
  };
  const stop = (): void => {
    req.off('data', onData);
    req.off('end', onEnd);
  };
  const answer = (): void => {
    const done = waiting;
    if (done === undefined) return;
    waiting = undefined;
    done(chunks === undefined ? undefined : Buffer.concat(chunks, size));
  };
  req.on('data', onData);
  req.on('end', onEnd);
  return {
    whole(done) {
      waiting = done;
      if (ended || chunks === undefined) answer();
      // The rest of the body is still to come: read it (the upstream request that piped it is gone).
      else req.resume();
    },
    release() {
      chunks = undefined;
      stop();
      waiting = undefined;
    },
  };
}
