// Where a JSON string ends, for the request body scanner (request-body-scanner.ts), which crosses
// every string of a body this way: a prompt's text is most of a body.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Bytes of a string's text a loop searches before a byte search takes over. A byte search is a
 * native call, about 230 instructions, the loop about 15 a byte; of 16, 32 and 64, none was the
 * best for every kind of body (docs/performance.md, "Other benchmarks": bench:body-scan).
 */
const SEARCH_REACH = 64;
/** No closing quote in the chunk (closingQuote), which ends inside the string. */
const NO_QUOTE = -1;
/** No closing quote, and the chunk ends on a backslash that escapes the next chunk's first byte. */
export const ESCAPED_AT_END = -2;

/**
 * The index of the quote that closes a string whose text goes on at `from` (no escape pending
 * there), else NO_QUOTE or ESCAPED_AT_END. Each quote byte is found by a loop over the next
 * SEARCH_REACH bytes, then by a byte search (memchr for a Buffer): a short string (a key, a role)
 * or a run of escaped quotes (code, JSON inside a prompt) costs no native call per quote, and a
 * long stretch of text is crossed at memory speed (npm run bench:body-scan: a 31 KB prompt of
 * prose with few quotes about 55 times faster than a loop over every byte, one of code 2 times,
 * a body of short strings 1.7 times). The backslashes just before a quote say whether it is
 * escaped. A quote or backslash byte is never part of a multi-byte UTF-8 character.
 */
function closingQuote(chunk: Uint8Array, from: number): number {
  const n = chunk.length;
  for (let at = from; ; ) {
    let q = at;
    const reach = Math.min(n, at + SEARCH_REACH);
    while (q < reach && chunk[q] !== QUOTE) q++;
    if (q === reach) q = reach < n ? chunk.indexOf(QUOTE, reach) : -1;
    if (q === -1) return backslashesBefore(chunk, n, at) % 2 === 1 ? ESCAPED_AT_END : NO_QUOTE;
    if (backslashesBefore(chunk, q, at) % 2 === 0) return q;
    at = q + 1; // an escaped quote: what follows it is text again
  }
}

/**
 * The closing quote of a string whose text goes on at `from`, `escapedFirst` when a backslash
 * that ended the last chunk escapes the byte at `from`; else NO_QUOTE or ESCAPED_AT_END.
 */
export function stringEnd(chunk: Uint8Array, from: number, escapedFirst: boolean): number {
  const at = escapedFirst ? from + 1 : from;
  return at < chunk.length ? closingQuote(chunk, at) : NO_QUOTE;
}

/** How many backslashes come right before `end`, counting no further back than `from`. */
function backslashesBefore(chunk: Uint8Array, end: number, from: number): number {
  let j = end - 1;
  while (j >= from && chunk[j] === BACKSLASH) j--;
  return end - 1 - j;
}
