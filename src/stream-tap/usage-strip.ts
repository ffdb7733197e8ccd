// Removes the usage-only chunk that injected usage produced, from the bytes going to the
// client: every other byte passes unchanged and in order. It works on what one upstream read
// brought and gives back what to write for it, once: a read that ends on an event boundary and
// holds no usage-only chunk (the usual case) is given back as the very Buffer it came in, and a
// read with one removed as views of it around the gap (one copy only where two pieces must
// become one write), so the relay writes it as it writes any other read. Events are cut by the
// event splitter (event-splitter.ts, the tap's own); an event's bytes are held only until that
// event is complete. An event that grows past the cap is passed on as its bytes come, unheld,
// and stripping resumes after it: the usage-only chunk infermeter asked for (small, and last)
// is still removed from such a stream.
import { EventSplitter, type EventSink } from './event-splitter.ts';
import { sameBytes } from '../measure/skim-event.ts';

const LF = 0x0a;
const CR = 0x0d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const COLON = 0x3a;
// Only an event with an empty "choices" and a "usage" key is parsed; every other event is passed
// without JSON.parse. Whitespace JSON allows is allowed (Python's json.dumps writes `": "`).
const CHOICES = Buffer.from('"choices"');
const USAGE = Buffer.from('"usage"');
const EMPTY = Buffer.alloc(0);

export interface UsageStripOptions {
  readonly maxEventBytes: number;
  /** Called with each removed event's byte length. */
  readonly stripped: (bytes: number) => void;
}

/** What the relay runs the bytes of one upstream read through before writing them. */
export interface BodyFilter {
  /** The bytes to write for this read (undefined: nothing yet, they are held). */
  pass(chunk: Buffer): Buffer | undefined;
  /** What is still held when the body ends (a stream cut mid-event): it still reaches the client. */
  end(): Buffer | undefined;
}

/**
 * Is this complete SSE event a usage-only chunk: `choices: []` and a usage object? Its lines
 * are bytes [start, end) of `event` (the whole Buffer by default, its blank line may be in it).
 */
export function isUsageOnlyEvent(event: Buffer, start = 0, end = event.length): boolean {
  if (!hasEmptyChoices(event, start, end)) return false;
  const usage = event.indexOf(USAGE, start);
  if (usage === -1 || usage >= end) return false;
  const data: string[] = [];
  for (const line of event.toString('utf8', start, end).split(/\r\n|\r|\n/)) {
    if (line.startsWith('data:')) data.push(line.slice(line.charCodeAt(5) === 0x20 ? 6 : 5));
    else if (line !== '' && !line.startsWith(':')) return false; // event:, id: ... keep such events
  }
  if (data.length === 0) return false;
  try {
    const p = JSON.parse(data.join('\n')) as { choices?: unknown; usage?: unknown };
    return Array.isArray(p.choices) && p.choices.length === 0 && typeof p.usage === 'object' && p.usage !== null;
  } catch {
    return false;
  }
}

/**
 * Whether `"choices"` is followed, whitespace aside, by `: []` somewhere in [start, end). Found
 * from each `[` (a byte search: a token event has one or two), looking forwards for `]` and back
 * for `"choices":`, rather than by searching for the name (a slower search per event).
 */
function hasEmptyChoices(event: Buffer, start: number, end: number): boolean {
  for (let at = event.indexOf(LBRACKET, start); at !== -1 && at < end; at = event.indexOf(LBRACKET, at + 1)) {
    const close = skipSpace(event, at + 1, end);
    if (close >= end || event[close] !== RBRACKET) continue;
    let i = skipSpaceBack(event, at - 1, start);
    if (i < start || event[i] !== COLON) continue;
    i = skipSpaceBack(event, i - 1, start) - CHOICES.length + 1;
    if (i >= start && sameBytes(event, i, CHOICES)) return true;
  }
  return false;
}

/** The last index at or before `from` (and at or after `start`) that is not whitespace; start - 1 if none. */
function skipSpaceBack(bytes: Buffer, from: number, start: number): number {
  let i = from;
  while (i >= start && (bytes[i] === 0x20 || bytes[i] === 0x09 || bytes[i] === LF || bytes[i] === CR)) i--;
  return i;
}

function skipSpace(bytes: Buffer, from: number, end: number): number {
  let i = from;
  while (i < end && (bytes[i] === 0x20 || bytes[i] === 0x09 || bytes[i] === LF || bytes[i] === CR)) i++;
  return i;
}

function joined(parts: Buffer[]): Buffer | undefined {
  if (parts.length === 0) return undefined;
  return parts.length === 1 ? parts[0] : Buffer.concat(parts);
}

export function createUsageStrip(options: UsageStripOptions): BodyFilter {
  const splitter = new EventSplitter(options.maxEventBytes);
  // The read being passed: what leaves for it is `out`, then the run of its bytes from `run` on
  // that passes unchanged. A removed event ends the run before it and starts the next after it.
  let chunk: Buffer = EMPTY;
  let out: Buffer[] = [];
  let run = 0;
  let carried = 0; // bytes of an event begun in earlier reads, held by the splitter
  let carriedSeen = false; // that event was reported in this read
  // The last read ended with the CR of a removed event's blank line: a LF first in this read
  // completes that CRLF and goes with it.
  let strippedAtCR = false;

  const sink: EventSink = {
    event(b, start, end, _firstEnd, _lines, next) {
      const usage = isUsageOnlyEvent(b, start, end);
      // In a read that completed a held event, b is the held bytes joined with the read.
      const offset = b === chunk ? 0 : carried;
      const from = start - offset;
      const to = next - offset;
      strippedAtCR = usage && to === chunk.length && chunk[to - 1] === CR;
      if (offset > 0 && !carriedSeen) {
        // The first event of the joined bytes, begun in an earlier read (at 0, whatever its
        // start after a byte-order mark): its held bytes were not passed yet.
        carriedSeen = true;
        if (usage) {
          options.stripped(next - start);
          if (start > 0) out.push(b.subarray(0, start)); // a byte-order mark before it stays
          run = to;
        } else out.push(b.subarray(0, carried)); // then this read's part, with the run
        return;
      }
      if (!usage) return;
      options.stripped(to - from);
      if (from > run) out.push(chunk.subarray(run, from));
      run = to;
    },
    oversized(held) {
      // Too large to be the usage-only chunk: what was held of it passes now, the rest as it comes.
      out.push(...held);
    },
  };

  return {
    pass(read: Buffer): Buffer | undefined {
      chunk = read;
      out = [];
      run = 0;
      carried = splitter.heldLength;
      carriedSeen = false;
      if (strippedAtCR) {
        strippedAtCR = false;
        if (read[0] === LF) {
          options.stripped(1);
          run = 1;
        }
      }
      const heldFrom = splitter.feed(read, sink);
      const parts = out;
      out = [];
      chunk = EMPTY;
      if (run === 0 && parts.length === 0 && heldFrom === read.length) return read;
      if (heldFrom > run) parts.push(read.subarray(run, heldFrom));
      return joined(parts);
    },
    end(): Buffer | undefined {
      return splitter.rest();
    },
  };
}
