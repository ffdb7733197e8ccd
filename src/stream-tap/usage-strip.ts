// Removes the usage-only chunk that injected usage produced, from the bytes going to the
// client: every other byte passes unchanged and in order. It works on what one upstream read
// brought and gives back what to write for it, once: a read that starts and ends on an event
// boundary and holds no usage-only chunk (the usual case) is given back as the very Buffer it
// came in, so the relay writes it as it writes any other read. Events are cut at their blank line; an event's
// bytes are held only until that event is complete. An event that grows past the cap is passed
// on as its bytes come, unheld, and stripping resumes after it: the usage-only chunk infermeter
// asked for (small, and last) is still removed from such a stream.

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

/** What the relay runs the bytes of one upstream read through before writing them. */
export interface BodyFilter {
  /** The bytes to write for this read (undefined: nothing yet, they are held). */
  pass(chunk: Buffer): Buffer | undefined;
  /** What is still held when the body ends (a stream cut mid-event): it still reaches the client. */
  end(): Buffer | undefined;
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

function joined(parts: Buffer[]): Buffer | undefined {
  if (parts.length === 0) return undefined;
  return parts.length === 1 ? parts[0] : Buffer.concat(parts);
}

export function createUsageStrip(options: UsageStripOptions): BodyFilter {
  let held: Buffer[] = []; // bytes of the current, incomplete event, from earlier reads
  let heldLength = 0;
  let lineLength = 0; // bytes of the current line so far, terminator excluded
  let afterCR = false; // the last byte was a CR (a LF next completes a CRLF)
  let boundaryAtCR = false; // that CR ended an event: a LF right after belongs to it
  let oversized = false; // the current event outgrew the cap: its bytes pass as they come
  let lastStripped = false;

  return {
    pass(chunk: Buffer): Buffer | undefined {
      // What leaves for this read: `out`, then the run of this chunk's bytes from `run` on that
      // passes unchanged. A removed event ends the run before it and starts the next after it.
      const out: Buffer[] = [];
      let run = 0;
      let start = 0; // first byte of the current event within this chunk
      const cut = (from: number, to: number): void => {
        if (to > run) out.push(chunk.subarray(run, to));
        run = from;
      };
      // Native scans find the line ends; only terminators are looked at byte by byte, and only an
      // event that holds "usage" is looked into.
      let nextCR = chunk.indexOf(CR);
      let nextUsage = chunk.indexOf(USAGE);
      for (let i = 0; i < chunk.length; i++) {
        const b = chunk[i]!;
        if (b !== LF && b !== CR && !boundaryAtCR) {
          if (nextCR !== -1 && nextCR < i) nextCR = chunk.indexOf(CR, i);
          const lf = chunk.indexOf(LF, i);
          const end = nextCR !== -1 && (lf === -1 || nextCR < lf) ? nextCR : lf === -1 ? chunk.length : lf;
          afterCR = false;
          lineLength += end - i;
          i = end - 1;
          continue;
        }
        if (boundaryAtCR) {
          boundaryAtCR = false;
          if (b === LF) {
            // The LF of the CRLF that ended the previous event belongs to it: passed with the
            // run, or removed with it.
            if (lastStripped) {
              options.stripped(1);
              cut(i + 1, i);
            }
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
        if (oversized) {
          // The end of an event too large to be the usage-only chunk: it passed as it came.
          oversized = false;
          lastStripped = false;
        } else if (heldLength === 0) {
          if (nextUsage !== -1 && nextUsage < start) nextUsage = chunk.indexOf(USAGE, start);
          lastStripped = nextUsage !== -1 && nextUsage < i && isUsageOnlyEvent(chunk.subarray(start, i + 1));
          if (lastStripped) {
            options.stripped(i + 1 - start);
            cut(i + 1, start);
          }
        } else {
          // An event begun in an earlier read (so `start` and `run` are 0 here).
          const event = Buffer.concat([...held, chunk.subarray(0, i + 1)], heldLength + i + 1);
          lastStripped = isUsageOnlyEvent(event);
          if (lastStripped) {
            options.stripped(event.length);
            run = i + 1;
          } else {
            out.push(...held);
          }
          held = [];
          heldLength = 0;
        }
        start = i + 1;
        if (b === CR) boundaryAtCR = true;
      }
      if (start < chunk.length && !oversized) {
        // An incomplete event: held (a copy: a view would keep the whole socket read buffer
        // alive while the event waits), unless it outgrows the cap.
        if (heldLength + chunk.length - start > options.maxEventBytes) {
          oversized = true;
          out.push(...held);
          held = [];
          heldLength = 0;
        } else {
          cut(chunk.length, start);
          const rest = Buffer.from(chunk.subarray(start));
          held.push(rest);
          heldLength += rest.length;
          return joined(out);
        }
      }
      if (run === 0 && out.length === 0) return chunk;
      cut(chunk.length, chunk.length);
      return joined(out);
    },
    end(): Buffer | undefined {
      const rest = joined(held);
      held = [];
      heldLength = 0;
      return rest;
    },
  };
}
