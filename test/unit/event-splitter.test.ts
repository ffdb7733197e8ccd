// The one event splitter of the tap and the strip (stream-tap/event-splitter.ts), with its field
// reader (event-fields.ts): the events and fields it finds are those eventsource-parser (the
// reference SSE parser, fed the TextDecoder's text) dispatches, for streams of every form the
// SSE specification allows cut at every byte and at random; the fast byte path's edges; the cap.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createParser } from 'eventsource-parser';
import { readEventFields } from '../../src/stream-tap/event-fields.ts';
import { EventSplitter, type EventSink } from '../../src/stream-tap/event-splitter.ts';
import { rechunk, seededRandom } from '../helpers/random.ts';

interface Found {
  data: string;
  name: string | undefined;
}

interface Split {
  events: Found[];
  errors: number;
  /** Per event: whether it came as a view of its read (not joined from held bytes). */
  inPlace: boolean[];
  /** Per event: its lines' count and the first line's end, as reported. */
  shapes: Array<[number, number, number, number]>;
  oversized: number;
}

/** The splitter over these reads, then a blank line (a last event without one still counts). */
function split(chunks: readonly Buffer[], maxEventBytes = 1 << 20): Split {
  const out: Split = { events: [], errors: 0, inPlace: [], shapes: [], oversized: 0 };
  const splitter = new EventSplitter(maxEventBytes);
  let read: Buffer | undefined;
  const sink: EventSink = {
    event(b, start, end, firstEnd, lines, next) {
      assert.ok(start <= end && end <= firstEnd + (lines === 1 ? 0 : Infinity) && firstEnd <= end && end < next && next <= b.length);
      const fields = readEventFields(b, start, end);
      if (fields.error) out.errors++;
      if (fields.data !== undefined) out.events.push({ data: fields.data, name: fields.name });
      out.inPlace.push(b === read);
      out.shapes.push([start, end, firstEnd, lines]);
    },
    oversized() {
      out.oversized++;
    },
  };
  for (const chunk of [...chunks, Buffer.from('\n\n')]) {
    read = chunk;
    const from = splitter.feed(chunk, sink);
    assert.ok(from >= 0 && from <= chunk.length);
    assert.ok(splitter.heldLength >= chunk.length - from || out.oversized > 0);
  }
  return out;
}

/** eventsource-parser's events for the same reads, as the tap read them before the splitter. */
function reference(chunks: readonly Buffer[]): Found[] {
  const events: Found[] = [];
  const parser = createParser({ onEvent: (e) => events.push({ data: e.data, name: e.event }) });
  const decoder = new TextDecoder();
  for (const chunk of chunks) parser.feed(decoder.decode(chunk, { stream: true }));
  parser.feed(decoder.decode());
  parser.feed('\n\n');
  return events;
}

/** A random stream of every form: line ends, comments, fields, multi-line data, names, blank lines. */
function randomStream(random: () => number, events: number): Buffer {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const nl = () => pick(['\n', '\n', '\r\n', '\r']);
  let text = random() < 0.2 ? '\uFEFF' : '';
  for (let i = 0; i < events; i++) {
    const lines: string[] = [];
    const n = 1 + Math.floor(random() * 4);
    for (let j = 0; j < n; j++) {
      lines.push(
        pick([
          `data: {"choices":[{"delta":{"content":"é${i}.${j}"}}]}`,
          `data:${i}`,
          'data',
          'data:',
          'data: ',
          `event: name${j}`,
          'event:',
          'event',
          `id: ${i}`,
          'retry: 100',
          ': a comment',
          ':',
          'unknown: field',
          'error: {"code":400}',
          'data: 中文 ✓',
        ]),
      );
    }
    for (const line of lines) text += line + nl();
    text += nl();
    if (random() < 0.1) text += nl(); // a stray blank line
  }
  if (random() < 0.3) text += 'data: a last event without its blank line';
  return Buffer.from(text);
}

