// The hot path's classifier: decides from the raw bytes of one `data:` payload whether a chat or
// completions chunk carries generated output, in one pass over the bytes, without decoding them
// or building objects. It walks the top-level object: `choices[].delta` members and
// `choices[].text` decide; a plain `finish_reason`, a `usage` object of plain integers and the
// `model` are read on the way (the last chunks of a stream), and so are llama.cpp's `timings`.
// Anything else (an error, the Responses API's `type`, an escape or a number form it does not
// read, an unexpected byte) makes
// it answer undefined, and the full classifier (JSON.parse) decides instead: exact either way,
// and no JSON.parse for the events of a common stream. It assumes what engines send: no key twice
// in one object (JSON.parse would keep the last; a member here counts wherever it is).
// Over 300 lines (past 400, the one file allowed): the hot path's one byte walker, its steps sharing one cursor and state per event.
import { REASONING, type EventFacts } from './event-facts.ts';

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
const TIMINGS = k('timings');
const FINISH_REASON = k('finish_reason');
const MODEL = k('model');
const PROMPT_TOKENS = k('prompt_tokens');
const INPUT_TOKENS = k('input_tokens');
const COMPLETION_TOKENS = k('completion_tokens');
const OUTPUT_TOKENS = k('output_tokens');
// Anthropic's cache counts (readUsage keeps them apart): left to the full classifier.
const CACHE_KEYS = [k('cache_read_input_tokens'), k('cache_creation_input_tokens')];
// The usage's details (usage.ts): a prompt cache's hits, the reasoning tokens.
const PROMPT_CACHE_HIT_TOKENS = k('prompt_cache_hit_tokens');
const PROMPT_DETAILS = [k('prompt_tokens_details'), k('input_tokens_details')];
const COMPLETION_DETAILS = [k('completion_tokens_details'), k('output_tokens_details')];
const CACHED_TOKENS = k('cached_tokens');
const REASONING_TOKENS = k('reasoning_tokens');
const PROMPT_N = k('prompt_n');
const PROMPT_MS = k('prompt_ms');
const PREDICTED_N = k('predicted_n');
const PREDICTED_MS = k('predicted_ms');
const CACHE_N = k('cache_n');
/** A JSON number, as JSON.parse reads it. */
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
/** As readFinishReason (openai-events.ts) cuts it. */
const MAX_FINISH_REASON = 64;
// `delta` members whose value is output when it is a non-empty string or array ...
const SEQUENCE_KEYS = [k('content'), k('reasoning_content'), k('reasoning'), k('tool_calls'), k('refusal')];
// ... of which these are reasoning, not visible output (every other output key is visible).
const REASONING_KEYS = [k('reasoning_content'), k('reasoning')];
// ... and those whose value is output when it is a non-empty object (as in openai-events.ts).
const OBJECT_KEYS = [k('audio'), k('function_call')];

/** Returned by the walk's steps in place of an index: defer to the full classifier (never escapes skimTokenEvent). */
const DEFER = -1;

/**
 * Classifies bytes [start, end) of `b`: true, the chunk carries output; false, it does not; the
 * facts, when it also reports a finish reason or usage (as classifyEvent would give them);
 * undefined, not a shape read here: use the full classifier.
 */
export function skimTokenEvent(b: Uint8Array, start = 0, end = b.length): boolean | EventFacts | undefined {
  const token = walk(b, start, end);
  return token === undefined ? undefined : walker.facts(token);
}

