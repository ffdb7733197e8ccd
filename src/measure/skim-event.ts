// The hot path's classifier: decides from the raw bytes of one `data:` payload whether a chat or
// completions chunk carries generated output, in one pass over the bytes, without decoding them
// or building objects. It walks the top-level object: `choices[].delta` members and
// `choices[].text` decide; a plain `finish_reason`, a `usage` object of plain integers and the
// `model` are read on the way (the last chunks of a stream), and so are llama.cpp's `timings`
// (skim-usage.ts). Anything else (an error, the Responses API's `type`, an escape or a number
// form it does not read, an unexpected byte) makes it answer undefined, and the full classifier
// (JSON.parse) decides instead: exact either way, and no JSON.parse for the events of a common
// stream. It assumes what engines send: no key twice in one object (JSON.parse would keep the
// last; a member here counts wherever it is). The walk's loops and cursor are skim-walker.ts's,
// the bytes read by the JSON byte module (src/json-bytes/), as the request body scanner reads them.
import { asciiBytes as k, BACKSLASH, LBRACE, LBRACKET, QUOTE, sameBytes } from '../json-bytes/bytes.ts';
import { hasBackslash, isString } from '../json-bytes/strings.ts';
import { REASONING, type EventFacts } from './event-facts.ts';
import { DEFER, SkimWalker } from './skim-walker.ts';
import { timingsMember, usageObject } from './skim-usage.ts';

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

// One walker, reused: the hot path allocates nothing per event.
const walker = new SkimWalker();

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
  w.reset(b, end);
  const i = w.space(start);
  if (b[i] !== LBRACE) return undefined;
  const past = w.object(i, topMember);
  if (past === DEFER || w.space(past) !== end) return undefined;
  return w.sawChoices ? w.token : undefined;
}

/** A member of the chunk's object. */
function topMember(w: SkimWalker, i: number): number {
  const c = w.b[i];
  if (w.keyIs(CHOICES)) {
    if (c !== LBRACKET) return DEFER;
    w.sawChoices = true;
    return w.array(i, choice);
  }
  if (w.keyIs(USAGE)) {
    // An object is read; null, a string, a number: no usage (as readUsage has it).
    if (c === LBRACE) return usageObject(w, i);
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
  if (w.keyIs(TIMINGS) && c === LBRACE) return w.object(i, timingsMember);
  if (w.keyIs(OBJECT) && c === QUOTE && w.b[i + 1] === 0x65 /* "e... : "error" */) return DEFER;
  return w.skip(i);
}

/** An element of `choices`: a choice object is read, anything else skipped. */
function choice(w: SkimWalker, i: number): number {
  w.choiceCount++;
  return w.b[i] === LBRACE ? w.object(i, choiceMember) : w.skip(i);
}

/** A member of one choice: `delta` members and `text` decide; a plain finish reason is kept (the last wins). */
function choiceMember(w: SkimWalker, i: number): number {
  const b = w.b;
  if (w.keyIs(DELTA) && b[i] === LBRACE) return w.object(i, deltaMember);
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

/**
 * A skimmer for one stream. Chunks of one stream repeat their bytes but for the generated text:
 * `{"id":"...","created":...,"model":"...","choices":[{"index":0,"delta":{"content":"<text>"},...}]}`.
 * After a full walk of a chunk with one choice whose delta holds one string, the bytes before and
 * after that string become the stream's template; a later chunk that is template + a JSON string
 * + template is that same chunk with other text, decided by two comparisons and a scan of the
 * text alone. Any other chunk is walked in full (and may become the new template).
 */
export function createSkimmer(): (b: Buffer, start: number, end: number) => boolean | EventFacts | undefined {
  let prefix: Buffer | undefined;
  let suffix: Buffer | undefined;
  // The template's string is reasoning (reasoning_content), not visible output.
  let reasoning = false;
  return (b, start, end) => {
    if (prefix !== undefined && suffix !== undefined) {
      const from = start + prefix.length;
      const to = end - suffix.length;
      if (to - from >= 2 && sameBytes(b, start, prefix) && sameBytes(b, to, suffix) && isString(b, from, to)) {
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
