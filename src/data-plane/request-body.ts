// A chat or completions body held whole before it goes upstream, so that usage can be injected
// into it (usage-injection.ts) and the original kept for a re-send. Held up to the inspection
// cap and within the process's budget for held bodies (body-budget.ts); a larger body, or one
// that finds the budget spent, is forwarded as it comes, held bytes first.
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { createBodyScanner, type ScanResult } from '../stream-tap/request-body-scanner.ts';
import type { BodyHold } from './body-budget.ts';

export interface HeldBody {
  /** The whole body, and what the scan of it found. */
  held(body: Buffer, scan: ScanResult): void;
  /** Past the cap: what was held, then the rest as the client sends it. */
  tooLarge(body: Readable): void;
  /**
   * The budget for held bodies is spent: what was held, then the rest as the client sends it,
   * read on the way for `model` and `stream` (`scanned`, once the client sent it all).
   */
  overBudget(body: Readable): void;
  /** After overBudget: what the scan of the whole body found (too_large past the cap). */
  scanned(scan: ScanResult | { ok: false; reason: 'too_large' }): void;
  /** Bytes read from the client so far (the access log). */
  read(bytes: number): void;
}

export function holdBody(req: IncomingMessage, maxBytes: number, hold: BodyHold, handlers: HeldBody): void {
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
    if (hold.take(chunk.length)) return;
    req.off('data', onData);
    req.off('end', onEnd);
    req.pause();
    handlers.overBudget(
      joinHeldAndRest(
        chunks,
        req,
        (rest) => {
          size += rest.length;
          handlers.read(rest.length);
          if (size <= maxBytes) scanner.feed(rest);
        },
        () => handlers.scanned(size > maxBytes ? { ok: false, reason: 'too_large' } : scanner.end()),
      ),
    );
  };
  const onEnd = (): void => handlers.held(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size), scanner.end());
  req.on('data', onData);
  req.on('end', onEnd);
}

/**
 * Held chunks first, then whatever else the client sends (each seen by `rest`, then `ended`),
 * with the client's back-pressure: the client is read as fast as the upstream takes the bytes.
 * A client that leaves before its body's end closes the stream without an 'error' (nobody need
 * listen for one, and none can take the process down) and without its 'end', so whoever pipes it
 * never ends the upstream request as if the body were whole: the route aborts that request when
 * the client's response closes, and the upstream request aborts itself on the early close
 * (upstream-request.ts).
 */
function joinHeldAndRest(held: readonly Buffer[], req: IncomingMessage, rest?: (chunk: Buffer) => void, ended?: () => void): Readable {
  const onData = (chunk: Buffer): void => {
    rest?.(chunk);
    if (!body.push(chunk)) req.pause();
  };
  const onEnd = (): void => {
    stop();
    ended?.();
    body.push(null);
  };
  const onClose = (): void => {
    stop();
    if (!req.complete) body.destroy();
  };
  const stop = (): void => {
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('close', onClose);
  };
  const body = new Readable({
    read: () => void req.resume(),
    destroy(error, callback) {
      stop();
      callback(error);
    },
  });
  for (const chunk of held) body.push(chunk);
  // The client's request stays paused (its flow was stopped on purpose) until the body is read.
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('close', onClose);
  // Left already (its close came before these listeners): nothing more will come.
  if (req.destroyed && !req.complete) body.destroy();
  return body;
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
 * `maxBytes` and while the budget for held bodies allows (else `overBudget`, and no copy): a
 * request whose upstream connection failed before answering is replayable.
 */
export function copyBody(req: IncomingMessage, maxBytes: number, hold: BodyHold, overBudget: () => void): BodyCopy {
  let chunks: Buffer[] | undefined = [];
  let size = 0;
  let ended = false;
  let waiting: ((body: Buffer | undefined) => void) | undefined;
  const onData = (chunk: Buffer): void => {
    size += chunk.length;
    if (chunks === undefined) return;
    if (size > maxBytes || !hold.take(chunk.length)) {
      if (size <= maxBytes) overBudget();
      chunks = undefined;
      hold.release();
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
      hold.release();
      stop();
      waiting = undefined;
    },
  };
}
