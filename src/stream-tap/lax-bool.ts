// A request's `stream` value read as the engines read it: pydantic's lax bool (vLLM's and
// SGLang's request models), so that no spelling streams for the engine and not for infermeter.

/** A longer `stream` value is no bool to pydantic either. */
export const MAX_STREAM_TEXT = 32;
const LAX_TRUE = new Set(['1', 'on', 't', 'true', 'y', 'yes']);
const LAX_FALSE = new Set(['0', 'off', 'f', 'false', 'n', 'no']);
const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * A `stream` value as pydantic's lax bool reads it (vLLM's and SGLang's request models): the
 * literals, a number equal to 0 or 1, and the strings it names (any case); anything else is no
 * bool (the engine refuses it). `text` is a literal's text, or a string's raw JSON content.
 */
export function laxBool(text: string, isString: boolean): boolean | undefined {
  if (text.length > MAX_STREAM_TEXT) return undefined;
  if (!isString) {
    if (text === 'true') return true;
    if (text === 'false') return false;
    if (!NUMBER.test(text)) return undefined;
    const v = Number(text);
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