function walk(b: Uint8Array, start: number, end: number): boolean | undefined {
  const w = walker;
  w.b = b;
  w.end = end;
  w.token = false;
  w.visible = false;
  w.choiceCount = 0;
  w.members = 0;
  w.valueStart = -1;
  w.finishStart = -1;
  w.modelStart = -1;
  w.usage = false;
  w.promptTokens = -1;
  w.inputTokens = -1;
  w.completionTokens = -1;
  w.outputTokens = -1;
  w.cachedTokens = -1;
  w.cacheHitTokens = -1;
  w.reasoningTokens = -1;
  w.promptN = -1;
  w.promptMs = -1;
  w.predictedN = -1;
  w.predictedMs = -1;
  w.cacheN = -1;
  let i = w.space(start);
  if (b[i] !== LBRACE) return undefined;
  i = w.space(i + 1);
  let token = false;
  let sawChoices = false;
  if (b[i] === RBRACE) return undefined;
  for (;;) {
    i = w.key(i);
    if (i === DEFER) return undefined;
    const keyStart = w.keyStart;
    const keyEnd = w.keyEnd;
    const c = b[i];
    if (w.keyIs(keyStart, keyEnd, CHOICES)) {
      if (c !== LBRACKET) return undefined;
      sawChoices = true;
      const r = w.choices(i);
      if (r === DEFER) return undefined;
      if (w.token) token = true;
      i = r;
    } else if (w.keyIs(keyStart, keyEnd, USAGE)) {
      // An object is read; null, a string, a number: no usage (as readUsage has it).
      if (c === LBRACE) i = w.usageObject(i);
      else if (c === LBRACKET) return undefined;
      else i = w.skipValue(i);
    } else if (w.keyIs(keyStart, keyEnd, ERROR)) {
      if (c !== 0x6e) return undefined; // anything but null: an error
      i = w.skipValue(i);
    } else if (w.keyIs(keyStart, keyEnd, MODEL) && c === QUOTE) {
      const e = w.stringEnd(i);
      if (e === DEFER || w.escaped(i + 1, e - 1)) return undefined;
      w.modelStart = i + 1;
      w.modelEnd = e - 1;
      i = e;
    } else if (w.keyIs(keyStart, keyEnd, TYPE)) {
      return undefined; // the Responses API, or an error event
    } else if (w.keyIs(keyStart, keyEnd, TIMINGS) && c === LBRACE) {
      i = w.timingsObject(i);
    } else if (w.keyIs(keyStart, keyEnd, OBJECT)) {
      if (c === QUOTE && b[i + 1] === 0x65 /* "e... : "error" */) return undefined;
      i = w.skipValue(i);
    } else {
      i = w.skipValue(i);
    }
    if (i === DEFER) return undefined;
    i = w.after(i, RBRACE);
    if (i === DEFER) return undefined;
    if (w.more) continue;
    if (w.space(i) !== end) return undefined;
    return sawChoices ? token : undefined;
  }
}

// One walker, reused: the hot path allocates nothing per event.
class Walker {
  b: Uint8Array = new Uint8Array(0);
  end = 0;
  token = false;
  /** Some output was visible (not reasoning only). */
  visible = false;
  /** Choices seen, delta members seen, and the span of the last string value of a sequence key. */
  choiceCount = 0;
  members = 0;
  valueStart = -1;
  valueEnd = -1;
  /** That string's key is a reasoning key. */
  valueReasoning = false;
  /** The last finish reason's span (-1: none), the model's, and the usage counts (-1: none). */
  finishStart = -1;
  finishEnd = -1;
  modelStart = -1;
  modelEnd = -1;
  usage = false;
  promptTokens = -1;
  inputTokens = -1;
  completionTokens = -1;
  outputTokens = -1;
  cachedTokens = -1;
  cacheHitTokens = -1;
  reasoningTokens = -1;
  /** llama.cpp's timings (-1: not read). */
  promptN = -1;
  promptMs = -1;
  predictedN = -1;
  predictedMs = -1;
  cacheN = -1;

