// JSON strings on bytes: where one ends (a piece at a time: a request body's strings are cut by
// its chunks), whether bytes are exactly one string, and a string's text with its escapes decoded.
// A quote or backslash byte is never part of a multi-byte UTF-8 character, so none of this decodes.

// Local, not imported from bytes.ts: an imported binding is loaded from its module at each use,
// and these loops compare every byte with them (the string end alone, over the 33 KB code prompt
// of npm run bench:body-scan: 1.27 times the old search's CPU imported, 1.13 local, 1.01 with
// the loops bounded by the buffer's length, below).
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Bytes of a string's text a loop searches before a byte search takes over. A byte search is a
 * native call, about 230 instructions, the loop about 15 a byte; of 16, 32 and 64, none was the
 * best for every kind of body (measured with npm run bench:body-scan).
 */
const SEARCH_REACH = 64;
/** No closing quote before the end, which is inside the string. */
const NO_QUOTE = -1;
/** No closing quote, and the bytes end on a backslash that escapes the next piece's first byte. */
export const ESCAPED_AT_END = -2;

/**
 * The closing quote of a string whose text goes on at `from`, looked for before `end`;
 * `escapedFirst` when a backslash that ended the last piece escapes the byte at `from`; else
 * NO_QUOTE or ESCAPED_AT_END. The fast path, a loop small enough to be inlined into its callers,
 * ends most strings (a key, a role, a token's text: no backslash before the quote in the first
 * SEARCH_REACH bytes): the response skimmer's full walk of a token chunk (node bench/skim.ts)
 * spent 1.35 times its own byte loop's CPU through closingQuote alone, 1.16 with this path
 * (1.15 with its own loop: the rest is the walk's, skim-readers.ts).
 */
export function stringEnd(b: Uint8Array, from: number, end: number, escapedFirst: boolean): number {
  const at = escapedFirst ? from + 1 : from;
  // Bounded by the bytes' length, not `end`, so that V8 drops the check of each index: a byte
  // read past `end` is one more of the same buffer, and a quote there is none.
  const reach = Math.min(b.length, at + SEARCH_REACH);
  let q = at;
  for (; q < reach; q++) {
    const c = b[q];
    if (c === QUOTE) return q < end ? q : NO_QUOTE;
    if (c === BACKSLASH) break;
  }
  // No backslash in [at, q): closingQuote may count the backslashes before a quote from q on.
  return q < end ? closingQuote(b, q, end) : NO_QUOTE;
}

/**
 * The index of the quote that closes a string whose text goes on at `from` (no escape pending
 * there) before `end`, else NO_QUOTE or ESCAPED_AT_END. Each quote byte is found by a loop over
 * the next SEARCH_REACH bytes, then by a byte search (memchr for a Buffer): a run of escaped
 * quotes (code, JSON inside a prompt) costs no native call per quote, and a long stretch of text
 * is crossed at memory speed (npm run bench:body-scan: a 31 KB prompt of prose with few quotes
 * about 55 times faster than a loop over every byte, one of code 2 times, a body of short strings
 * 1.7 times). The backslashes just before a quote say whether it is escaped.
 */
function closingQuote(b: Uint8Array, from: number, end: number): number {
  const n = b.length; // as in stringEnd: the loop's bound, `end` checked once a quote is found
  for (let at = from; ; ) {
    let q = at;
    const reach = Math.min(n, at + SEARCH_REACH);
    while (q < reach && b[q] !== QUOTE) q++;
    if (q === reach) q = reach < n ? b.indexOf(QUOTE, reach) : -1;
    if (q === -1 || q >= end) return backslashesBefore(b, end, at) % 2 === 1 ? ESCAPED_AT_END : NO_QUOTE;
    if (backslashesBefore(b, q, at) % 2 === 0) return q;
    at = q + 1; // an escaped quote: what follows it is text again
  }
}

/** How many backslashes come right before `end`, counting no further back than `from`. */
function backslashesBefore(b: Uint8Array, end: number, from: number): number {
  let j = end - 1;
  while (j >= from && b[j] === BACKSLASH) j--;
  return end - 1 - j;
}

/** Bytes [from, to) are exactly one JSON string: quotes at both ends, none unescaped between. */
export function isString(b: Uint8Array, from: number, to: number): boolean {
  return to - from >= 2 && b[from] === QUOTE && stringEnd(b, from + 1, to, false) === to - 1;
}

/** Bytes [from, to) hold a backslash (an escape that a reader which does not decode defers). */
export function hasBackslash(b: Uint8Array, from: number, to: number): boolean {
  for (let j = from; j < to; j++) if (b[j] === BACKSLASH) return true;
  return false;
}

/** A JSON string's raw body (between its quotes) as its text: escapes decoded; undefined when JSON refuses it. */
export function jsonStringText(bytes: Buffer): string | undefined {
  let plain = true;
  for (let j = 0; j < bytes.length; j++) {
    const c = bytes[j]!;
    if (c === BACKSLASH || c < 0x20) {
      plain = false;
      break;
    }
  }
  if (plain) return bytes.toString('utf8'); // no escape to decode, nothing JSON would refuse
  try {
    return JSON.parse(`"${bytes.toString('utf8')}"`) as string;
  } catch {
    return undefined;
  }
}
