// The hot path's classifier: decides from the raw bytes of one `data:` payload whether a chat or
// completions chunk carries generated output, without decoding it to a string or building
// objects. It walks only the `delta` objects (or finds `"text":`) and answers undefined whenever
// the payload is anything but the common shape (usage reported, an error, the Responses API, an
// unexpected byte), so that the full classifier (JSON.parse) decides those: exact either way,
// fast for the events that make up almost every stream. It assumes what engines send: no key
// twice in one object (JSON.parse would keep the last; a member here counts wherever it is).

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

const needle = (s: string) => Buffer.from(s, 'latin1');
const CHOICES = needle('"choices":[');
const DELTA = needle('"delta":');
const TEXT = needle('"text":');
// Any of these sends the payload to the full classifier.
const SLOW = [needle('"usage":{'), needle('"error'), needle('"type":"response.'), needle('"type":"error"')];

// Keys of `delta` whose value is generated output: a non-empty string or array for these ...
const SEQUENCE_KEYS = new Set(['content', 'reasoning_content', 'reasoning', 'tool_calls', 'refusal']);
// ... a non-empty object for these (the same rules as openai-events.ts).
const OBJECT_KEYS = new Set(['audio', 'function_call']);

/** true: carries output; false: does not; undefined: not the common shape, use the full classifier. */
export function skimTokenEvent(p: Uint8Array): boolean | undefined {
  const b = Buffer.isBuffer(p) ? p : Buffer.from(p.buffer, p.byteOffset, p.length);
  // Only a payload shaped like a chunk is skimmed: an object that ends as one and has choices.
  // Anything else ('[DONE]', a truncated or foreign payload) goes to the full classifier.
  if (b[0] !== 0x7b || b[b.length - 1] !== 0x7d || b.indexOf(CHOICES) === -1) return undefined;
  for (const slow of SLOW) if (b.indexOf(slow) !== -1) return undefined;
  let at = b.indexOf(DELTA);
  if (at === -1) {
    // A completions chunk: choices[].text.
    at = b.indexOf(TEXT);
    if (at === -1) return false;
    let token = false;
    while (at !== -1) {
      const i = skipSpace(b, at + TEXT.length);
      if (b[i] === QUOTE) {
        if (b[i + 1] !== QUOTE) token = true;
      } else if (!startsWith(b, i, 'null')) return undefined;
      at = b.indexOf(TEXT, i + 1);
    }
    return token;
  }
  let token = false;
  while (at !== -1) {
    const r = skimDelta(b, skipSpace(b, at + DELTA.length));
    if (r === undefined) return undefined;
    if (r.token) token = true;
    at = b.indexOf(DELTA, r.end);
  }
  return token;
}

/** Walks one delta object from its '{'; reports whether a member carries output, and where it ends. */
function skimDelta(b: Buffer, i: number): { token: boolean; end: number } | undefined {
  if (b[i] === 0x6e && startsWith(b, i, 'null')) return { token: false, end: i + 4 };
  if (b[i] !== 0x7b) return undefined;
  i = skipSpace(b, i + 1);
  let token = false;
  if (b[i] === 0x7d) return { token, end: i + 1 };
  for (;;) {
    if (b[i] !== QUOTE) return undefined;
    const keyEnd = b.indexOf(QUOTE, i + 1);
    if (keyEnd === -1) return undefined;
    // Keys of interest have no escapes: a key with a backslash is simply not one of them.
    const key = b.toString('latin1', i + 1, keyEnd);
    i = skipSpace(b, keyEnd + 1);
    if (b[i] !== 0x3a) return undefined;
    i = skipSpace(b, i + 1);
    const sequence = SEQUENCE_KEYS.has(key);
    const object = OBJECT_KEYS.has(key);
    const c = b[i];
    if (c === QUOTE) {
      const end = stringEnd(b, i);
      if (end === -1) return undefined;
      if (sequence && end > i + 2) token = true; // a non-empty string
      i = end;
    } else if (c === 0x5b || c === 0x7b) {
      const inner = skipSpace(b, i + 1);
      const empty = b[inner] === (c === 0x5b ? 0x5d : 0x7d);
      // A non-empty array (tool calls, content parts) or a non-empty object (audio).
      if (!empty && (c === 0x5b ? sequence : object)) token = true;
      const end = containerEnd(b, i);
      if (end === -1) return undefined;
      i = end;
    } else {
      // null, true, false, a number
      while (i < b.length && b[i] !== 0x2c && b[i] !== 0x7d && b[i] !== 0x20) i++;
    }
    i = skipSpace(b, i);
    if (b[i] === 0x2c) {
      i = skipSpace(b, i + 1);
      continue;
    }
    if (b[i] === 0x7d) return { token, end: i + 1 };
    return undefined;
  }
}

/** Index just past the string that opens at i, or -1. */
function stringEnd(b: Buffer, i: number): number {
  for (let j = i + 1; j < b.length; j++) {
    const c = b[j];
    if (c === BACKSLASH) j++;
    else if (c === QUOTE) return j + 1;
  }
  return -1;
}

/** Index just past the object or array that opens at i, or -1. */
function containerEnd(b: Buffer, i: number): number {
  let depth = 0;
  for (let j = i; j < b.length; j++) {
    const c = b[j];
    if (c === QUOTE) {
      j = stringEnd(b, j) - 1;
      if (j < 0) return -1;
    } else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      if (--depth === 0) return j + 1;
    }
  }
  return -1;
}

function skipSpace(b: Buffer, i: number): number {
  while (i < b.length) {
    const c = b[i];
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}

function startsWith(b: Buffer, i: number, s: string): boolean {
  for (let k = 0; k < s.length; k++) if (b[i + k] !== s.charCodeAt(k)) return false;
  return true;
}