  /** What the walk read, as classifyEvent would report it: a boolean when only the token. */
  facts(token: boolean): boolean | EventFacts {
    const b = this.b as Buffer;
    let finishReason: string | undefined;
    if (this.finishStart !== -1) finishReason = b.toString('latin1', this.finishStart, Math.min(this.finishEnd, this.finishStart + MAX_FINISH_REASON));
    let usage: EventFacts['usage'];
    if (this.usage) {
      const prompt = this.promptTokens !== -1 ? this.promptTokens : this.inputTokens;
      const completion = this.completionTokens !== -1 ? this.completionTokens : this.outputTokens;
      const cached = this.cachedTokens !== -1 ? this.cachedTokens : this.cacheHitTokens;
      const reasoning = this.reasoningTokens;
      if (cached !== -1 || reasoning !== -1) {
        usage = {
          promptTokens: prompt === -1 ? undefined : prompt,
          completionTokens: completion === -1 ? undefined : completion,
          cacheReadTokens: undefined,
          cacheCreationTokens: undefined,
          cachedTokens: cached === -1 ? undefined : cached,
          reasoningTokens: reasoning === -1 ? undefined : reasoning,
        };
      } else if (prompt !== -1 || completion !== -1)
        usage = { promptTokens: prompt === -1 ? undefined : prompt, completionTokens: completion === -1 ? undefined : completion };
    }
    const timed = this.promptN !== -1 && this.promptMs !== -1 && this.predictedN !== -1 && this.predictedMs !== -1;
    const reasoning = token && !this.visible;
    if (usage === undefined && finishReason === undefined && !timed) return reasoning ? REASONING : token;
    let facts: EventFacts = reasoning
      ? { token, usage, error: false, done: false, malformed: false, finishReason, reasoning: true }
      : { token, usage, error: false, done: false, malformed: false, finishReason };
    if (timed)
      facts = {
        ...facts,
        timings:
          this.cacheN === -1
            ? { promptTokens: this.promptN, promptMs: this.promptMs, predictedTokens: this.predictedN, predictedMs: this.predictedMs }
            : {
                promptTokens: this.promptN,
                promptMs: this.promptMs,
                predictedTokens: this.predictedN,
                predictedMs: this.predictedMs,
                cachedTokens: this.cacheN,
              },
      };
    return this.modelStart !== -1 && this.modelEnd > this.modelStart ? { ...facts, model: b.toString('utf8', this.modelStart, this.modelEnd) } : facts;
  }

  /** Bytes [from, to) hold a backslash (an escape this walker does not decode). */
  escaped(from: number, to: number): boolean {
    const b = this.b;
    for (let j = from; j < to; j++) if (b[j] === BACKSLASH) return true;
    return false;
  }

  /**
   * A plain non-negative integer at i (digits only, no leading zero, at most 15 digits: a safe
   * integer), as the index past it and its value; DEFER for any other number form.
   */
  integer(i: number): number {
    const b = this.b;
    let j = i;
    let value = 0;
    while (j < this.end && b[j]! >= 0x30 && b[j]! <= 0x39) value = value * 10 + (b[j++]! - 0x30);
    const n = j - i;
    if (n === 0 || n > 15 || (n > 1 && b[i] === 0x30)) return DEFER;
    const d = b[j];
    if (d === 0x2e || d === 0x65 || d === 0x45) return DEFER; // a fraction or an exponent
    this.lastInteger = value;
    return j;
  }
  lastInteger = 0;

