// Cuts a text/event-stream body into its events on the bytes, as they come in reads cut
// anywhere: the one splitter of the response tap (which reads each event) and the usage strip
// (which removes one). An event ends at a blank line; any of LF, CR and CRLF ends a line (a CRLF
// split across two reads is one line end); a byte-order mark at the stream's start is not part of
// its first line. No decoding: CR and LF never occur inside a UTF-8 character, so the lines are
// found on the bytes and only what a reader needs is decoded. A complete event is handed over
// where it lies in the read (no copy); only an event still incomplete at a read's end is copied
// and held, at most up to a cap, and joined once with the bytes of the read that ends it.
const LF = 0x0a;
const CR = 0x0d;
/** Larger than any index: "no such byte in this read". */
const NONE = 0x7fffffff;

export interface EventSink {
  /**
   * One complete event: its lines are bytes [start, end) of `b` (the blank line that ends it
   * excluded), `lines` of them, the first ending at `firstEnd` (end: a single line); its bytes
   * in the stream run to `next`, the blank line included. `b` is the read itself, or, for an
   * event begun in earlier reads, that event alone: its held bytes joined with this read's up to
   * its end (`next` is then b.length, and the first `heldLength` bytes of `b`, as it was before
   * this read, came before it).
   */
  event(b: Buffer, start: number, end: number, firstEnd: number, lines: number, next: number): void;
  /**
   * The incomplete event at the end of this read, with what was held of it, is over the cap:
   * `held` (copies from earlier reads) is given back, nothing of that event is held any more,
   * and the splitter looks only for its end, reporting nothing of it.
   */
  oversized(held: readonly Buffer[]): void;
  /**
   * Whether to let go of the incomplete event at the end of this read, bytes [from, end) of `b`
   * after `held` (copies from earlier reads; none is over the cap): true, and nothing of it is held
   * any more and, as past the cap, only its end is looked for, nothing of it reported. Absent:
   * every event is held to its end.
   */
  release?(held: readonly Buffer[], b: Buffer, from: number): boolean;
}

export class EventSplitter {
  readonly #maxEventBytes: number;
  /** Copies of the current incomplete event's bytes from earlier reads, from its first byte. */
  #held: Buffer[] = [];
  #heldLength = 0;
  /** The last byte read so far ended a line (so a line end next is a blank line). */
  #atLineStart = true;
  /** The last read ended with a CR: a LF first in this one is the rest of that CRLF. */
  #afterCR = false;
  /** A held byte may be a CR (else the joined event needs no search for one). */
  #heldCR = false;
  /** Inside an event over the cap: its bytes are neither held nor reported, up to its end. */
  #skipping = false;
  /** Nothing but the stream's first event can begin with the byte-order mark. */
  #streamStart = true;

  constructor(maxEventBytes: number) {
    this.#maxEventBytes = maxEventBytes;
  }

  /** Bytes held from earlier reads: those of an event not complete yet. */
  get heldLength(): number {
    return this.#heldLength;
  }

