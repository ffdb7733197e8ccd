// Removes the usage-only chunk that injected usage produced, from the bytes going to the
// client: every other byte passes unchanged and in order. It works on what one upstream read
// brought and gives back what to write for it, once: a read that ends on an event boundary and
// holds no usage-only chunk (the usual case) is given back as the very Buffer it came in, and a
// read with one removed as views of it around the gap (one copy only where two pieces must
// become one write), so the relay writes it as it writes any other read. Events are cut by the
// event splitter (event-splitter.ts, the tap's own); the event a read ends inside is held only
// while its bytes could still be the usage-only chunk: once they show a choice (`"choices": [`
// and a value) it goes on as its bytes come, as does an event that grows past the cap, and
// stripping resumes after it. So a fast stream's reads, which end inside a token event, go on
// as they came, nothing of them a read late; the usage-only chunk infermeter asked for (small,
// and last) is still removed from such a stream. The events of a read before its first `usage`
// are not read one by one: none of them can be that chunk.
// One filter over one read: its two removals (the usage-only chunk, and with
// INFERMETER_CONTINUOUS_USAGE each chunk's trailing usage member) share its held event and its writes.
import { afterBlankLine, EventSplitter, type EventSink } from './event-splitter.ts';
import { COLON, COMMA, LBRACE, LBRACKET, RBRACE, RBRACKET, skipSpace, skipSpaceBack } from '../json-bytes/bytes.ts';
import { choiceAt, choicesIn, EMPTY_CHOICES, NOT_USAGE_ONLY, SOME_CHOICE, USAGE_ONLY_TIMED, usageOnlyKind } from './usage-only-chunk.ts';
import { skipValue } from '../json-bytes/values.ts';

const LF = 0x0a;
const CR = 0x0d;
// Only an event with an empty "choices" and a "usage" key is read further (usage-only-chunk.ts).
// Whitespace JSON allows is allowed (Python's json.dumps writes `": "`).
const USAGE = Buffer.from('"usage"');
// Searched for without its quotes: Node's search for a needle that begins with a byte as
// frequent as `"` in JSON ran about eight times slower (49 against 6 µs over a 64 KiB read).
const USAGE_NAME = Buffer.from('usage');
/** A line's LF and a blank line's: what ends an event in the form engines send. */
const BLANK_AFTER_LF = Buffer.from('\n\n');
const EMPTY = Buffer.alloc(0);
/** Larger than any index: no such byte. */
const NONE = 0x7fffffff;
/** Held bytes past which an event begun in earlier reads is no longer looked at for a choice. */
const RELEASE_HELD_MAX = 4 * 1024;

export interface UsageStripOptions {
  readonly maxEventBytes: number;
  /**
   * Remove the `"usage"` member of every other event too (continuous usage, asked for by
   * infermeter): each event is then held to its end, where vLLM writes that member.
   */
  readonly members?: boolean;
  /**
   * Called with each removed event's byte length, and whether it carried a `timings` object
   * (the current llama-server moves its timings there when usage is asked).
   */
  readonly stripped: (bytes: number, timings: boolean) => void;
}

/** What the relay runs the bytes of one upstream read through before writing them. */
export interface BodyFilter {
  /** The bytes to write for this read (undefined: nothing yet, they are held). */
  pass(chunk: Buffer): Buffer | undefined;
  /** What is still held when the body ends (a stream cut mid-event): it still reaches the client. */
  end(): Buffer | undefined;
}

/**
 * Where the `,"usage":{...}` member of an event's JSON object is, when it is the object's last
 * member (as vLLM writes continuous usage stats, whitespace JSON allows aside): [its comma, the
 * byte after its object's `}`); undefined when the event has none there. Bytes [start, end) are
 * the event's lines. A `"usage"` that is not a member of the top-level object (one nested deeper
 * ends before the byte its object's `}` must be) is left where it is.
 */
export function usageMember(b: Buffer, start: number, end: number): readonly [number, number] | undefined {
  const close = skipSpaceBack(b, end - 1, start);
  if (close <= start || b[close] !== RBRACE) return undefined;
  const inner = skipSpaceBack(b, close - 1, start);
  if (inner <= start || b[inner] !== RBRACE) return undefined;
  const key = b.lastIndexOf(USAGE, inner);
  if (key <= start) return undefined;
  const colon = skipSpace(b, key + USAGE.length, inner);
  if (b[colon] !== COLON) return undefined;
  const open = skipSpace(b, colon + 1, inner);
  if (b[open] !== LBRACE || skipValue(b, open, inner + 1) !== inner + 1) return undefined;
  const comma = skipSpaceBack(b, key - 1, start);
  return comma >= start && b[comma] === COMMA ? [comma, inner + 1] : undefined;
}

/** An index found, or NONE for indexOf's -1. */
function orNone(i: number): number {
  return i === -1 ? NONE : i;
}

/**
 * Where in the read the events before its first `usage` (at `usage`, -1: none) end, found
 * without reading them: the read's end when it has no `usage` and ends with LF LF or CRLF CRLF
 * (a slow stream's reads do), else the byte after the last LF LF before that `usage`; 0 when
 * there is none.
 */
function blankLineBefore(read: Buffer, usage: number): number {
  const n = read.length;
  if (usage === -1 && afterBlankLine(read, n)) return n;
  const before = usage === -1 ? n : usage;
  // lastIndexOf counts a negative offset from the end: none before the read's second byte.
  const at = before < 2 ? -1 : read.lastIndexOf(BLANK_AFTER_LF, before - 2);
  return at === -1 ? 0 : at + 2;
}

