// The response skimmer's walk (skim-event.ts): one loop over an object's members and one over an
// array's elements, each value read by the member reader of its container's kind: the chunk's
// own members, a choice's, a delta's (`choices[].delta` members and `choices[].text` decide), a
// `usage` object of plain integers with its `*_tokens_details`, and llama.cpp's `timings`. A
// kind is a number and the readers are chosen by one switch, not passed as functions: the loop's
// call of a function passed in, one of six, cost the full walk of a token chunk 1.27 times the
// old walk's CPU, the switch 1.15 (node bench/skim.ts); after the other changes the full walk
// costs 1.03 to 1.05 times the old one's for a token chunk, up to 1.12 for a tool call or a
// usage chunk (about 100 ns of CPU more an event), and only the events a stream's template does
// not match take it (node bench/stream-reads.ts: the same CPU per read within its spread).
// Anything it does not read (an error, the Responses API's `type`, an escape, a count in another
// form, Anthropic's cache counts) defers.
import { asciiBytes as k } from '../json-bytes/bytes.ts';
import { jsonNumber, NOT_PLAIN, plainInteger } from '../json-bytes/scalars.ts';
import { hasBackslash } from '../json-bytes/strings.ts';
import { primitiveEnd } from '../json-bytes/values.ts';
import { DEFER, type SkimWalker } from './skim-walker.ts';

// JSON's bytes as local constants: an imported binding is loaded from its module at each use (bytes.ts).
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const LBRACKET = 0x5b;
const QUOTE = 0x22;
const RBRACE = 0x7d;
const RBRACKET = 0x5d;

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
// `delta` members whose value is output when it is a non-empty string or array ...
const SEQUENCE_KEYS = [k('content'), k('reasoning_content'), k('reasoning'), k('tool_calls'), k('refusal')];
// ... of which these are reasoning, not visible output (every other output key is visible).
const REASONING_KEYS = [k('reasoning_content'), k('reasoning')];
// ... and those whose value is output when it is a non-empty object (as in openai-events.ts).
const OBJECT_KEYS = [k('audio'), k('function_call')];
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
const TIMINGS_KEYS = [k('prompt_n'), k('prompt_ms'), k('predicted_n'), k('predicted_ms'), k('cache_n')];
/** A count of up to 15 digits: a safe integer. */
const MAX_COUNT = 999_999_999_999_999;

// The kinds of object, each with its member reader.
const CHUNK_MEMBER = 0;
const CHOICE_MEMBER = 1;
const DELTA_MEMBER = 2;
const USAGE_MEMBER = 3;
const CACHED_DETAIL = 4;
const REASONING_DETAIL = 5;
const TIMINGS_MEMBER = 6;

/**
 * Walks the chunk at bytes [start, end) of w's bytes (w just reset): true or false, whether it
 * carries output, its other facts left in w; undefined, not a shape read here.
 */
export function walkChunk(w: SkimWalker, start: number, end: number): boolean | undefined {
  const i = w.space(start);
  if (w.b[i] !== LBRACE) return undefined;
  const past = object(w, i, CHUNK_MEMBER);
  if (past === DEFER || w.space(past) !== end) return undefined;
  return w.sawChoices ? w.token : undefined;
}

/** The members of the object that opens at i, each read by `kind`'s reader: the index past it, or DEFER. */
function object(w: SkimWalker, i: number, kind: number): number {
  i = w.space(i + 1);
  if (w.b[i] === RBRACE) return i + 1;
  for (;;) {
    i = w.key(i);
    if (i === DEFER) return DEFER;
    i = member(w, i, kind);
    if (i === DEFER) return DEFER;
    i = w.after(i, RBRACE);
    if (i === DEFER || !w.more) return i;
  }
}

/** The member's value at i (its key in w.keyStart, w.keyEnd) read: the index past it, or DEFER. */
function member(w: SkimWalker, i: number, kind: number): number {
  switch (kind) {
    case CHUNK_MEMBER:
      return chunkMember(w, i);
    case CHOICE_MEMBER:
      return choiceMember(w, i);
    case DELTA_MEMBER:
      return deltaMember(w, i);
    case USAGE_MEMBER:
      return usageMember(w, i);
    case CACHED_DETAIL:
      return cachedDetail(w, i);
    case REASONING_DETAIL:
      return reasoningDetail(w, i);
    default:
      return timingsMember(w, i);
  }
}

