// The hot path's classifier: decides from the raw bytes of one `data:` payload whether a chat or
// completions chunk carries generated output, in one pass over the bytes, without decoding them
// or building objects. It walks the top-level object: `choices[].delta` members and
// `choices[].text` decide; a plain `finish_reason`, a `usage` object of plain integers and the
// `model` are read on the way (the last chunks of a stream), and so are llama.cpp's `timings`.
// Anything else (an error, the Responses API's `type`, an escape or a number
// form it does not read, an unexpected byte) makes it answer undefined, and the full classifier
// (JSON.parse) decides instead: exact either way, and no JSON.parse for the events of a common
// stream. It assumes what engines send: no key twice in one object (JSON.parse would keep the
// last; a member here counts wherever it is). The walk is skim-readers.ts's, its cursor
// skim-walker.ts's, the bytes read by the JSON byte module (src/json-bytes/), as the request body
// scanner reads them.
import { sameBytes } from '../json-bytes/bytes.ts';
import { isString } from '../json-bytes/strings.ts';
import { REASONING, type EventFacts } from './event-facts.ts';
import { walkChunk } from './skim-readers.ts';
import { SkimWalker } from './skim-walker.ts';

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
  walker.reset(b, end);
  return walkChunk(walker, start, end);
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
