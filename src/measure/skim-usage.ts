// The skimmer's readers of a chunk's counts (skim-event.ts walks the chunk): a `usage` object of
// plain integers, with its `*_tokens_details`, and llama.cpp's `timings`. A count in any other
// form (negative, a fraction, a string) and Anthropic's cache counts defer to the full classifier.
import { asciiBytes as k, LBRACE } from '../json-bytes/bytes.ts';
import { jsonNumber, NOT_PLAIN, plainInteger } from '../json-bytes/scalars.ts';
import { primitiveEnd } from '../json-bytes/values.ts';
import { DEFER, type SkimWalker } from './skim-walker.ts';

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

/** A plain count at i, kept in w.count: the index past it, or DEFER for any other form. */
function count(w: SkimWalker, i: number): number {
  const e = primitiveEnd(w.b, i, w.end);
  const value = plainInteger(w.b, i, e, MAX_COUNT);
  if (value === NOT_PLAIN) return DEFER;
  w.count = value;
  return e;
}

/** The usage object at i (a member's value): its token counts read; the index past it. */
export function usageObject(w: SkimWalker, i: number): number {
  w.usage = true;
  return w.object(i, usageMember);
}

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
  if (c === LBRACE && w.keyIn(PROMPT_DETAILS)) return w.object(i, cachedDetail);
  if (c === LBRACE && w.keyIn(COMPLETION_DETAILS)) return w.object(i, reasoningDetail);
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
export function timingsMember(w: SkimWalker, i: number): number {
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
