// The hot path's classifier: decides from the raw bytes of one `data:` payload whether a chat or
// completions chunk carries generated output, in one pass over the bytes, without decoding them
// or building objects. It walks the top-level object: `choices[].delta` members and
// `choices[].text` decide; anything that needs more than that (a usage object, an error, the
// Responses API's `type`, an unexpected byte) makes it answer undefined, and the full
// classifier (JSON.parse) decides instead: exact either way, fast for the events that make up
// almost every stream. It assumes what engines send: no key twice in one object (JSON.parse would
// keep the last; a member here counts wherever it is).

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

// Keys compared in place, as byte sequences.
const k = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0));
const CHOICES = k('choices');
const DELTA = k('delta');
const TEXT = k('text');
const USAGE = k('usage');
const ERROR = k('error');
const OBJECT = k('object');
const TYPE = k('type');
// `delta` members whose value is output when it is a non-empty string or array ...
const SEQUENCE_KEYS = [k('content'), k('reasoning_content'), k('reasoning'), k('tool_calls'), k('refusal')];
// ... and those whose value is output when it is a non-empty object (as in openai-events.ts).
const OBJECT_KEYS = [k('audio'), k('function_call')];

/** Thrown inside the walk to defer to the full classifier; never escapes skimTokenEvent. */
const DEFER = -1;

/**
 * Classifies bytes [start, end) of `b`: true, the chunk carries output; false, it does not;
 * undefined, not the common shape: use the full classifier.
 */
export function skimTokenEvent(b: Uint8Array, start = 0, end = b.length): boolean | undefined {
  const w = walker;
  w.b = b;
  w.end = end;
  w.token = false;
  let i = w.space(start);
  if (b[i] !== LBRACE) return undefined;
  i = w.space(i + 1);
  let token = false;
  let sawChoices = false;
  if (b[i] === RBRACE) return undefined;
  for (;;) {
    if (b[i] !== QUOTE) return undefined;
    const keyStart = i + 1;
    const keyEnd = w.stringEnd(i);
    if (keyEnd === DEFER) return undefined;
    i = w.space(keyEnd);
    if (b[i] !== COLON) return undefined;
    i = w.space(i + 1);
    const c = b[i];
    if (w.keyIs(keyStart, keyEnd - 1, CHOICES)) {
      if (c !== LBRACKET) return undefined;
      sawChoices = true;
      const r = w.choices(i);
      if (r === DEFER) return undefined;
      if (w.token) token = true;
      i = r;
    } else if (w.keyIs(keyStart, keyEnd - 1, USAGE) || w.keyIs(keyStart, keyEnd - 1, ERROR)) {
      if (c !== 0x6e) return undefined; // anything but null: usage to read, or an error
      i = w.skipValue(i);
    } else if (w.keyIs(keyStart, keyEnd - 1, TYPE)) {
      return undefined; // the Responses API, or an error event
    } else if (w.keyIs(keyStart, keyEnd - 1, OBJECT)) {
      if (c === QUOTE && b[i + 1] === 0x65 /* "e... : "error" */) return undefined;
      i = w.skipValue(i);
    } else {
      i = w.skipValue(i);
    }
    if (i === DEFER) return undefined;
    i = w.space(i);
    if (b[i] === COMMA) {
      i = w.space(i + 1);
      continue;
    }
    if (b[i] !== RBRACE || w.space(i + 1) !== end) return undefined;
    return sawChoices ? token : undefined;
  }
}

// One walker, reused: the hot path allocates nothing per event.
class Walker {
  b: Uint8Array = new Uint8Array(0);
  end = 0;
  token = false;

  space(i: number): number {
    const b = this.b;
    while (i < this.end) {
      const c = b[i];
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      i++;
    }
    return i;
  }

  /** Index just past the string that opens at i, or DEFER. */
  stringEnd(i: number): number {
    const b = this.b;
    for (let j = i + 1; j < this.end; j++) {
      const c = b[j];
      if (c === BACKSLASH) j++;
      else if (c === QUOTE) return j + 1;
    }
    return DEFER;
  }

  keyIs(start: number, end: number, key: Uint8Array): boolean {
    if (end - start !== key.length) return false;
    const b = this.b;
    for (let i = 0; i < key.length; i++) if (b[start + i] !== key[i]) return false;
    return true;
  }