/** The `choices` array that opens at i: each element read by choice(); the index past it, or DEFER. */
function choices(w: SkimWalker, i: number): number {
  i = w.space(i + 1);
  if (w.b[i] === RBRACKET) return i + 1;
  for (;;) {
    i = choice(w, i);
    if (i === DEFER) return DEFER;
    i = w.after(i, RBRACKET);
    if (i === DEFER || !w.more) return i;
  }
}

/** A member of the chunk's object. */
function chunkMember(w: SkimWalker, i: number): number {
  const c = w.b[i];
  if (w.keyIs(CHOICES)) {
    if (c !== LBRACKET) return DEFER;
    w.sawChoices = true;
    return choices(w, i);
  }
  if (w.keyIs(USAGE)) {
    // An object is read; null, a string, a number: no usage (as readUsage has it).
    if (c === LBRACE) {
      w.usage = true;
      return object(w, i, USAGE_MEMBER);
    }
    return c === LBRACKET ? DEFER : w.skip(i);
  }
  if (w.keyIs(ERROR)) return c === 0x6e ? w.skip(i) : DEFER; // anything but null: an error
  if (w.keyIs(MODEL) && c === QUOTE) {
    const e = w.stringEnd(i);
    if (e === DEFER || hasBackslash(w.b, i + 1, e - 1)) return DEFER;
    w.modelStart = i + 1;
    w.modelEnd = e - 1;
    return e;
  }
  if (w.keyIs(TYPE)) return DEFER; // the Responses API, or an error event
  if (w.keyIs(TIMINGS) && c === LBRACE) return object(w, i, TIMINGS_MEMBER);
  if (w.keyIs(OBJECT) && c === QUOTE && w.b[i + 1] === 0x65 /* "e... : "error" */) return DEFER;
  return w.skip(i);
}

/** An element of `choices`: a choice object is read, anything else skipped. */
function choice(w: SkimWalker, i: number): number {
  w.choiceCount++;
  return w.b[i] === LBRACE ? object(w, i, CHOICE_MEMBER) : w.skip(i);
}

/** A member of one choice: `delta` members and `text` decide; a plain finish reason is kept (the last wins). */
function choiceMember(w: SkimWalker, i: number): number {
  const b = w.b;
  if (w.keyIs(DELTA) && b[i] === LBRACE) return object(w, i, DELTA_MEMBER);
  if (w.keyIs(TEXT) && b[i] === QUOTE) {
    const end = w.stringEnd(i);
    if (end !== DEFER && end > i + 2) w.token = w.visible = true;
    return end;
  }
  if (b[i] === QUOTE && w.keyIs(FINISH_REASON)) {
    // Why generation stopped: kept when plain ASCII (its length in characters is then its
    // length in bytes, as the cut to 64 needs); an empty one says nothing.
    const end = w.stringEnd(i);
    if (end === DEFER) return DEFER;
    for (let j = i + 1; j < end - 1; j++) if (b[j]! < 0x20 || b[j]! > 0x7e || b[j] === BACKSLASH) return DEFER;
    if (end > i + 2) {
      w.finishStart = i + 1;
      w.finishEnd = end - 1;
    }
    return end;
  }
  return w.skip(i);
}

/** A member of one delta: output under a sequence key (a non-empty string or array) or an object key. */
function deltaMember(w: SkimWalker, i: number): number {
  const c = w.b[i];
  const end = w.skip(i);
  if (end === DEFER) return DEFER;
  w.members++;
  if (c === QUOTE) {
    // A string under a sequence key: output when non-empty. Remember where it lies, for the
    // stream's template (see createSkimmer).
    if (w.keyIn(SEQUENCE_KEYS)) {
      const reasoning = w.keyIn(REASONING_KEYS);
      if (end > i + 2) {
        w.token = true;
        if (!reasoning) w.visible = true;
      }
      w.valueStart = i;
      w.valueEnd = end;
      w.valueReasoning = reasoning;
    }
  } else if (c === LBRACKET) {
    // A non-empty array (tool calls, content parts) under a sequence key.
    if (w.space(i + 1) < end - 1 && w.keyIn(SEQUENCE_KEYS)) {
      w.token = true;
      if (!w.keyIn(REASONING_KEYS)) w.visible = true;
    }
  } else if (c === LBRACE) {
    if (w.space(i + 1) < end - 1 && w.keyIn(OBJECT_KEYS)) w.token = w.visible = true;
  }
  return end;
}