function joined(parts: Buffer[]): Buffer | undefined {
  if (parts.length === 0) return undefined;
  return parts.length === 1 ? parts[0] : Buffer.concat(parts);
}

export function createUsageStrip(options: UsageStripOptions): BodyFilter {
  const splitter = new EventSplitter(options.maxEventBytes);
  const members = options.members === true;
  // The read being passed: what leaves for it is `out`, then the run of its bytes from `run` on
  // that passes unchanged. A removed event ends the run before it and starts the next after it.
  let chunk: Buffer = EMPTY;
  let out: Buffer[] = [];
  let run = 0;
  let carried = 0; // bytes of an event begun in earlier reads, held by the splitter
  // The last read ended with the CR of a removed event's blank line: a LF first in this read
  // completes that CRLF and goes with it.
  let strippedAtCR = false;
  // The first `[` in `bracketIn` at or after the last event's start (NONE: none): one search per
  // event, whose answer past it serves the next.
  let bracketIn: Buffer = EMPTY;
  let bracketAt = NONE;

  /**
   * Whether `"choices": []` is in bytes [start, end) of b: what an event must have to be looked at
   * further, checked from each `[` forwards first (a token event's is followed by `{`).
   */
  const emptyChoices = (b: Buffer, start: number, end: number): boolean => {
    if (b !== bracketIn || bracketAt < start) {
      bracketIn = b;
      bracketAt = orNone(b.indexOf(LBRACKET, start));
    }
    for (; bracketAt < end; bracketAt = orNone(b.indexOf(LBRACKET, bracketAt + 1))) {
      const close = skipSpace(b, bracketAt + 1, end);
      if (close < end && b[close] === RBRACKET && choiceAt(b, start, end, bracketAt) === EMPTY_CHOICES) return true;
    }
    return false;
  };

  const sink: EventSink = {
    event(b, start, end, _firstEnd, lines, next) {
      const kind = emptyChoices(b, start, end) ? usageOnlyKind(b, start, end, lines) : NOT_USAGE_ONLY;
      const usage = kind !== NOT_USAGE_ONLY;
      const timed = kind === USAGE_ONLY_TIMED;
      if (b !== chunk) {
        // An event begun in earlier reads, joined alone (at 0, whatever its start after a
        // byte-order mark): its held bytes were not passed yet; it ends in this read at `to`.
        const to = next - carried;
        strippedAtCR = usage && to === chunk.length && chunk[to - 1] === CR;
        if (usage) {
          options.stripped(next - start, timed);
          if (start > 0) out.push(b.subarray(0, start)); // a byte-order mark before it stays
          run = to;
          return;
        }
        const member = members ? usageMember(b, start, end) : undefined;
        if (member === undefined) {
          out.push(b.subarray(0, carried)); // then this read's part, with the run
          return;
        }
        // Around the member: what came before it, and after it up to the end of the held bytes
        // (the run goes on in this read from the member's end or from 0).
        out.push(b.subarray(0, member[0]));
        if (member[1] < carried) out.push(b.subarray(member[1], carried));
        run = member[1] < carried ? 0 : member[1] - carried;
        return;
      }
      strippedAtCR = usage && next === chunk.length && chunk[next - 1] === CR;
      if (!usage) {
        const member = members ? usageMember(b, start, end) : undefined;
        if (member === undefined) return;
        if (member[0] > run) out.push(chunk.subarray(run, member[0]));
        run = member[1];
        return;
      }
      options.stripped(next - start, timed);
      if (start > run) out.push(chunk.subarray(run, start));
      run = next;
    },
    oversized(held) {
      // Too large to be the usage-only chunk: what was held of it passes now, the rest as it comes.
      out.push(...held);
    },
    release(held, b, from) {
      // An event whose first bytes show a choice is not the usage-only chunk: it goes on as it
      // comes, as any read's bytes do, not held back until its end. One begun in earlier reads is
      // looked at joined with this read's part, and only while it is small: joined at every read,
      // a large event would be copied over and over (it is held, as any event, up to the cap).
      if (members || (held.length > 0 && splitter.heldLength > RELEASE_HELD_MAX)) return false;
      const bytes = held.length === 0 ? b : Buffer.concat([...held, b.subarray(from)]);
      const at = held.length === 0 ? from : 0;
      const shown = choicesIn(bytes, at, bytes.length, bytes.indexOf(LBRACKET, at));
      if ((shown & SOME_CHOICE) === 0) return false;
      out.push(...held);
      return true;
    },
  };

  return {
    pass(read: Buffer): Buffer | undefined {
      chunk = read;
      out = [];
      run = 0;
      carried = splitter.heldLength;
      if (strippedAtCR) {
        strippedAtCR = false;
        if (read[0] === LF) {
          options.stripped(1, false);
          run = 1;
        }
      }
      // No event before a read's first `usage` can be the usage-only chunk (with nothing held
      // from earlier reads): the splitter passes over them, from the blank line before it (or
      // the read's last), one byte search where it read each event. A token that says "usage"
      // only ends the passing over there.
      const from = carried === 0 ? blankLineBefore(read, read.indexOf(USAGE_NAME)) : 0;
      const heldFrom = splitter.feed(read, sink, from);
      const parts = out;
      out = [];
      chunk = EMPTY;
      bracketIn = EMPTY; // nothing of this read kept alive while the stream waits
      if (run === 0 && parts.length === 0 && heldFrom === read.length) return read;
      if (heldFrom > run) parts.push(read.subarray(run, heldFrom));
      return joined(parts);
    },
    end(): Buffer | undefined {
      return splitter.rest();
    },
  };
}
