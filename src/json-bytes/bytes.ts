// JSON's bytes, as both byte readers (the response skimmer, measure/skim-event.ts, and the request
// body scanner, stream-tap/request-body-scanner.ts) read them: the structural bytes, white space,
// the bytes of a number or literal, a hex digit, what each backslash escape stands for, and keys
// compared in place as byte sequences. None of them decodes or allocates.

export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const LBRACE = 0x7b;
export const RBRACE = 0x7d;
export const LBRACKET = 0x5b;
export const RBRACKET = 0x5d;
export const COMMA = 0x2c;
export const COLON = 0x3a;

/** A key or other ASCII text as the bytes it is compared with. */
export const asciiBytes = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0));

// What `\x` stands for in a JSON string, by x (0: not an escape JSON has; `\u` apart).
export const ESCAPES = new Uint8Array(128);
for (const [c, v] of [
  ['"', 0x22],
  ['\\', 0x5c],
  ['/', 0x2f],
  ['b', 0x08],
  ['f', 0x0c],
  ['n', 0x0a],
  ['r', 0x0d],
  ['t', 0x09],
] as const)
  ESCAPES[c.charCodeAt(0)] = v;

export function isSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** The index of the first byte at or after `i` (before `end`) that is not white space; `end` if none. */
export function skipSpace(b: Uint8Array, i: number, end: number): number {
  while (i < end && isSpace(b[i])) i++;
  return i;
}

/** The last index at or before `from` (and at or after `start`) that is not white space; start - 1 if none. */
export function skipSpaceBack(b: Uint8Array, from: number, start: number): number {
  let i = from;
  while (i >= start && isSpace(b[i])) i--;
  return i;
}

export function isPrimitiveByte(c: number): boolean {
  // digits, sign, point, exponent and the letters of true/false/null, NaN and Infinity
  return (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a);
}

export function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x66 ? l - 0x61 + 10 : -1;
}

/**
 * Bytes of `b` from `at` are those of `t` (a key, a stream's template). A loop: for up to a few
 * hundred bytes it costs less than Buffer's compare, whose argument checks and native call come
 * before the compare.
 */
export function sameBytes(b: Uint8Array, at: number, t: Uint8Array): boolean {
  for (let i = 0; i < t.length; i++) if (b[at + i] !== t[i]) return false;
  return true;
}

/** Bytes [start, end) of `b` are the key `key`. */
export function keyIs(b: Uint8Array, start: number, end: number, key: Uint8Array): boolean {
  return end - start === key.length && sameBytes(b, start, key);
}

/** Bytes [start, end) of `b` are one of `keys`. */
export function keyIn(b: Uint8Array, start: number, end: number, keys: readonly Uint8Array[]): boolean {
  for (const key of keys) if (keyIs(b, start, end, key)) return true;
  return false;
}
