// Watches an inference request's body on its way to the upstream (the data plane pipes it;
// this only listens) and reports `model`, `stream` and the generation parameters once the body has been seen, or why it
// could not be read. The body is never held: the scanner keeps a few integers of state.
import type { IncomingMessage } from 'node:http';
import { createBodyScanner } from './request-body-scanner.ts';

/** Why a body gave no labels; label values of infermeter_request_body_uninspected_total. */
export type UninspectedReason = 'empty' | 'invalid_json' | 'not_object' | 'too_large' | 'encoded';

export type RequestInspection =
  | {
      readonly ok: true;
      readonly model: string | undefined;
      readonly stream: boolean | undefined;
      /** The requested generation limit and number of choices (request-body-scanner.ts). */
      readonly maxTokens?: number | undefined;
      readonly n?: number | undefined;
    }
  | { readonly ok: false; readonly reason: UninspectedReason };

/** Attach before the body starts flowing; `done` is called at most once, with the bytes seen. */
export function tapRequestBody(req: IncomingMessage, maxBytes: number, done: (result: RequestInspection, bytes: number) => void): void {
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    done({ ok: false, reason: 'encoded' }, 0);
    return;
  }
  const scanner = createBodyScanner();
  let size = 0;
  let over = false;
  const onData = (chunk: Buffer): void => {
    size += chunk.length;
    if (size > maxBytes) {
      over = true;
      req.off('data', onData);
      done({ ok: false, reason: 'too_large' }, size);
      return;
    }
    scanner.feed(chunk);
  };
  req.on('data', onData);
  req.on('end', () => {
    if (!over) done(scanner.end(), size);
  });
}