  /** The usage object at i: its token counts read; returns the index past it. */
  usageObject(i: number): number {
    const b = this.b;
    this.usage = true;
    i = this.space(i + 1);
    if (b[i] === RBRACE) return i + 1;
    for (;;) {
      i = this.key(i);
      if (i === DEFER) return DEFER;
      const c = b[i]!;
      if (c >= 0x30 && c <= 0x39) {
        const ks = this.keyStart;
        const ke = this.keyEnd;
        const e = this.integer(i);
        if (e === DEFER) return DEFER;
        if (this.keyIs(ks, ke, PROMPT_TOKENS)) this.promptTokens = this.lastInteger;
        else if (this.keyIs(ks, ke, COMPLETION_TOKENS)) this.completionTokens = this.lastInteger;
        else if (this.keyIs(ks, ke, INPUT_TOKENS)) this.inputTokens = this.lastInteger;
        else if (this.keyIs(ks, ke, OUTPUT_TOKENS)) this.outputTokens = this.lastInteger;
        else if (this.keyIs(ks, ke, PROMPT_CACHE_HIT_TOKENS)) this.cacheHitTokens = this.lastInteger;
        else if (this.keyIn(ks, ke, CACHE_KEYS)) return DEFER;
        i = e;
      } else if (c === LBRACE && this.keyIn(this.keyStart, this.keyEnd, PROMPT_DETAILS)) {
        i = this.detailsObject(i, CACHED_TOKENS, 0);
        if (i === DEFER) return DEFER;
      } else if (c === LBRACE && this.keyIn(this.keyStart, this.keyEnd, COMPLETION_DETAILS)) {
        i = this.detailsObject(i, REASONING_TOKENS, 1);
        if (i === DEFER) return DEFER;
      } else if (c === 0x2d) {
        return DEFER; // a negative count: the full classifier decides what it means
      } else {
        i = this.skipValue(i);
        if (i === DEFER) return DEFER;
      }
      i = this.after(i, RBRACE);
      if (i === DEFER || !this.more) return i;
    }
  }

  /**
   * A `*_tokens_details` object at i: its `key` count read (`which` 0: cached_tokens, 1:
   * reasoning_tokens), any other member skipped; a count that is not a plain integer defers.
   */
  detailsObject(i: number, key: Uint8Array, which: 0 | 1): number {
    const b = this.b;
    i = this.space(i + 1);
    if (b[i] === RBRACE) return i + 1;
    for (;;) {
      i = this.key(i);
      if (i === DEFER) return DEFER;
      if (this.keyIs(this.keyStart, this.keyEnd, key)) {
        const c = b[i]!;
        if (c === 0x6e)
          i = this.skipValue(i); // null: no count
        else if (c < 0x30 || c > 0x39) return DEFER;
        else {
          i = this.integer(i);
          if (i === DEFER) return DEFER;
          if (which === 0) this.cachedTokens = this.lastInteger;
          else this.reasoningTokens = this.lastInteger;
        }
      } else i = this.skipValue(i);
      if (i === DEFER) return DEFER;
      i = this.after(i, RBRACE);
      if (i === DEFER || !this.more) return i;
    }
  }

