// Whether bytes are one JSON object exactly as JSON.parse takes it, and where the values of a
// few of its top-level keys begin: the usage strip's question about each candidate usage chunk,
// answered without building the object (JSON.parse of that chunk was the largest of infermeter's
// own costs in a one-token round trip: 5 of about 240 µs of CPU, bench/profile.ts's perf view).
// It follows JSON's grammar (RFC 8259) as JSON.parse does: strings without raw control bytes and
// with only JSON's escapes, numbers in JSON's form, the three literals, JSON's four white-space
// bytes; a byte of a multi-byte UTF-8 character is never one of these, so nothing is decoded.
// A top-level key written with an escape, or nesting deeper than MAX_DEPTH, is not read here:
// the caller asks JSON.parse (UNREADABLE).
import { hexValue } from './bytes.ts';

/** Not one JSON object: JSON.parse would throw. */
export const NOT_JSON = -1;
/** Valid or not, not decided here: a top-level key has an escape, or the nesting is too deep. */
export const UNREADABLE = -2;
/** The bytes are one JSON object. */
export const OBJECT = 0;

const MAX_DEPTH = 64;
const IN_OBJECT = 1;
const IN_ARRAY = 2;
const stack = new Uint8Array(MAX_DEPTH);

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;
const MINUS = 0x2d;
const ZERO = 0x30;
const DOT = 0x2e;

// JSON's escapes after a backslash, `u` among them (its four hex digits checked apart).
const ESCAPE = new Uint8Array(128);
for (const c of '"\\/bfnrtu') ESCAPE[c.charCodeAt(0)] = 1;
const TRUE = [0x74, 0x72, 0x75, 0x65];
const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65];
const NULL = [0x6e, 0x75, 0x6c, 0x6c];

/** Set by stringEnd: the string it crossed has a backslash. */
let escaped = false;

const isSpace = (c: number | undefined): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

function space(b: Uint8Array, i: number, end: number): number {
  while (i < end && isSpace(b[i])) i++;
  return i;
}

const isDigit = (c: number | undefined): boolean => c !== undefined && c >= ZERO && c <= 0x39;

/** The index past the string whose text starts at i (after its opening quote), or NOT_JSON. */
function stringEnd(b: Uint8Array, i: number, end: number): number {
  escaped = false;
  while (i < end) {
    const c = b[i]!;
    if (c === QUOTE) return i + 1;
    if (c < 0x20) return NOT_JSON;
    if (c === BACKSLASH) {
      escaped = true;
      const e = b[i + 1];
      if (i + 1 >= end || e === undefined || e >= 128 || ESCAPE[e] === 0) return NOT_JSON;
      if (e === 0x75) {
        if (i + 5 >= end) return NOT_JSON;
        for (let h = i + 2; h < i + 6; h++) if (hexValue(b[h]!) < 0) return NOT_JSON;
        i += 6;
      } else i += 2;
    } else i++;
  }
  return NOT_JSON;
}

function numberEnd(b: Uint8Array, i: number, end: number): number {
  if (b[i] === MINUS) i++;
  if (i >= end || !isDigit(b[i])) return NOT_JSON;
  if (b[i] === ZERO) i++;
  else while (i < end && isDigit(b[i])) i++;
  if (i < end && b[i] === DOT) {
    if (++i >= end || !isDigit(b[i])) return NOT_JSON;
    while (i < end && isDigit(b[i])) i++;
  }
  if (i < end && (b[i] === 0x65 || b[i] === 0x45)) {
    i++;
    if (i < end && (b[i] === 0x2b || b[i] === MINUS)) i++;
    if (i >= end || !isDigit(b[i])) return NOT_JSON;
    while (i < end && isDigit(b[i])) i++;
  }
  return i;
}

function literalEnd(b: Uint8Array, i: number, end: number, word: readonly number[]): number {
  if (i + word.length > end) return NOT_JSON;
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word[k]) return NOT_JSON;
  return i + word.length;
}

