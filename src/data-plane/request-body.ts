// A chat or completions body held whole before it goes upstream, so that usage can be injected
// into it (usage-injection.ts) and the original kept for a re-send. Held up to the inspection
// cap and within the process's budget for held bodies and its client's part of it
// (body-budget.ts). A body that cannot be held streams through (streamed-injection.ts), held
// bytes first, read on the way whatever its size, with usage asked for at its end once the
// upstream is known to take the field. Before that is known, a body that found the budget spent
// may wait (its client's bytes left unread) for room, or for that to be known, at most
// HELD_BODY_WAIT_MS; then it is refused.
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { createBodyReader } from '../stream-tap/body-reader.ts';
import type { ScanResult } from '../stream-tap/request-body-scanner.ts';
import type { BodyHold } from './body-budget.ts';
import { createStreamedBody, type StreamedBody, type StreamedBodyOptions } from './streamed-injection.ts';

/** The longest a body that found no room waits for some (or for the upstream to be known to take injection). */
const HELD_BODY_WAIT_MS = 10_000;

/** Why a body is not held. */
export type UnheldWhy = 'too_large' | 'beyond_budget' | 'over_budget';

/** How a body that cannot be held goes on: streamed through (so), or waiting until `settled` is called. */
export type Unheld = StreamedBodyOptions | { readonly wait: (settled: () => void) => () => void };

export interface HeldBody {
  /** The whole body, and what the read of it found (`wide`: in UTF-16 or UTF-32, its positions not the body's). */
  held(body: Buffer, scan: ScanResult, wide: boolean): void;
  /**
   * Not held: past the cap (`too_large`), past what the budget or its client's part could ever
   * hold (`beyond_budget`), or the budget spent for now (`over_budget`: waiting may bring
   * room). How to go on.
   */
  unheld(why: UnheldWhy): Unheld;
  /**
   * Streamed: what was held, then the rest as the client sends it, read on the way (`scanned`,
   * once the client sent it all). `body.reserved()` bytes more than the client's.
   */
  streamed(stream: Readable, body: StreamedBody): void;
  /** After streamed: what the read of the whole body found. */
  scanned(scan: ScanResult): void;
  /** Waited HELD_BODY_WAIT_MS without room: the request is to be refused (its body left unread). */
  refused(): void;
  /** Bytes read from the client so far (the access log). */
  read(bytes: number): void;
}

export function holdBody(req: IncomingMessage, maxBytes: number, hold: BodyHold, handlers: HeldBody, waitMs = HELD_BODY_WAIT_MS): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let deadline: number | undefined;
  const reader = createBodyReader();
  const stop = (): void => {
    req.off('data', onData);
    req.off('end', onEnd);
  };
  const onData = (chunk: Buffer): void => {
    size += chunk.length;
    handlers.read(chunk.length);
    chunks.push(chunk);
    if (size > maxBytes) notHeld('too_large', 0);
    else {
      reader.feed(chunk);
      if (!hold.take(chunk.length)) notHeld(hold.fits(size) ? 'over_budget' : 'beyond_budget', chunk.length);
    }
  };
  const onEnd = (): void => {
    stop();
    const scan = reader.end();
    handlers.held(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size), scan, reader.encoding() !== 'utf-8');
  };
  /** `owed`: bytes read but not taken from the budget (the chunk that found no room). */
  const notHeld = (why: UnheldWhy, owed: number): void => {
    req.pause();
    const how = handlers.unheld(why);
    if ('wait' in how) {
      wait(how.wait, owed, () => notHeld(why, owed));
      return;
    }
    stop();
    const body = createStreamedBody(how);
    handlers.streamed(
      joinHeldAndRest(chunks, req, body, () => handlers.scanned(body.scan())),
      body,
    );
  };
  /** Paused until room for `owed` (the body goes on being held), `settled` (asked again), the wait's end (refused), or the client's leaving. */
  const wait = (until: (settled: () => void) => () => void, owed: number, settled: () => void): void => {
    // One bound for all of a body's waits: room that frees a little at a time (other bodies
    // refused) must not renew it, wait after wait.
    deadline ??= Date.now() + waitMs;
    let waiting = true;
    let timer: NodeJS.Timeout | undefined;
    const cancels: Array<() => void> = [];
    const done = (then: () => void): void => {
      if (!waiting) return;
      waiting = false;
      clearTimeout(timer);
      for (const cancel of cancels) cancel();
      req.off('close', onClose);
      then();
    };
    const onClose = (): void => done(stop);
    // Either may answer at once: then the wait is over before it began.
    const room = hold.wait(owed, () => done(() => req.resume()));
    if (!waiting) return;
    cancels.push(room);
    const known = until(() => done(settled));
    if (!waiting) return;
    cancels.push(known);
    timer = setTimeout(
      () =>
        done(() => {
          stop();
          handlers.refused();
        }),
      Math.max(0, deadline - Date.now()),
    );
    req.on('close', onClose);
  };
  req.on('data', onData);
  req.on('end', onEnd);
}

/**
 * Held chunks first, then whatever else the client sends, each through `body` (the read and the
 * insertion), then `ended`, with the client's back-pressure: the client is read as fast as the
 * upstream takes the bytes. A client that leaves before its body's end closes the stream without
 * an 'error' (nobody need listen for one, and none can take the process down) and without its
 * 'end', so whoever pipes it never ends the upstream request as if the body were whole: the
 * route aborts that request when the client's response closes, and the upstream request aborts
 * itself on the early close (upstream-request.ts).
 */
function joinHeldAndRest(held: readonly Buffer[], req: IncomingMessage, body: StreamedBody, ended: () => void): Readable {
  const push = (pieces: Buffer[]): boolean => {
    let more = true;
    for (const piece of pieces) more = stream.push(piece);
    return more;
  };
  const onData = (chunk: Buffer): void => {
    if (!push(body.chunk(chunk))) req.pause();
  };
  const onEnd = (): void => {
    stop();
    push(body.end());
    ended();
    stream.push(null);
  };
  const onClose = (): void => {
    stop();
    if (!req.complete) stream.destroy();
  };
  const stop = (): void => {
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('close', onClose);
  };
  const stream = new Readable({
    read: () => void req.resume(),
    destroy(error, callback) {
      stop();
      callback(error);
    },
  });
  for (const chunk of held) push(body.chunk(chunk));
  // The client's request stays paused (its flow was stopped on purpose) until the body is read.
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('close', onClose);
  // Left already (its close came before these listeners): nothing more will come.
  if (req.destroyed && !req.complete) stream.destroy();
  return stream;
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
