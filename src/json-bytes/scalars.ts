// JSON's numbers and booleans as readers of bytes take them: a plain integer (a count) digit by
// digit, a number's text as JSON.parse reads it, and a request's `stream` as pydantic's lax bool.

/** Before a plain integer's first digit. */
export const NO_DIGIT = -2;
/** Not a plain integer: a sign, point, exponent, leading zero or letter, or past its cap. */
export const NOT_PLAIN = -1;

/**
 * A plain integer (digits only, no leading zero, at most `max`) after one more byte `c`, as it
 * was `value` (NO_DIGIT before the first): its value, or NOT_PLAIN from then on. Digit by digit,
 * so that a count cut by a request body's chunks keeps no text.
 */
export function addDigit(value: number, c: number, max: number): number {
  if (c < 0x30 || c > 0x39 || value === 0 || value === NOT_PLAIN) return NOT_PLAIN;
  const v = value === NO_DIGIT ? c - 0x30 : value * 10 + (c - 0x30);
  return v > max ? NOT_PLAIN : v;
}

/**
 * Bytes [from, to) as a plain integer of at most `max` (a safe integer), or NOT_PLAIN: addDigit's
 * rules in one loop, for bytes in one buffer (a usage chunk's full walk, node bench/skim.ts:
 * 0.94 times the CPU of a call of addDigit per digit).
 */
export function plainInteger(b: Uint8Array, from: number, to: number, max: number): number {
  if (from >= to || (b[from] === 0x30 && to - from > 1)) return NOT_PLAIN;
  let v = 0;
  for (let j = from; j < to; j++) {
    const c = b[j]!;
    if (c < 0x30 || c > 0x39) return NOT_PLAIN;
    v = v * 10 + (c - 0x30);
    if (v > max) return NOT_PLAIN;
  }
  return v;
}

/** A JSON number, as JSON.parse reads it. */
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** A number's text as JSON.parse reads it (a finite value); undefined for any other text. */
export function jsonNumber(text: string): number | undefined {
  if (!JSON_NUMBER.test(text)) return undefined;
  const v = Number(text);
  return Number.isFinite(v) ? v : undefined;
}

/** A longer `stream` value is no bool to pydantic either. */
export const MAX_STREAM_TEXT = 32;
const LAX_TRUE = new Set(['1', 'on', 't', 'true', 'y', 'yes']);
const LAX_FALSE = new Set(['0', 'off', 'f', 'false', 'n', 'no']);

/**
 * A `stream` value as pydantic's lax bool reads it (vLLM's and SGLang's request models), so that
 * no spelling streams for the engine and not for infermeter: the literals, a number equal to 0 or
 * 1, and the strings it names (any case); anything else is no bool (the engine refuses it).
 * `text` is a literal's text, or a string's raw JSON content.
 */
export function laxBool(text: string, isString: boolean): boolean | undefined {
  if (text.length > MAX_STREAM_TEXT) return undefined;
  if (!isString) {
    if (text === 'true') return true;
    if (text === 'false') return false;
    const v = jsonNumber(text);
    return v === 1 ? true : v === 0 ? false : undefined;
  }
  let s = text;
  if (s.includes('\\')) {
    try {
      s = JSON.parse(`"${s}"`) as string;
    } catch {
      return undefined;
    }
  }
  s = s.toLowerCase();
  return LAX_TRUE.has(s) ? true : LAX_FALSE.has(s) ? false : undefined;
}