/** The index past the JSON value that starts at i (white space before it skipped), NOT_JSON or UNREADABLE. */
function valueEnd(b: Uint8Array, i: number, end: number): number {
  let depth = 0;
  for (;;) {
    // A value is expected at i.
    i = space(b, i, end);
    if (i >= end) return NOT_JSON;
    const c = b[i]!;
    if (c === LBRACE || c === LBRACKET) {
      const j = space(b, i + 1, end);
      if (b[j] === (c === LBRACE ? RBRACE : RBRACKET) && j < end) i = j + 1;
      else {
        if (depth === MAX_DEPTH) return UNREADABLE;
        stack[depth++] = c === LBRACE ? IN_OBJECT : IN_ARRAY;
        i = c === LBRACE ? keyEnd(b, j, end) : j;
        if (i < 0) return i;
        continue;
      }
    } else if (c === QUOTE) i = stringEnd(b, i + 1, end);
    else if (c === MINUS || isDigit(c)) i = numberEnd(b, i, end);
    else i = literalEnd(b, i, end, c === 0x74 ? TRUE : c === 0x66 ? FALSE : NULL);
    if (i < 0) return i;
    // After a value: the next member or element, or the end of containers.
    for (;;) {
      if (depth === 0) return i;
      i = space(b, i, end);
      if (i >= end) return NOT_JSON;
      const d = b[i]!;
      const inObject = stack[depth - 1] === IN_OBJECT;
      if (d === COMMA) {
        i = inObject ? keyEnd(b, space(b, i + 1, end), end) : i + 1;
        if (i < 0) return i;
        break;
      }
      if (d !== (inObject ? RBRACE : RBRACKET)) return NOT_JSON;
      depth--;
      i++;
    }
  }
}

/** A member's key at i and its colon: the index after the colon, or NOT_JSON. */
function keyEnd(b: Uint8Array, i: number, end: number): number {
  if (i >= end || b[i] !== QUOTE) return NOT_JSON;
  i = stringEnd(b, i + 1, end);
  if (i < 0) return i;
  i = space(b, i, end);
  return i < end && b[i] === COLON ? i + 1 : NOT_JSON;
}

/**
 * Whether bytes [i, end) are one JSON object, white space around it allowed: OBJECT, NOT_JSON or
 * UNREADABLE. For each of `keys` (its name's bytes, without quotes), `starts` gets where the value
 * of its last member begins (JSON.parse keeps the last of a repeated key), or -1.
 */
export function objectMembers(b: Uint8Array, i: number, end: number, keys: readonly Uint8Array[], starts: Int32Array): number {
  for (let k = 0; k < starts.length; k++) starts[k] = -1;
  i = space(b, i, end);
  if (i >= end || b[i] !== LBRACE) return NOT_JSON;
  i = space(b, i + 1, end);
  if (i < end && b[i] === RBRACE) return space(b, i + 1, end) === end ? OBJECT : NOT_JSON;
  for (;;) {
    if (i >= end || b[i] !== QUOTE) return NOT_JSON;
    const keyStart = i + 1;
    i = stringEnd(b, keyStart, end);
    if (i < 0) return i;
    if (escaped) return UNREADABLE;
    const keyLength = i - 1 - keyStart;
    i = space(b, i, end);
    if (i >= end || b[i] !== COLON) return NOT_JSON;
    const value = space(b, i + 1, end);
    for (let k = 0; k < keys.length; k++) if (sameKey(b, keyStart, keyLength, keys[k]!)) starts[k] = value;
    i = valueEnd(b, value, end);
    if (i < 0) return i;
    i = space(b, i, end);
    if (i >= end) return NOT_JSON;
    if (b[i] === RBRACE) return space(b, i + 1, end) === end ? OBJECT : NOT_JSON;
    if (b[i] !== COMMA) return NOT_JSON;
    i = space(b, i + 1, end);
  }
}

function sameKey(b: Uint8Array, at: number, length: number, key: Uint8Array): boolean {
  if (length !== key.length) return false;
  for (let k = 0; k < length; k++) if (b[at + k] !== key[k]) return false;
  return true;
}