describe('event splitter', () => {
  it('finds the events eventsource-parser dispatches, in random streams of every form, cut at random', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const random = seededRandom(seed);
      const stream = randomStream(random, 1 + Math.floor(random() * 12));
      const expected = reference([stream]);
      for (const chunks of [[stream], rechunk(stream, random, 1 + Math.floor(random() * 40))]) {
        assert.deepEqual(split(chunks).events, expected, `seed ${seed}, ${chunks.length} reads: ${JSON.stringify(stream.toString())}`);
        assert.deepEqual(reference(chunks), expected, `the reference itself, seed ${seed}`);
      }
    }
  });

  it('finds the same events with a read cut at every byte (two reads, and one byte a read)', () => {
    const stream = Buffer.from(
      '\uFEFFdata: {"a":1}\n\n: ping\r\n\r\nevent: content_block_delta\r\ndata: {"b":"é"}\r\n\r\ndata: x\rdata: y\r\r' +
        'error: {"code":500}\n\ndata: [DONE]\n\n',
    );
    const whole = split([stream]);
    assert.deepEqual(whole.events, reference([stream]));
    assert.equal(whole.errors, 1);
    for (let at = 0; at <= stream.length; at++) {
      const two = split([stream.subarray(0, at), stream.subarray(at)]);
      assert.deepEqual([two.events, two.errors], [whole.events, whole.errors], `cut at ${at}`);
    }
    const bytes = split([...stream].map((b) => Buffer.from([b])));
    assert.deepEqual([bytes.events, bytes.errors], [whole.events, whole.errors], 'a byte a read');
  });

  it('treats LF, CR and CRLF alike, a CRLF split across reads as one line end', () => {
    for (const nl of ['\n', '\r', '\r\n']) {
      const stream = Buffer.from(`data: a${nl}data: b${nl}${nl}data: c${nl}${nl}`);
      assert.deepEqual(split([stream]).events, [
        { data: 'a\nb', name: undefined },
        { data: 'c', name: undefined },
      ]);
    }
    // The CR of a CRLF ends one read, its LF starts the next: not a blank line.
    const cut = split([Buffer.from('data: a\r'), Buffer.from('\ndata: b\r\n\r\n')]);
    assert.deepEqual(cut.events, [{ data: 'a\nb', name: undefined }]);
    const blank = split([Buffer.from('data: a\r\n\r'), Buffer.from('\ndata: b\r\n\r\n')]);
    assert.deepEqual(blank.events, [
      { data: 'a', name: undefined },
      { data: 'b', name: undefined },
    ]);
  });

  it('drops a byte-order mark at the stream start only, also split across reads', () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    const event = Buffer.from('data: x\n\n');
    for (let at = 0; at <= 4; at++) {
      const stream = Buffer.concat([bom, event]);
      assert.deepEqual(split([stream.subarray(0, at), stream.subarray(at)]).events, [{ data: 'x', name: undefined }], `cut at ${at}`);
    }
    // Anywhere else it is part of the line: a field named "\uFEFFdata", ignored.
    assert.deepEqual(split([Buffer.concat([event, bom, event])]).events, [{ data: 'x', name: undefined }]);
    assert.deepEqual(split([Buffer.from('\n'), Buffer.concat([bom, event])]).events, []);
  });

  it('skips comments and stray blank lines, reads an event of comments as no event', () => {
    const stream = Buffer.from('\n\n: keep-alive\n\n\n: a\n: b\ndata: x\n\n\r\n');
    assert.deepEqual(split([stream]).events, [{ data: 'x', name: undefined }]);
  });

  it("reads llama.cpp's error field, in an event with data or without", () => {
    assert.equal(split([Buffer.from('error: {"code":400,"message":"x"}\n\ndata: [DONE]\n\n')]).errors, 1);
    assert.equal(split([Buffer.from('error\r\n\r\n')]).errors, 1, 'the field with no value');
    assert.equal(split([Buffer.from('errors: x\n\n: error: x\n\ndata: error: x\n\n')]).errors, 0, 'other fields, a comment, data');
  });

  it('takes the fast byte path for one LF-ended line and hands it over in place', () => {
    const stream = Buffer.from('data: {"a":1}\n\ndata:{"b":2}\n\nevent: e\ndata: {}\n\n');
    const s = split([stream]);
    assert.deepEqual(s.inPlace, [true, true, true]);
    assert.deepEqual(s.shapes.slice(0, 3), [
      [0, 13, 13, 1],
      [15, 27, 27, 1],
      [29, 46, 37, 2],
    ]);
    // A LF then a CR: not the fast shape, the blank line is the CR.
    const mixed = split([Buffer.from('data: a\n\rdata: b\n\n')]);
    assert.deepEqual(mixed.events, [
      { data: 'a', name: undefined },
      { data: 'b', name: undefined },
    ]);
    // The fast shape's blank line in the next read.
    assert.deepEqual(split([Buffer.from('data: a\n'), Buffer.from('\ndata: b\n\n')]).events, [
      { data: 'a', name: undefined },
      { data: 'b', name: undefined },
    ]);
  });

  it('joins an event split across many reads once, and copies what it holds', () => {
    const data = 'x'.repeat(10_000);
    const stream = Buffer.from(`data: ${data}\ndata: ${data}\n\n`);
    const chunks = rechunk(stream, seededRandom(7), 100);
    const s = split(chunks);
    assert.deepEqual(s.events, [{ data: `${data}\n${data}`, name: undefined }]);
    assert.deepEqual(s.inPlace, [false]);
    const splitter = new EventSplitter(1 << 20);
    const read = Buffer.from('data: held');
    splitter.feed(read, { event() {}, oversized() {} });
    read.fill(0);
    assert.equal(splitter.rest()?.toString(), 'data: held', 'a copy, not a view of the read');
  });

  it('lets go of an incomplete event its sink releases: nothing of it held or reported, events after it found, at every cut', () => {
    for (const nl of ['\n', '\r\n', '\r']) {
      const stream = Buffer.from(`data: a${nl}${nl}data: let go${nl}data: x${nl}${nl}data: b${nl}${nl}`);
      const letGo = stream.indexOf('data: let go');
      for (let at = 1; at < stream.length; at++) {
        const reads = [stream.subarray(0, at), stream.subarray(at)];
        const found: string[] = [];
        const released: string[] = [];
        const splitter = new EventSplitter(1 << 20);
        const sink: EventSink = {
          event: (b, start, end) => found.push(readEventFields(b, start, end).data ?? ''),
          oversized: () => assert.fail('not over the cap'),
          release(held, b, from) {
            const bytes = Buffer.concat([...held, b.subarray(from)]).toString();
            if (!bytes.startsWith('data: let')) return false;
            released.push(bytes);
            return true;
          },
        };
        const heldFrom = reads.map((r) => splitter.feed(r, sink));
        const label = `${JSON.stringify(nl)} cut at ${at}`;
        if (at >= letGo + 'data: let'.length && at <= stream.indexOf('data: b') - nl.length) {
          assert.deepEqual(found, ['a', 'b'], label);
          assert.deepEqual(released, [stream.subarray(letGo, at).toString()], label);
          assert.equal(heldFrom[0], at, `${label}: nothing held`);
        } else assert.deepEqual(found, ['a', 'let go\nx', 'b'], label);
        assert.equal(splitter.heldLength, 0, label);
      }
    }
  });

  // The usage strip passes over a read's events up to its last blank line when none of them can
  // be what it removes: the splitter then starts there, whatever it was in (an event released or
  // over the cap, a CRLF cut in two), and finds from there what it finds without the start.
  it('starts a read after a blank line it is given, with nothing held: the events after it, the same state after', () => {
    const blankEnds = (b: Buffer): number[] => {
      const at: number[] = [];
      for (let i = 2; i <= b.length; i++) {
        if (b[i - 1] === 0x0a && (b[i - 2] === 0x0a || (i >= 4 && b[i - 2] === 0x0d && b[i - 3] === 0x0a && b[i - 4] === 0x0d))) at.push(i);
      }
      return at;
    };
    let started = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const random = seededRandom(seed);
      const stream = randomStream(random, 1 + Math.floor(random() * 12));
      const reads = [...rechunk(stream, random, 1 + Math.floor(random() * 200)), Buffer.from('\n\n')];
      const plain = new EventSplitter(1 << 20);
      const given = new EventSplitter(1 << 20);
      for (const [i, read] of reads.entries()) {
        const label = `seed ${seed}, read ${i}: ${JSON.stringify(read.toString())}`;
        const held = given.heldLength;
        const events = (s: EventSplitter, start: number): Array<[string, number]> => {
          const out: Array<[string, number]> = [];
          const from = s.feed(
            read,
            { event: (b, st, end, _f, _l, next) => out.push([b.subarray(st, end).toString(), b === read ? next : Infinity]), oversized() {} },
            start,
          );
          out.push(['held from', from]);
          return out;
        };
        // Any blank line's end, the last or not; and a start that is none (ignored).
        const ends = blankEnds(read);
        const start = ends.length === 0 ? Math.floor(random() * read.length) : ends[Math.floor(random() * ends.length)]!;
        const all = events(plain, 0);
        const after = events(given, start);
        const accepted = held === 0 && ends.includes(start);
        if (accepted) started++;
        const expected = accepted ? all.filter(([text, next]) => text === 'held from' || next > start) : all;
        assert.deepEqual(after, expected, label);
        assert.equal(given.heldLength, plain.heldLength, label);
      }
    }
    assert.ok(started > 300, `reads started after a blank line: ${started}`);
  });

  it('holds an event up to the cap; one byte over, gives back what it held and skips to its end', () => {
    const big = `data: ${'y'.repeat(100)}`;
    const after = 'data: after\n\n';
    for (const nl of ['\n', '\r\n']) {
      const head = Buffer.from(big + nl);
      const rest = Buffer.from(nl + after);
      const at = split([head, rest], head.length);
      assert.deepEqual([at.events.length, at.oversized], [2, 0], `cap = the held bytes, ${JSON.stringify(nl)}`);
      const over = split([head.subarray(0, 50), head.subarray(50), rest], head.length - 1);
      assert.equal(over.oversized, 1);
      assert.deepEqual(over.events, [{ data: 'after', name: undefined }], 'reading resumes after the event over the cap');
      const gave: Buffer[][] = [];
      const splitter = new EventSplitter(60);
      assert.equal(splitter.feed(head.subarray(0, 50), { event() {}, oversized: (h) => gave.push([...h]) }), 0);
      assert.equal(splitter.feed(head.subarray(50), { event() {}, oversized: (h) => gave.push([...h]) }), head.length - 50, 'not held: passes');
      assert.deepEqual(
        gave.map((h) => Buffer.concat(h).toString()),
        [head.subarray(0, 50).toString()],
      );
      assert.equal(splitter.heldLength, 0);
    }
    // An event whole in one read is never held, so never over the cap.
    assert.deepEqual(split([Buffer.from(`${big}\n\n`)], 16).events.length, 1);
  });
});