  /**
   * Reports every event that completes in this read; returns where in `chunk` the bytes it
   * now holds (copied) begin: those of the incomplete event it ends with (chunk.length: none,
   * also when that event is over the cap and so not held).
   *
   * `start`, with nothing held: the bytes before it end with a blank line (LF LF or CRLF CRLF)
   * and the sink has no use for their events (the usage strip: none of them has `usage`), so they
   * are passed over unreported. The byte after such a blank line is an event's boundary whatever
   * came before, in this read or the last (an event skipped past the cap or let go, a CRLF cut in
   * two): the splitter starts there as at any boundary. Any other `start` is not used.
   */
  feed(chunk: Buffer, sink: EventSink, start = 0): number {
    if (chunk.length === 0) return 0;
    let p = 0;
    if (start > 1 && this.#heldLength === 0 && afterBlankLine(chunk, start)) {
      this.#skipping = false;
      this.#afterCR = false;
      this.#streamStart = false;
      p = start;
    }
    if (this.#afterCR) {
      this.#afterCR = false;
      if (chunk[0] === LF) p = 1; // the rest of a CRLF: belongs to the line (or event) before
    }
    this.#afterCR = chunk[chunk.length - 1] === CR;
    // CR line ends are rare: one search per read, whose answer every later search starts from
    // (none again in a read without a CR).
    let cr = orNone(chunk.indexOf(CR, p));
    if (this.#skipping || this.#heldLength > 0) {
      const next = this.#endOf(chunk, p, cr);
      if (next === -1) {
        if (this.#skipping) return chunk.length;
        // All of this read belongs to the held event (a CRLF's LF first in it too).
        this.#hold(chunk, 0, cr !== NONE, sink);
        return this.#skipping ? chunk.length : 0;
      }
      if (this.#skipping) {
        this.#skipping = false;
        p = next;
        if (cr < p) cr = orNone(chunk.indexOf(CR, p));
      } else {
        // The held event ends at `next`: its bytes, those held and this read's up to there, are
        // joined once and read as one event; the rest of the read is read in place.
        const b = Buffer.allocUnsafe(this.#heldLength + next);
        let at = 0;
        for (const held of this.#held) at += held.copy(b, at);
        chunk.copy(b, at, 0, next);
        const heldCR = this.#heldCR;
        this.#held = [];
        this.#heldLength = 0;
        this.#heldCR = false;
        this.#scan(b, 0, heldCR || cr < next ? orNone(b.indexOf(CR)) : NONE, sink);
        p = next;
        if (cr < p) cr = orNone(chunk.indexOf(CR, p));
      }
    }
    const from = this.#scan(chunk, p, cr, sink);
    if (from === chunk.length) return from;
    this.#hold(chunk, from, cr !== NONE, sink);
    return this.#skipping ? chunk.length : from;
  }

  /** The bytes held (an event cut before its end), handed back; nothing is held after. */
  rest(): Buffer | undefined {
    const held = this.#held;
    this.#held = [];
    this.#heldLength = 0;
    this.#heldCR = false;
    if (held.length === 0) return undefined;
    return held.length === 1 ? held[0] : Buffer.concat(held);
  }

  /**
   * Holds bytes [from, end) of `chunk`, the incomplete event's, unless the event outgrew the cap or
   * the sink lets it go; `maybeCR`: the read has a CR (perhaps in those bytes).
   */
  #hold(chunk: Buffer, from: number, maybeCR: boolean, sink: EventSink): void {
    const last = chunk[chunk.length - 1];
    this.#atLineStart = last === LF || last === CR;
    const over = this.#heldLength + chunk.length - from > this.#maxEventBytes;
    if (over || sink.release?.(this.#held, chunk, from) === true) {
      const held = this.#held;
      this.#held = [];
      this.#heldLength = 0;
      this.#heldCR = false;
      this.#skipping = true;
      this.#streamStart = false;
      if (over) sink.oversized(held);
      return;
    }
    // A copy of its own: a view would keep the whole socket read buffer (up to 64 KiB) alive per
    // stream, a pooled copy its pool slab, for as long as the stream waits (a slow client).
    const copy = Buffer.allocUnsafeSlow(chunk.length - from);
    chunk.copy(copy, 0, from);
    this.#held.push(copy);
    this.#heldLength += copy.length;
    if (maybeCR) this.#heldCR = true;
  }

  /**
   * Where the held (or skipped) event ends in `chunk`, scanning from `p` with the line state
   * the last read left (`firstCR`: the first CR from `p`, or NONE): the index after its blank
   * line, or -1 when this read does not end it.
   */
  #endOf(chunk: Buffer, p: number, firstCR: number): number {
    let at = p;
    let atLineStart = this.#atLineStart;
    let lf = -1;
    let cr = firstCR;
    while (at < chunk.length) {
      // Each search again only once passed: linear in the read, however many lines it holds.
      if (lf < at) lf = orNone(chunk.indexOf(LF, at));
      if (cr < at) cr = orNone(chunk.indexOf(CR, at));
      const eol = Math.min(lf, cr);
      if (eol === NONE) {
        this.#atLineStart = false;
        return -1;
      }
      const after = eol + (chunk[eol] === CR && chunk[eol + 1] === LF ? 2 : 1);
      if (eol === at && atLineStart) return after;
      atLineStart = true;
      at = after;
    }
    this.#atLineStart = atLineStart;
    return -1;
  }

  /**
   * Reports the events of `b` from `p` (an event's boundary; `firstCR`: the first CR from `p`,
   * or NONE); returns where the incomplete event it ends with begins (b.length: none).
   */
  #scan(b: Buffer, p: number, firstCR: number, sink: EventSink): number {
    const length = b.length;
    let cr = firstCR;
    let lf = orNone(b.indexOf(LF, p));
    while (p < length) {
      let eol = Math.min(lf, cr);
      if (eol === NONE) return p;
      let start = p;
      let next = eol + 1;
      if (b[eol] === CR && b[next] === LF) next++;
      if (eol === start) {
        // A blank line between events: it ends no event.
        this.#streamStart = false;
        p = next;
      } else if (b[eol] === LF && b[next] === LF) {
        // The fast byte path, the shape engines send: one line ended by LF, then the blank line
        // (`data: {...}\n\n`), found with one search for the LF.
        if (this.#streamStart) start = this.#afterBom(b, start);
        sink.event(b, start, eol, eol, 1, next + 1);
        p = next + 1;
      } else {
        // The general path: lines up to a blank line, any line ends.
        const firstEnd = eol;
        let lines = 1;
        let end = eol;
        let at = next;
        for (;;) {
          if (lf < at) lf = orNone(b.indexOf(LF, at));
          if (cr < at) cr = orNone(b.indexOf(CR, at));
          eol = Math.min(lf, cr);
          if (eol === NONE) return start; // incomplete
          const after = eol + (b[eol] === CR && b[eol + 1] === LF ? 2 : 1);
          if (eol === at) {
            if (this.#streamStart) start = this.#afterBom(b, start);
            sink.event(b, start, end, firstEnd, lines, after);
            p = after;
            break;
          }
          lines++;
          end = eol;
          at = after;
        }
      }
      if (lf < p) lf = orNone(b.indexOf(LF, p));
      if (cr < p) cr = orNone(b.indexOf(CR, p));
    }
    return p;
  }

  /** The stream's first event: past a byte-order mark it begins with. */
  #afterBom(b: Buffer, start: number): number {
    this.#streamStart = false;
    return b[start] === 0xef && b[start + 1] === 0xbb && b[start + 2] === 0xbf ? start + 3 : start;
  }
}

/** Bytes [0, at) end with LF LF or CRLF CRLF: a line's end and a blank line, whatever came before. */
export function afterBlankLine(b: Buffer, at: number): boolean {
  return b[at - 1] === LF && (b[at - 2] === LF || (b[at - 2] === CR && b[at - 3] === LF && b[at - 4] === CR));
}

/** An index found, or NONE for indexOf's -1. */
function orNone(i: number): number {
  return i === -1 ? NONE : i;
}