  /**
   * The timings object at i (llama.cpp: once a stream, on its last chunk): its figures (and cache_n) read
   * as JSON.parse reads them (they have fractions); a negative one defers, as readEngineTimings
   * would not take it. Returns the index past the object.
   */
  timingsObject(i: number): number {
    const b = this.b as Buffer;
    i = this.space(i + 1);
    if (b[i] === RBRACE) return i + 1;
    for (;;) {
      i = this.key(i);
      if (i === DEFER) return DEFER;
      const ks = this.keyStart;
      const ke = this.keyEnd;
      const e = this.skipValue(i);
      if (e === DEFER) return DEFER;
      const c = b[i]!;
      if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
        const which = this.keyIs(ks, ke, PROMPT_N)
          ? 1
          : this.keyIs(ks, ke, PROMPT_MS)
            ? 2
            : this.keyIs(ks, ke, PREDICTED_N)
              ? 3
              : this.keyIs(ks, ke, PREDICTED_MS)
                ? 4
                : this.keyIs(ks, ke, CACHE_N)
                  ? 5
                  : 0;
        if (which !== 0) {
          const text = b.toString('latin1', i, e);
          if (c === 0x2d || !JSON_NUMBER.test(text)) return DEFER;
          const value = Number(text);
          if (!Number.isFinite(value)) return DEFER;
          if (which === 1) this.promptN = value;
          else if (which === 2) this.promptMs = value;
          else if (which === 3) this.predictedN = value;
          else if (which === 4) this.predictedMs = value;
          else this.cacheN = value;
        }
      } else if (
        this.keyIs(ks, ke, PROMPT_N) ||
        this.keyIs(ks, ke, PROMPT_MS) ||
        this.keyIs(ks, ke, PREDICTED_N) ||
        this.keyIs(ks, ke, PREDICTED_MS) ||
        this.keyIs(ks, ke, CACHE_N)
      ) {
        return DEFER; // not a number where one belongs: the full classifier decides
      }
      i = this.after(e, RBRACE);
      if (i === DEFER || !this.more) return i;
    }
  }

  /** Whether after() passed a comma (another member follows) or the container's end. */
  more = false;

  /** After a value at i: past a comma (more), or past `close` (no more); DEFER on anything else. */
  after(i: number, close: number): number {
    const b = this.b;
    i = this.space(i);
    this.more = b[i] === COMMA;
    if (this.more) return this.space(i + 1);
    return b[i] === close ? i + 1 : DEFER;
  }

  /** The span of the last key read by key(): [keyStart, keyEnd), without its quotes. */
  keyStart = 0;
  keyEnd = 0;

  /** A member's key at i (a plain string, then a colon): its span kept; the index of its value, or DEFER. */
  key(i: number): number {
    const b = this.b;
    if (b[i] !== QUOTE) return DEFER;
    const end = this.stringEnd(i);
    if (end === DEFER) return DEFER;
    this.keyStart = i + 1;
    this.keyEnd = end - 1;
    i = this.space(end);
    if (b[i] !== COLON) return DEFER;
    return this.space(i + 1);
  }

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
      this.choiceCount++;
      if (b[i] === LBRACE) {
        i = this.choice(i);
        if (i === DEFER) return DEFER;
      } else {
        i = this.skipValue(i);
        if (i === DEFER) return DEFER;
      }
      i = this.after(i, RBRACKET);
      if (i === DEFER || !this.more) return i;
    }
  }

  /** One choice object: `delta` members and `text` decide; a plain finish reason is kept (the last wins). */
  choice(i: number): number {
    const b = this.b;
    i = this.space(i + 1);
    if (b[i] === RBRACE) return i + 1;
    for (;;) {
      i = this.key(i);
      if (i === DEFER) return DEFER;
      const keyStart = this.keyStart;
      const keyEnd = this.keyEnd;
      if (this.keyIs(keyStart, keyEnd, DELTA) && b[i] === LBRACE) {
        i = this.delta(i);
      } else if (this.keyIs(keyStart, keyEnd, TEXT) && b[i] === QUOTE) {
        const end = this.stringEnd(i);
        if (end !== DEFER && end > i + 2) this.token = this.visible = true;
        i = end;
      } else if (b[i] === QUOTE && this.keyIs(keyStart, keyEnd, FINISH_REASON)) {
        // Why generation stopped: kept when plain ASCII (its length in characters is then its
        // length in bytes, as the cut to 64 needs); an empty one says nothing.
        const end = this.stringEnd(i);
        if (end === DEFER) return DEFER;
        for (let j = i + 1; j < end - 1; j++) if (b[j]! < 0x20 || b[j]! > 0x7e || b[j] === BACKSLASH) return DEFER;
        if (end > i + 2) {
          this.finishStart = i + 1;
          this.finishEnd = end - 1;
        }
        i = end;
      } else {
        i = this.skipValue(i);
      }
      if (i === DEFER) return DEFER;
      i = this.after(i, RBRACE);
      if (i === DEFER || !this.more) return i;
    }
  }

  /** One delta object. */
  delta(i: number): number {
    const b = this.b;
    i = this.space(i + 1);
    if (b[i] === RBRACE) return i + 1;
    for (;;) {
      i = this.key(i);
      if (i === DEFER) return DEFER;
      const keyStart = this.keyStart;
      const keyEnd = this.keyEnd;
      const c = b[i];
      const end = this.skipValue(i);
      if (end === DEFER) return DEFER;
      this.members++;
      if (c === QUOTE) {
        // A string under a sequence key: output when non-empty. Remember where it lies, for
        // the stream's template (see createSkimmer).
        if (this.keyIn(keyStart, keyEnd, SEQUENCE_KEYS)) {
          if (end > i + 2) {
            this.token = true;
            if (!this.keyIn(keyStart, keyEnd, REASONING_KEYS)) this.visible = true;
          }
          this.valueStart = i;
          this.valueEnd = end;
          this.valueReasoning = this.keyIn(keyStart, keyEnd, REASONING_KEYS);
        }
      } else if (c === LBRACKET) {
        // A non-empty array (tool calls, content parts) under a sequence key.
        if (this.space(i + 1) < end - 1 && this.keyIn(keyStart, keyEnd, SEQUENCE_KEYS)) {
          this.token = true;
          if (!this.keyIn(keyStart, keyEnd, REASONING_KEYS)) this.visible = true;
        }
      } else if (c === LBRACE) {
        if (this.space(i + 1) < end - 1 && this.keyIn(keyStart, keyEnd, OBJECT_KEYS)) this.token = this.visible = true;
      }
      i = this.after(end, RBRACE);
      if (i === DEFER || !this.more) return i;
    }
  }
}