/** A plain count at i, kept in w.count: the index past it, or DEFER for any other form. */
function count(w: SkimWalker, i: number): number {
  const e = primitiveEnd(w.b, i, w.end);
  const value = plainInteger(w.b, i, e, MAX_COUNT);
  if (value === NOT_PLAIN) return DEFER;
  w.count = value;
  return e;
}

/** A member of a `usage` object: its token counts read. */
function usageMember(w: SkimWalker, i: number): number {
  const c = w.b[i]!;
  if (c >= 0x30 && c <= 0x39) {
    const e = count(w, i);
    if (e === DEFER) return DEFER;
    if (w.keyIs(PROMPT_TOKENS)) w.promptTokens = w.count;
    else if (w.keyIs(COMPLETION_TOKENS)) w.completionTokens = w.count;
    else if (w.keyIs(INPUT_TOKENS)) w.inputTokens = w.count;
    else if (w.keyIs(OUTPUT_TOKENS)) w.outputTokens = w.count;
    else if (w.keyIs(PROMPT_CACHE_HIT_TOKENS)) w.cacheHitTokens = w.count;
    else if (w.keyIn(CACHE_KEYS)) return DEFER;
    return e;
  }
  if (c === LBRACE && w.keyIn(PROMPT_DETAILS)) return object(w, i, CACHED_DETAIL);
  if (c === LBRACE && w.keyIn(COMPLETION_DETAILS)) return object(w, i, REASONING_DETAIL);
  if (c === 0x2d) return DEFER; // a negative count: the full classifier decides what it means
  return w.skip(i);
}

/**
 * A `*_tokens_details` member: its one count read into w.count (-1: null, no count), any other
 * member skipped; a count that is not a plain integer defers.
 */
function detail(w: SkimWalker, i: number, key: Uint8Array): number {
  w.count = -1;
  if (!w.keyIs(key)) return w.skip(i);
  const c = w.b[i]!;
  if (c === 0x6e) return w.skip(i); // null: no count
  return c < 0x30 || c > 0x39 ? DEFER : count(w, i);
}

function cachedDetail(w: SkimWalker, i: number): number {
  const e = detail(w, i, CACHED_TOKENS);
  if (w.count !== -1) w.cachedTokens = w.count;
  return e;
}

function reasoningDetail(w: SkimWalker, i: number): number {
  const e = detail(w, i, REASONING_TOKENS);
  if (w.count !== -1) w.reasoningTokens = w.count;
  return e;
}

/**
 * A member of llama.cpp's timings object (once a stream, on its last chunk): its figures (and
 * cache_n) read as JSON.parse reads them (they have fractions); a negative one, or one that is
 * not a number, defers, as readEngineTimings would not take it.
 */
function timingsMember(w: SkimWalker, i: number): number {
  const e = w.skip(i);
  if (e === DEFER) return DEFER;
  let which = 0;
  while (which < TIMINGS_KEYS.length && !w.keyIs(TIMINGS_KEYS[which]!)) which++;
  if (which === TIMINGS_KEYS.length) return e;
  const c = w.b[i]!;
  if (c < 0x30 || c > 0x39) return DEFER; // negative, or not a number where one belongs
  const value = jsonNumber((w.b as Buffer).toString('latin1', i, e));
  if (value === undefined) return DEFER;
  if (which === 0) w.promptN = value;
  else if (which === 1) w.promptMs = value;
  else if (which === 2) w.predictedN = value;
  else if (which === 3) w.predictedMs = value;
  else w.cacheN = value;
  return e;
}
