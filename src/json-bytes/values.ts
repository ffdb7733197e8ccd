// Crossing a JSON value on bytes without reading it: a nested object or array by its brackets,
// a piece at a time (a request body's values are cut by its chunks), each string in it by a
// search for its end (strings.ts), and a whole value in one buffer, whatever its kind.
import { isPrimitiveByte } from './bytes.ts';
import { ESCAPED_AT_END, stringEnd } from './strings.ts';

// JSON's bytes as local constants: an imported binding is loaded from its module at each use (bytes.ts).
const LBRACE = 0x7b;
const LBRACKET = 0x5b;
const QUOTE = 0x22;
const RBRACE = 0x7d;
const RBRACKET = 0x5d;

/** The value does not end before the end of the bytes. */
const NOT_CLOSED = -1;

/**
 * An object or array crossed by its brackets, in one piece or many: its depth and whether a
 * string of it goes on in the next piece are all it keeps. Its loop keeps them in locals and
 * writes them back once per piece: a field written per string cost the request scanner's loop a
 * third of its speed.
 */
export class NestedValue {
  private depth = 0;
  private inString = false;
  /** In a string, the last piece ended on a backslash that escapes the next piece's first byte. */
  private escaped = false;

  /** A value opened: its bracket was read, cross() goes on from the byte after it. */
  open(): void {
    this.depth = 1;
    this.inString = false;
  }

  /** Bytes [i, end) of the value: the index past its closing bracket, or NOT_CLOSED (it goes on). */
  cross(b: Uint8Array, i: number, end: number): number {
    if (this.inString) {
      const q = stringEnd(b, i, end, this.escaped);
      if (q < 0) {
        this.escaped = q === ESCAPED_AT_END;
        return NOT_CLOSED;
      }
      i = q + 1;
      this.inString = false;
    }
    let depth = this.depth;
    for (; i < end; i++) {
      const c = b[i];
      if (c === QUOTE) {
        const q = stringEnd(b, i + 1, end, false);
        if (q < 0) {
          this.escaped = q === ESCAPED_AT_END;
          this.inString = true;
          break;
        }
        i = q;
      } else if (c === LBRACE || c === LBRACKET) depth++;
      else if (c === RBRACE || c === RBRACKET) {
        if (--depth === 0) {
          this.depth = 0;
          return i + 1;
        }
      }
    }
    this.depth = depth;
    return NOT_CLOSED;
  }
}

// isPrimitiveByte as a table: one load a byte, not up to eight compares (the response skimmer's
// full walk of a token chunk, node bench/skim.ts: 0.93 times the CPU of the compares).
const PRIMITIVE = new Uint8Array(256);
for (let c = 0; c < 256; c++) if (isPrimitiveByte(c)) PRIMITIVE[c] = 1;

/** The index past a number or literal that begins at i (i itself when none does). */
export function primitiveEnd(b: Uint8Array, i: number, end: number): number {
  while (i < end && PRIMITIVE[b[i]!] === 1) i++;
  return i;
}

const whole = new NestedValue();

/** The index just past the value that starts at i and ends before `end`, or NOT_CLOSED. */
export function skipValue(b: Uint8Array, i: number, end: number): number {
  const c = b[i];
  if (c === QUOTE) {
    const q = stringEnd(b, i + 1, end, false);
    return q < 0 ? NOT_CLOSED : q + 1;
  }
  if (c === LBRACE || c === LBRACKET) {
    whole.open();
    return whole.cross(b, i + 1, end);
  }
  const j = primitiveEnd(b, i, end);
  return j === i ? NOT_CLOSED : j;
}
