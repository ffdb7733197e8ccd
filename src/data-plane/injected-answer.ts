// The answer to a request whose body had usage injected (usage-injection.ts). An error status
// in the 4xx range may be the upstream refusing the injected field: such an answer is held,
// read, and either found a refusal (the client's own body is sent again, once, and the client
// never sees the refusal; injection stops only if that re-send succeeds and the refusal is one
// only the engine can have written, so that only the field's own refusal turns it off, never
// a client's text echoed back) or passed on to the client as it came. Any other answer
// goes to the client at once (an event stream with the injected usage-only chunk removed).
// What is held is taken from the process's budget for answers (INFERMETER_MAX_HELD_ANSWER_BYTES):
// an answer that finds it spent is passed on unread (`unheld`).
import type { UpstreamResponse } from './upstream-response.ts';
import type { AnswerBudget } from '../stream-tap/tap-contract.ts';
import { rejectsStreamOptions, trustedRefusal } from './usage-injection.ts';

/** Largest error body read for a refusal; a larger one is passed on without being read. */
export const MAX_REFUSAL_BYTES = 64 * 1024;

/** Whether an answer to an injected request is held to read whether it is a refusal. */
export function mayBeRefusal(status: number): boolean {
  return status >= 400 && status < 500;
}

export interface HeldAnswer {
  /**
   * The upstream refused the injected field: the request is to be sent again without it.
   * `trusted`: the refusal cannot be an echo of the client's text (usage-injection.ts's
   * trustedRefusal): only then may the re-send's success turn injection off.
   */
  refused(trusted: boolean): void;
  /**
   * Not a refusal: the answer goes to the client as it came, `held` first. `complete`: `held`
   * is the whole body; otherwise (too large to be a refusal) the rest follows on the response,
   * which is paused for the caller to pipe on.
   */
  passOn(held: readonly Buffer[], size: number, complete: boolean): void;
}

/**
 * Holds the body of an injected request's `status` answer and says what it is; `original` is
 * the client's own body (an error naming a field it wrote is about the client's request).
 */
export function holdAnswer(
  response: UpstreamResponse,
  status: number,
  original: Buffer,
  handlers: HeldAnswer,
  budget?: AnswerBudget,
  unheld?: () => void,
): void {
  const chunks: Buffer[] = [];
  const hold = budget?.hold();
  let size = 0;
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk);
    size += chunk.length;
    const room = hold === undefined || hold.take(chunk.length);
    if (size <= MAX_REFUSAL_BYTES && room) return;
    if (!room) unheld?.();
    response.off('data', onData);
    response.off('end', onEnd);
    response.off('close', onClose);
    response.pause();
    hold?.release();
    handlers.passOn(chunks, size, false);
  };
  const onClose = (): void => hold?.release();
  const onEnd = (): void => {
    response.off('close', onClose);
    hold?.release();
    const body = Buffer.concat(chunks, size);
    const text = body.toString('utf8');
    if (rejectsStreamOptions(status, text, original)) handlers.refused(trustedRefusal(status, text, original));
    else handlers.passOn([body], size, true);
  };
  response.on('data', onData);
  response.on('end', onEnd);
  response.on('close', onClose);
}
