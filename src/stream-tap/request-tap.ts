// Watches an inference request's body on its way to the upstream (the data plane pipes it;
// this only listens) and reports `model`, `stream` and the generation parameters once the body
// has been seen, or why it could not be read. The body is never held, and read whole whatever
// its size (body-reader.ts: a few integers of state, UTF-16 and UTF-32 decoded on the way), so
// no padding buys an unread body. Content-Encoding does not stop the read: the engines read the
// bytes as JSON whatever the header says; bytes that are not JSON with a coding named are `encoded`.
import type { IncomingMessage } from 'node:http';
import { createBodyReader } from './body-reader.ts';

/** Why a body gave no labels; label values of infermeter_request_body_uninspected_total. */
export type UninspectedReason = 'empty' | 'invalid_json' | 'not_object' | 'encoded';
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
export function tapRequestBody(req: IncomingMessage, done: (result: RequestInspection, bytes: number) => void): void {
  const coded = namesCoding(req);
  const reader = createBodyReader();
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    reader.feed(chunk);
  });
  req.on('end', () => done(withCoding(reader.end(), coded), size));
}

/** Whether the request's Content-Encoding names a coding (not identity). */
export function namesCoding(req: IncomingMessage): boolean {
  const coding = req.headers['content-encoding']?.trim().toLowerCase();
  return coding !== undefined && coding !== '' && coding !== 'identity';
}

/** A body that is not JSON, sent with a coding named, was encoded (compressed, most likely): so it is counted. */
export function withCoding<T extends RequestInspection>(scan: T, coded: boolean): T | { ok: false; reason: 'encoded' } {
  if (scan.ok || !coded || scan.reason === 'empty') return scan;
  return { ok: false, reason: 'encoded' };
}
