// Whether a complete SSE event is the usage-only chunk that injected usage produced (`choices`
// empty, a `usage` object), and whether its bytes show a choice: the usage strip's two questions
// about an event (usage-strip.ts). An event of one `data:` line, the form every engine writes, is
// read on its bytes (json-bytes/strict-object.ts, as JSON.parse would take it); any other, or one
// that reader leaves, by JSON.parse of its data lines.
import { asciiBytes, COLON, LBRACE, LBRACKET, RBRACKET, sameBytes, skipSpace, skipSpaceBack } from '../json-bytes/bytes.ts';
import { NOT_JSON, objectMembers, UNREADABLE } from '../json-bytes/strict-object.ts';

const CHOICES = Buffer.from('"choices"');
const USAGE = Buffer.from('"usage"');
const DATA = asciiBytes('data:');
const SPACE = 0x20;

/** `"choices": []` is in the bytes. */
export const EMPTY_CHOICES = 1;
/** `"choices": [` is in the bytes with a value after it: this event is not the usage-only chunk. */
export const SOME_CHOICE = 2;

/** Not a usage-only chunk; one; one that carries a `timings` object too. */
export const NOT_USAGE_ONLY = 0;
const USAGE_ONLY = 1;
export const USAGE_ONLY_TIMED = 2;

/**
 * Whether a complete SSE event is a usage-only chunk (`choices: []` and a usage object), and
 * whether it carries the engine's timings; its lines are bytes [start, end) of `event`. An event
 * whose bytes show a non-empty `choices` anywhere is not one, whatever a repeated key makes of it
 * for JSON.parse: so the strip can let such an event go from its first bytes on, before its end
 * came, and decide the same as when it came whole.
 */
export function usageOnlyKind(event: Buffer, start: number, end: number, lines: number): number {
  if (choicesIn(event, start, end, event.indexOf(LBRACKET, start)) !== EMPTY_CHOICES) return NOT_USAGE_ONLY;
  const usage = event.indexOf(USAGE, start);
  if (usage === -1 || usage >= end) return NOT_USAGE_ONLY;
  // One `data:` line, the form every engine writes: its JSON read on its bytes.
  if (lines === 1 && end - start >= 5 && sameBytes(event, start, DATA)) {
    const kind = usageOnlyBytes(event, start + (event[start + 5] === SPACE ? 6 : 5), end);
    if (kind !== UNREADABLE) return kind;
  }
  return usageOnlyJson(event, start, end);
}

const USAGE_KEYS = [asciiBytes('choices'), asciiBytes('usage'), asciiBytes('timings')];
const valueStarts = new Int32Array(USAGE_KEYS.length);

/** usageOnlyJson's answer for one line's JSON text, bytes [from, end), or UNREADABLE (ask JSON.parse). */
function usageOnlyBytes(b: Buffer, from: number, end: number): number {
  const read = objectMembers(b, from, end, USAGE_KEYS, valueStarts);
  if (read === UNREADABLE) return UNREADABLE;
  if (read === NOT_JSON) return NOT_USAGE_ONLY;
  const choices = valueStarts[0]!;
  const usage = valueStarts[1]!;
  const timings = valueStarts[2]!;
  // JSON.parse's view: `choices` an empty array, `usage` and `timings` of type 'object' (an array is one, null is not).
  if (choices === -1 || b[choices] !== LBRACKET || b[skipSpace(b, choices + 1, end)] !== RBRACKET) return NOT_USAGE_ONLY;
  if (usage === -1 || (b[usage] !== LBRACE && b[usage] !== LBRACKET)) return NOT_USAGE_ONLY;
  return timings !== -1 && (b[timings] === LBRACE || b[timings] === LBRACKET) ? USAGE_ONLY_TIMED : USAGE_ONLY;
}

/** The event's lines as JSON: a `choices` that is empty and a `usage` object, nothing but `data:` lines and comments; with `timings` or not. */
function usageOnlyJson(event: Buffer, start: number, end: number): number {
  const data: string[] = [];
  for (const line of event.toString('utf8', start, end).split(/\r\n|\r|\n/)) {
    if (line.startsWith('data:')) data.push(line.slice(line.charCodeAt(5) === 0x20 ? 6 : 5));
    else if (line !== '' && !line.startsWith(':')) return NOT_USAGE_ONLY; // event:, id: ... keep such events
  }
  if (data.length === 0) return NOT_USAGE_ONLY;
  try {
    const p = JSON.parse(data.join('\n')) as { choices?: unknown; usage?: unknown; timings?: unknown };
    if (!Array.isArray(p.choices) || p.choices.length !== 0 || typeof p.usage !== 'object' || p.usage === null) return NOT_USAGE_ONLY;
    return typeof p.timings === 'object' && p.timings !== null ? USAGE_ONLY_TIMED : USAGE_ONLY;
  } catch {
    return NOT_USAGE_ONLY;
  }
}

/**
 * What `"choices": [` in [start, end) shows (EMPTY_CHOICES, SOME_CHOICE, both or none), from each
 * `[` from `at` on (the first at or after start: a byte search, and a token event has one or two),
 * looking back for `"choices":` and forwards, whitespace aside, for what follows (nothing yet, at
 * the end of an event's first bytes: not known).
 */
export function choicesIn(event: Buffer, start: number, end: number, at: number): number {
  let found = 0;
  for (; at !== -1 && at < end; at = event.indexOf(LBRACKET, at + 1)) found |= choiceAt(event, start, end, at);
  return found;
}

/** What the `[` at `at` shows: EMPTY_CHOICES, SOME_CHOICE, or 0 (not a choices array, or its next byte not in range). */
export function choiceAt(event: Buffer, start: number, end: number, at: number): number {
  let i = skipSpaceBack(event, at - 1, start);
  if (i < start || event[i] !== COLON) return 0;
  i = skipSpaceBack(event, i - 1, start) - CHOICES.length + 1;
  if (i < start || !sameBytes(event, i, CHOICES)) return 0;
  const next = skipSpace(event, at + 1, end);
  if (next >= end) return 0;
  return event[next] === RBRACKET ? EMPTY_CHOICES : SOME_CHOICE;
}