  keyIn(start: number, end: number, keys: readonly Uint8Array[]): boolean {
    for (const key of keys) if (this.keyIs(start, end, key)) return true;
    return false;
  }

  /** Index just past the value that starts at i, or DEFER. */
  skipValue(i: number): number {
    const b = this.b;
    const c = b[i];
    if (c === QUOTE) return this.stringEnd(i);
    if (c === LBRACE || c === LBRACKET) {
      let depth = 0;
      for (let j = i; j < this.end; j++) {
        const d = b[j];
        if (d === QUOTE) {
          j = this.stringEnd(j);
          if (j === DEFER) return DEFER;
          j--;
        } else if (d === LBRACE || d === LBRACKET) depth++;
        else if (d === RBRACE || d === RBRACKET) {
          if (--depth === 0) return j + 1;
        }
      }
      return DEFER;
    }
    // null, true, false, a number
    let j = i;
    while (j < this.end) {
      const d = b[j];
      if (d === COMMA || d === RBRACE || d === RBRACKET || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) break;
      j++;
    }
    return j === i ? DEFER : j;
  }

  /** Walks the choices array at i; sets this.token; returns the index past it. */
  choices(i: number): number {
    const b = this.b;
    i = this.space(i + 1);
    if (b[i] === RBRACKET) return i + 1;
    for (;;) {
      if (b[i] === LBRACE) {
        i = this.choice(i);
        if (i === DEFER) return DEFER;
      } else {
        i = this.skipValue(i);
        if (i === DEFER) return DEFER;
      }
      i = this.space(i);
      if (b[i] === COMMA) {
        i = this.space(i + 1);
        continue;
      }
      return b[i] === RBRACKET ? i + 1 : DEFER;
    }
  }

  /** One choice object: `delta` members and `text` decide. */
  choice(i: number): number {
    const b = this.b;
    i = this.space(i + 1);
    if (b[i] === RBRACE) return i + 1;
    for (;;) {
      if (b[i] !== QUOTE) return DEFER;
      const keyStart = i + 1;
      const keyEnd = this.stringEnd(i);
      if (keyEnd === DEFER) return DEFER;
      i = this.space(keyEnd);
      if (b[i] !== COLON) return DEFER;
      i = this.space(i + 1);
      if (this.keyIs(keyStart, keyEnd - 1, DELTA) && b[i] === LBRACE) {
        i = this.delta(i);
      } else if (this.keyIs(keyStart, keyEnd - 1, TEXT) && b[i] === QUOTE) {
        const end = this.stringEnd(i);
        if (end !== DEFER && end > i + 2) this.token = true;
        i = end;
      } else {
        i = this.skipValue(i);
      }
      if (i === DEFER) return DEFER;
      i = this.space(i);
      if (b[i] === COMMA) {
        i = this.space(i + 1);
        continue;
      }
      return b[i] === RBRACE ? i + 1 : DEFER;
    }
  }

  /** One delta object. */
  delta(i: number): number {
    const b = this.b;
    i = this.space(i + 1);
    if (b[i] === RBRACE) return i + 1;
    for (;;) {
      if (b[i] !== QUOTE) return DEFER;
      const keyStart = i + 1;
      const keyEnd = this.stringEnd(i);
      if (keyEnd === DEFER) return DEFER;
      i = this.space(keyEnd);
      if (b[i] !== COLON) return DEFER;
      i = this.space(i + 1);
      const c = b[i];
      const end = this.skipValue(i);
      if (end === DEFER) return DEFER;
      if (c === QUOTE || c === LBRACKET) {
        // A non-empty string or array under a sequence key.
        if (end > i + 2 && this.space(i + 1) < end - 1 && this.keyIn(keyStart, keyEnd - 1, SEQUENCE_KEYS)) this.token = true;
      } else if (c === LBRACE) {
        if (this.space(i + 1) < end - 1 && this.keyIn(keyStart, keyEnd - 1, OBJECT_KEYS)) this.token = true;
      }
      i = this.space(end);
      if (b[i] === COMMA) {
        i = this.space(i + 1);
        continue;
      }
      return b[i] === RBRACE ? i + 1 : DEFER;
    }
  }
}

const walker = new Walker();
