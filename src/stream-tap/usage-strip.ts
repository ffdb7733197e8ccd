// Removes the usage-only chunk that injected usage produced, from the bytes going to the
// client: every other byte passes unchanged and in order. Events are cut at their blank line;
// the bytes of an event are held only until that event is complete (a chunk that ends on an
// event boundary, the usual case, passes through as the same Buffer). An event that grows past
// the cap is passed on as its bytes come, unheld, and stripping resumes after it: the usage-only
// chunk infermeter asked for (small, and last) is still removed from such a stream.
import { Transform, type TransformCallback } from 'node:stream';

const LF = 0x0a;
const CR = 0x0d;
// Only an event with an empty "choices" and a "usage" key is parsed; every other event is passed
// without JSON.parse. Whitespace JSON allows is allowed (Python's json.dumps writes `": "`).
const CHOICES = Buffer.from('"choices"');
const USAGE = Buffer.from('"usage"');

export interface UsageStripOptions {
  readonly maxEventBytes: number;
  /** Called with each removed event's byte length. */
  readonly stripped: (bytes: number) => void;
}

/** Is this complete SSE event (bytes) a usage-only chunk: `choices: []` and a usage object? */
export function isUsageOnlyEvent(event: Buffer): boolean {
  if (!hasEmptyChoices(event) || event.indexOf(USAGE) === -1) return false;
  const data: string[] = [];
  for (const line of event.toString('utf8').split(/\r\n|\r|\n/)) {
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

/** Whether `"choices"` is followed, whitespace aside, by `: []` somewhere in the event. */
function hasEmptyChoices(event: Buffer): boolean {
  for (let at = event.indexOf(CHOICES); at !== -1; at = event.indexOf(CHOICES, at + 1)) {
    let i = skipSpace(event, at + CHOICES.length);
    if (event[i] !== 0x3a) continue;
    i = skipSpace(event, i + 1);
    if (event[i] !== 0x5b) continue;
    if (event[skipSpace(event, i + 1)] === 0x5d) return true;
  }
  return false;
}

function skipSpace(bytes: Buffer, from: number): number {
  let i = from;
  while (i < bytes.length && (bytes[i] === 0x20 || bytes[i] === 0x09 || bytes[i] === LF || bytes[i] === CR)) i++;
  return i;
}

export function createUsageStrip(options: UsageStripOptions): Transform {
  let held: Buffer[] = []; // bytes of the current, incomplete event
  let heldLength = 0;
  let lineLength = 0; // bytes of the current line so far, terminator excluded
  let afterCR = false; // the last byte was a CR (a LF next completes a CRLF)
  let boundaryAtCR = false; // that CR ended an event: a LF right after belongs to it
  let oversized = false; // the current event outgrew the cap: its bytes pass as they come
  let lastStripped = false;

  function emitEvent(self: Transform, event: Buffer): void {
    lastStripped = isUsageOnlyEvent(event);
    if (lastStripped) options.stripped(event.length);
    else self.push(event);
  }

  return new Transform({
    transform(this: Transform, chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
      let start = 0; // first byte of chunk not yet emitted or held
      for (let i = 0; i < chunk.length; i++) {
        const b = chunk[i]!;
        if (boundaryAtCR) {
          boundaryAtCR = false;
          if (b === LF) {
            // The LF of the CRLF that ended the previous event belongs to it: passed on its own,
            // or removed with it.
            if (lastStripped) options.stripped(1);
            else this.push(chunk.subarray(start, i + 1));
            start = i + 1;
            afterCR = false;
            continue;
          }
        }
        let lineEnded = false;
        if (b === LF) {
          if (afterCR) afterCR = false; // second half of CRLF: the line ended at the CR
          else lineEnded = true;
        } else if (b === CR) {
          afterCR = true;
          lineEnded = true;
        } else {
          afterCR = false;
          lineLength++;
        }
        if (!lineEnded) continue;
        if (lineLength > 0) {
          lineLength = 0;
          continue;
        }
        // A blank line: the event ends after this terminator.
        const piece = chunk.subarray(start, i + 1);
        start = i + 1;
        if (oversized) {
          // The end of an event too large to be the usage-only chunk.
          oversized = false;
          lastStripped = false;
          this.push(piece);
        } else {
          const event = heldLength === 0 ? piece : Buffer.concat([...held, piece], heldLength + piece.length);
          held = [];
          heldLength = 0;
          emitEvent(this, event);
        }
        if (b === CR) boundaryAtCR = true;
      }
      if (start < chunk.length) {
        if (oversized) {
          this.push(chunk.subarray(start));
        } else {
          // A copy: a view would keep the whole socket read buffer alive while the event waits.
          const rest = Buffer.from(chunk.subarray(start));
          held.push(rest);
          heldLength += rest.length;
          if (heldLength > options.maxEventBytes) {
            // Past the cap: what is held goes on, and the rest of this event as it comes.
            oversized = true;
            for (const h of held) this.push(h);
            held = [];
            heldLength = 0;
          }
        }
      }
      done();
    },
    flush(done: TransformCallback) {
      // A stream that ends mid-event: its bytes still reach the client.
      for (const h of held) this.push(h);
      done();
    },
  });
}
