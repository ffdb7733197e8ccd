import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createUsageStrip } from '../../src/stream-tap/usage-strip.ts';
import { ownStreams } from '../helpers/fixtures.ts';
import { rechunk, seededRandom } from '../helpers/random.ts';
import { sseBlocks } from '../helpers/tap-harness.ts';

/** The strip over these reads: what it gives back for each read (and at the end), joined. */
function strip(chunks: Buffer[], maxEventBytes = 1 << 20): { out: Buffer; stripped: number[]; writes: Array<Buffer | undefined> } {
  const stripped: number[] = [];
  const filter = createUsageStrip({ maxEventBytes, stripped: (n) => stripped.push(n) });
  const writes = chunks.map((c) => filter.pass(c));
  const rest = filter.end();
  const out = Buffer.concat([...writes, rest].filter((b): b is Buffer => b !== undefined));
  return { out, stripped, writes };
}

/** Whether the strip takes this whole event out: a usage-only chunk. */
const isUsageOnlyEvent = (event: Buffer): boolean => strip([event]).out.length === 0;

/** The stream as it would be without usage: the usage-only event's block removed. */
function withoutUsageEvent(bytes: Buffer): Buffer {
  return Buffer.concat(
    sseBlocks(bytes)
      .filter((b) => !(b.isEvent && /"choices":\[\],"usage":\{/.test(b.bytes.toString())))
      .map((b) => b.bytes),
  );
}

describe('usage strip', () => {
  it('removes exactly the usage-only chunk of every recorded stream, at any chunking', async () => {
    for (const fixture of ownStreams()) {
      const expected = withoutUsageEvent(fixture.bytes);
      for (let seed = 0; seed <= 20; seed++) {
        const chunks = seed === 0 ? [fixture.bytes] : rechunk(fixture.bytes, seededRandom(seed), seed % 2 === 0 ? 5 : 300);
        const { out, stripped } = strip(chunks);
        assert.ok(out.equals(expected), `${fixture.name} seed ${seed}`);
        assert.equal(
          stripped.reduce((a, b) => a + b, 0),
          fixture.bytes.length - expected.length,
        );
      }
    }
  });

  it('handles CRLF and bare CR line ends, split anywhere', async () => {
    for (const nl of ['\r\n', '\r']) {
      const a = `data: {"choices":[{"delta":{"content":"a"}}]}${nl}${nl}`;
      const usage = `data: {"choices":[],"usage":{"prompt_tokens":1}}${nl}${nl}`;
      const done = `data: [DONE]${nl}${nl}`;
      const input = Buffer.from(a + usage + done);
      for (let seed = 1; seed <= 30; seed++) {
        const { out } = strip(rechunk(input, seededRandom(seed), 4));
        assert.equal(out.toString(), a + done, `${JSON.stringify(nl)} seed ${seed}`);
      }
    }
  });

  // The splitter it shares with the tap (event-splitter.ts): a read cut at every byte of every
  // line-end form, a byte-order mark and comments around the usage-only chunk.
  it('removes the usage-only chunk and only it with a read cut at every byte, any line ends', () => {
    for (const nl of ['\n', '\r\n', '\r']) {
      const keep = `\uFEFF: hi${nl}${nl}data: {"choices":[{"delta":{"content":"a"}}]}${nl}${nl}${nl}`;
      const usage = `: before${nl}data: {"choices": [ ],${nl}data: "usage": {"prompt_tokens": 1}}${nl}${nl}`;
      const done = `data: [DONE]${nl}${nl}`;
      const input = Buffer.from(keep + usage + done);
      const expected = Buffer.from(keep + done);
      for (let at = 0; at <= input.length; at++) {
        const { out, stripped } = strip([input.subarray(0, at), input.subarray(at)]);
        assert.ok(out.equals(expected), `${JSON.stringify(nl)} cut at ${at}: ${JSON.stringify(out.toString())}`);
        assert.equal(
          stripped.reduce((a, b) => a + b, 0),
          Buffer.byteLength(usage),
        );
      }
      const bytes = strip([...input].map((b) => Buffer.from([b])));
      assert.ok(bytes.out.equals(expected), `${JSON.stringify(nl)}, a byte a read`);
    }
  });

  // A read's events before its first `usage` are passed over unread (the blank line before it
  // found by a byte search): a token that says "usage", the usage-only chunk in the read's middle
  // or cut across reads, in three reads cut anywhere, LF and CRLF.
  it('strips the same when it passes over the events before a read\'s first "usage", in three reads cut anywhere', () => {
    for (const nl of ['\n', '\r\n']) {
      const token = (text: string) => `data: {"choices":[{"delta":{"content":"${text}"}}]}${nl}${nl}`;
      const before = token('a') + token('b') + token('usage') + token('c');
      const usage = `data: {"choices":[],"usage":{"prompt_tokens":1}}${nl}${nl}`;
      const after = `data: [DONE]${nl}${nl}`;
      const input = Buffer.from(before + usage + after);
      const expected = Buffer.from(before + after);
      for (let i = 0; i <= input.length; i += 3) {
        for (let j = i; j <= input.length; j++) {
          const { out, stripped } = strip([input.subarray(0, i), input.subarray(i, j), input.subarray(j)]);
          assert.ok(out.equals(expected), `${JSON.stringify(nl)} cut at ${i} and ${j}: ${JSON.stringify(out.toString())}`);
          assert.equal(
            stripped.reduce((a, b) => a + b, 0),
            Buffer.byteLength(usage),
            `${JSON.stringify(nl)} cut at ${i} and ${j}`,
          );
        }
      }
    }
  });

  it("says whether a removed usage-only chunk carried the engine's timings", () => {
    const seen: Array<[number, boolean]> = [];
    const strip = createUsageStrip({ maxEventBytes: 1 << 16, stripped: (bytes, timings) => seen.push([bytes, timings]) });
    const plain = 'data: {"choices":[],"usage":{"prompt_tokens":1}}\n\n';
    const timed = 'data: {"choices":[],"usage":{"prompt_tokens":1},"timings":{"prompt_n":1,"predicted_n":2}}\n\n';
    // A token whose text says "timings" is no sign; nor is a string value.
    const token = 'data: {"choices":[{"delta":{"content":"\\"timings\\":{}"}}]}\n\n';
    const named = 'data: {"choices":[],"model":"\\"timings\\":{","usage":{"prompt_tokens":1}}\n\n';
    const out = strip.pass(Buffer.from(token + plain + timed + named));
    assert.equal(out!.toString(), token);
    assert.deepEqual(seen, [
      [plain.length, false],
      [timed.length, true],
      [named.length, false],
    ]);
  });

  it('keeps a byte-order mark before a usage-only first event', () => {
    const { out } = strip([Buffer.from('\uFEFFdata: {"choices":[],"usage":{"prompt_tokens":1}}\n\ndata: [DONE]\n\n')]);
    assert.equal(out.toString(), '\uFEFFdata: [DONE]\n\n');
  });

  it('gives back views of the read around a removed chunk, no copy', () => {
    const token = 'data: {"choices":[{"delta":{"content":"x"}}]}\n\n';
    const read = Buffer.from(`${token}data: {"choices":[],"usage":{"prompt_tokens":1}}\n\n`);
    const { writes } = strip([read]);
    assert.equal(writes[0]!.toString(), token);
    assert.equal(writes[0]!.buffer, read.buffer, 'a view of the read');
  });

  it('passes a chunk that ends on an event boundary as the same bytes, with nothing held', () => {
    const event = Buffer.from('data: {"choices":[{"delta":{"content":"x"}}]}\n\n');
    const twice = Buffer.concat([event, event]);
    const { out, writes } = strip([event, twice]);
    assert.ok(out.equals(Buffer.concat([event, twice])));
    assert.equal(writes[0], event, 'the very Buffer');
    assert.equal(writes[1], twice, 'the very Buffer');
  });

  // Issue 34: the strip once pushed each event on its own, so a read of ten events became ten
  // writes to the client where the relay writes one.
  it('gives back one buffer per read, whatever it removes from it', () => {
    const token = (i: number) => `data: {"choices":[{"delta":{"content":"t${i}"}}]}\n\n`;
    const usage = 'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":10}}\n\n';
    const read = Buffer.from(Array.from({ length: 10 }, (_, i) => token(i)).join('') + usage + 'data: [DONE]\n\n');
    const { writes, stripped } = strip([read]);
    assert.equal(writes.length, 1);
    assert.equal(writes[0]!.toString(), Array.from({ length: 10 }, (_, i) => token(i)).join('') + 'data: [DONE]\n\n');
    assert.deepEqual(stripped, [usage.length]);
  });

  // Issue 34: a read that ends inside a token event was held back from its last event's first
  // byte until the next read, and joined with it: every read of a fast stream was copied, and
  // that event's first bytes reached the client a read late.
  it('lets a token event go as its bytes come, once they show a choice; holds one only while they could be the usage-only chunk', () => {
    const token = 'data: {"id":"c","choices":[{"delta":{"content":"x"}}]}\n\n';
    const shown = token.indexOf('[{') + 2; // the first byte after the `[` that is not `]`
    for (let at = 1; at < token.length; at++) {
      const read = Buffer.from(token + token.slice(0, at));
      const { writes, out } = strip([read, Buffer.from(token.slice(at) + token)]);
      assert.ok(out.equals(Buffer.from(token + token + token)), `cut at ${at}`);
      if (at >= shown) assert.equal(writes[0], read, `cut at ${at}: the very read`);
      else assert.equal(writes[0]!.toString(), token, `cut at ${at}: the event's first bytes held`);
    }
  });

  it('decides an event the same whether it comes whole or cut at any byte, a repeated "choices" too', () => {
    const cases: Array<[string, boolean]> = [
      ['data: {"choices":[],"usage":{"prompt_tokens":1}}', true],
      ['data: {"choices" : [\t],\ndata: "usage":{"prompt_tokens":1}}', true],
      // JSON.parse keeps the last of a repeated key; the strip keeps any event that shows a choice.
      ['data: {"choices":[{"delta":{}}],"choices":[],"usage":{"prompt_tokens":1}}', false],
      ['data: {"choices":[],"usage":{"prompt_tokens":1},"choices":[{"delta":{}}]}', false],
      ['data: {"choices":[],"choices":[ ],"usage":{"prompt_tokens":1}}', true],
      ['data: {"choices":[\ndata: ],"usage":{"prompt_tokens":1}}', false],
    ];
    const done = 'data: [DONE]\n\n';
    for (const [event, strips] of cases) {
      const input = Buffer.from(`${event}\n\n${done}`);
      const expected = strips ? done : input.toString();
      for (let at = 0; at <= input.length; at++) {
        for (const cut of [[at], [Math.floor(at / 2), at]]) {
          const reads = [0, ...cut, input.length].slice(1).map((end, i, ends) => input.subarray(i === 0 ? 0 : ends[i - 1], end));
          assert.equal(strip(reads).out.toString(), expected, `${event} cut at ${cut}`);
        }
      }
    }
  });

  // Found in review: an event begun in earlier reads was joined with each new read to look for
  // a choice, so a large event without one, in small reads, was copied over and over.
  it('does not join a large held event with every read to look for a choice', () => {
    const big = Buffer.from(`data: {"x":"${'y'.repeat(200_000)}"}\n\ndata: [DONE]\n\n`);
    const reads = Array.from({ length: Math.ceil(big.length / 1000) }, (_, i) => big.subarray(i * 1000, (i + 1) * 1000));
    const concat = Buffer.concat;
    let copied = 0;
    Buffer.concat = (list: readonly Uint8Array[], length?: number) => {
      const out = concat(list, length);
      copied += out.length;
      return out;
    };
    let out: Buffer;
    try {
      out = strip(reads).out;
    } finally {
      Buffer.concat = concat;
    }
    assert.ok(out.subarray(0, big.length).equals(big));
    assert.ok(copied < 4 * big.length, `${copied} bytes joined for a ${big.length}-byte stream`);
  });

  it('leaves usage on a chunk with content or finish_reason, and events with other fields', () => {
    assert.equal(isUsageOnlyEvent(Buffer.from('data: {"choices":[],"usage":{"prompt_tokens":1}}\n\n')), true);
    assert.equal(isUsageOnlyEvent(Buffer.from('data: {"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}\n\n')), false);
    assert.equal(isUsageOnlyEvent(Buffer.from('data: {"choices":[],"usage":null}\n\n')), false);
    assert.equal(isUsageOnlyEvent(Buffer.from('event: response.completed\ndata: {"choices":[],"usage":{}}\n\n')), false);
    assert.equal(isUsageOnlyEvent(Buffer.from('data: {"choices":[],"usage":{"x":1}\n\n')), false, 'not JSON: kept');
  });

  it('finds the empty choices in the whitespace JSON allows, and only under "choices"', () => {
    assert.equal(isUsageOnlyEvent(Buffer.from('data: {"id": "x", "choices" : [ ], "usage": {"prompt_tokens": 1}}\n\n')), true);
    assert.equal(isUsageOnlyEvent(Buffer.from('data: {"choices":\t[\t]\t,"usage":{"prompt_tokens":1}}\r\n\r\n')), true);
    // Empty arrays elsewhere, around a choice that is not empty.
    assert.equal(isUsageOnlyEvent(Buffer.from('data: {"tool_calls":[],"choices":[{"delta":{"content":"[]"}}],"usage":{"prompt_tokens":1}}\n\n')), false);
    assert.equal(isUsageOnlyEvent(Buffer.from('data: {"xchoices":[],"choices":[{"delta":{}}],"usage":{"prompt_tokens":1}}\n\n')), false);
    // The name inside a string, escaped: not the member.
    assert.equal(isUsageOnlyEvent(Buffer.from('data: {"choices":[{"delta":{"content":"\\"choices\\":[]"}}],"usage":{"prompt_tokens":1}}\n\n')), false);
  });

  // Issue 18: the strip once stopped for good after an oversized event, and the usage-only chunk
  // infermeter had asked for reached a client that never asked for it.
  it('passes an event past the cap on unheld, and still strips the usage-only chunk after it', async () => {
    const small = Buffer.from('data: {"choices":[{"delta":{"content":"a"}}]}\n\n');
    const big = Buffer.from(`data: {"choices":[{"delta":{"content":"${'y'.repeat(5000)}"}}]}\n\n`);
    const usage = Buffer.from('data: {"choices":[],"usage":{"prompt_tokens":1}}\n\n');
    const done = Buffer.from('data: [DONE]\n\n');
    for (const seed of [3, 4, 5]) {
      const { out, stripped } = strip(rechunk(Buffer.concat([small, big, small, big, usage, done]), seededRandom(seed), 100), 1024);
      assert.ok(out.equals(Buffer.concat([small, big, small, big, done])), `seed ${seed}: every other byte forwarded, in order`);
      assert.deepEqual(stripped, [usage.length]);
    }
  });

  it('holds no more than the cap of an oversized event', async () => {
    const big = Buffer.from(`data: {"choices":[{"delta":{"content":"${'y'.repeat(50_000)}"}}]}\n\n`);
    const chunks = rechunk(big, seededRandom(9), 700);
    const filter = createUsageStrip({ maxEventBytes: 1024, stripped: () => {} });
    let largestHeld = 0;
    const pushed: Buffer[] = [];
    let written = 0;
    for (const chunk of chunks) {
      const out = filter.pass(chunk);
      if (out !== undefined) pushed.push(out);
      written += chunk.length;
      largestHeld = Math.max(largestHeld, written - Buffer.concat(pushed).length);
    }
    const rest = filter.end();
    if (rest !== undefined) pushed.push(rest);
    assert.ok(largestHeld <= 1024 + 700, `held at most the cap and a chunk (held ${largestHeld})`);
    assert.ok(Buffer.concat(pushed).equals(big));
  });

  it('forwards a stream that ends mid-event', async () => {
    const input = Buffer.from('data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choi');
    const { out } = strip([input]);
    assert.ok(out.equals(input));
  });
});