const walker = new Walker();

/**
 * A skimmer for one stream. Chunks of one stream repeat their bytes but for the generated text:
 * `{"id":"...","created":...,"model":"...","choices":[{"index":0,"delta":{"content":"<text>"},...}]}`.
 * After a full walk of a chunk with one choice whose delta holds one string, the bytes before and
 * after that string become the stream's template; a later chunk that is template + a JSON string
 * + template is that same chunk with other text, decided by two native comparisons and a scan of
 * the text alone. Any other chunk is walked in full (and may become the new template).
 */
export function createSkimmer(): (b: Buffer, start: number, end: number) => boolean | EventFacts | undefined {
  let prefix: Buffer | undefined;
  let suffix: Buffer | undefined;
  // The template's string is reasoning (reasoning_content), not visible output.
  let reasoning = false;
  return (b, start, end) => {
    if (prefix !== undefined && suffix !== undefined) {
      const p = prefix.length;
      const q = suffix.length;
      const from = start + p;
      const to = end - q;
      if (to - from >= 2 && b[from] === QUOTE && sameBytes(b, start, prefix) && sameBytes(b, to, suffix) && isString(b, from, to)) {
        return to - from > 2 && (reasoning ? REASONING : true);
      }
    }
    const token = walk(b, start, end);
    if (token === undefined) return undefined;
    const w = walker;
    const facts = w.facts(token);
    // A chunk that reports more than its token (a finish reason, usage) never becomes the template.
    if ((facts === token || facts === REASONING) && w.choiceCount === 1 && w.members === 1 && w.valueStart !== -1) {
      prefix = Buffer.from(b.subarray(start, w.valueStart));
      suffix = Buffer.from(b.subarray(w.valueEnd, end));
      reasoning = w.valueReasoning;
    }
    return facts;
  };
}

/**
 * Bytes of `b` from `at` are those of `t` (the skimmer's template, the usage strip's name). A
 * loop: for up to a few hundred bytes it costs less than Buffer's compare, whose argument checks
 * and native call come before the compare.
 */
export function sameBytes(b: Uint8Array, at: number, t: Uint8Array): boolean {
  for (let i = 0; i < t.length; i++) if (b[at + i] !== t[i]) return false;
  return true;
}

/** Bytes [from, to) are exactly one JSON string: quotes at both ends, none unescaped between. */
export function isString(b: Uint8Array, from: number, to: number): boolean {
  if (b[to - 1] !== QUOTE) return false;
  for (let j = from + 1; j < to - 1; j++) {
    const c = b[j];
    if (c === BACKSLASH) {
      j++;
      if (j >= to - 1) return false; // the closing quote was escaped
    } else if (c === QUOTE) return false;
  }
  return true;
}
