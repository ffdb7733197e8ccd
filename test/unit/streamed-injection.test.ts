// A body that streams through has usage asked for at the end of its top-level object (issue 49):
// whatever the chunking and the encoding (UTF-8, UTF-16, UTF-32, as Python's json takes them),
// the result reads, as JSON.parse (like Python's json) reads it, as the client's object with
// `stream_options.include_usage` true merged into its own, every byte before the insertion the
// client's; with a Content-Length, exactly reserved() bytes longer; nothing added to a body that
// does not stream, asked for usage itself, or is not JSON.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createStreamedBody } from '../../src/data-plane/streamed-injection.ts';

type Encoding = 'utf-8' | 'utf-16le' | 'utf-16be' | 'utf-32le' | 'utf-32be';

function encode(s: string, e: Encoding): Buffer {
  if (e === 'utf-8') return Buffer.from(s);
  if (e === 'utf-16le') return Buffer.from(s, 'utf16le');
  if (e === 'utf-16be') return Buffer.from(s, 'utf16le').swap16();
  const points = Array.from(s, (c) => c.codePointAt(0)!);
  const b = Buffer.alloc(points.length * 4);
  for (const [i, p] of points.entries()) {
    if (e === 'utf-32le') b.writeUInt32LE(p, i * 4);
    else b.writeUInt32BE(p, i * 4);
  }
  return b;
}

function decode(b: Buffer, e: Encoding): string {
  if (e === 'utf-8') return b.toString();
  if (e === 'utf-16le') return b.toString('utf16le');
  if (e === 'utf-16be') return Buffer.from(b).swap16().toString('utf16le');
  let s = '';
  for (let i = 0; i < b.length; i += 4) s += String.fromCodePoint(e === 'utf-32le' ? b.readUInt32LE(i) : b.readUInt32BE(i));
  return s;
}

function through(input: Buffer, size: number, reserve: boolean, inject = true) {
  let injected = 0;
  const body = createStreamedBody({ inject: () => inject, injected: () => injected++, reserve });
  const out: Buffer[] = [];
  for (let i = 0; i < input.length; i += size) out.push(...body.chunk(input.subarray(i, i + size)));
  out.push(...body.end());
  return { bytes: Buffer.concat(out), injected, reserved: body.reserved(), scan: body.scan() };
}

const BODIES = [
  '{"model":"m","stream":true,"messages":[{"role":"user","content":"h\u00e9 \ud83d\ude80 }"}]}  \n',
  '{"stream_options":null,"model":"m","stream":"yes"}',
  '{"stream_options":{"continuous_usage_stats":true},"model":"m","stream":1}',
  '{"stream_options":{},"model":"m","stream":true}',
  '{"stream_options":{"include_usage":false},"model":"m","stream":true}',
  '{"stream_options":"x","model":"m","stream":true}',
  '{"model":"m","stream":false}',
  '{"model":"m","stream":true,"stream":false}',
];
const streams = (o: { stream?: unknown }) => o.stream === true || o.stream === 'yes' || o.stream === 1;

describe('a body streamed through', () => {
  for (const encoding of ['utf-8', 'utf-16le', 'utf-16be', 'utf-32le', 'utf-32be'] as const) {
    it(`in ${encoding}: usage asked for at the end of its object, merged with its own, at every chunking`, () => {
      for (const text of BODIES) {
        const input = encode(text, encoding);
        const client = JSON.parse(text) as { stream?: unknown; stream_options?: unknown };
        const options = client.stream_options;
        const expected = streams(client) && (options === undefined || options === null || (typeof options === 'object' && !('include_usage' in options)));
        for (const reserve of [false, true]) {
          for (const size of [1, 2, 3, 5, 64, input.length]) {
            const out = through(input, size, reserve);
            const what = `${text} (${encoding}, chunks of ${size}, reserve ${reserve})`;
            assert.equal(out.injected, expected ? 1 : 0, what);
            if (reserve) assert.equal(out.bytes.length, input.length + out.reserved, `${what}: the length told upstream`);
            else if (!expected) assert.ok(out.bytes.equals(input), `${what}: untouched`);
            const got = JSON.parse(decode(out.bytes, encoding)) as Record<string, unknown>;
            const want = { ...client, ...(expected ? { stream_options: { include_usage: true, ...(options as object | null) } } : {}) };
            assert.deepEqual(got, want, what);
            // Every byte before the insertion is the client's.
            const at = out.bytes.indexOf(encode(',"stream_options":{"include_usage":true', encoding));
            if (expected) assert.ok(out.bytes.subarray(0, at).equals(input.subarray(0, at)), `${what}: the client's bytes first`);
            assert.equal(out.scan.ok, true, what);
          }
        }
      }
    });
  }

  it('adds nothing when told not to inject, to a body that is not JSON, or after its object', () => {
    const text = encode('{"model":"m","stream":true}', 'utf-8');
    assert.ok(through(text, 3, false, false).bytes.equals(text), 'not injecting: as it came');
    const padded = through(text, 3, true, false);
    assert.equal(padded.bytes.toString(), `${text.toString()}${' '.repeat(padded.reserved)}`, 'only white space after the object');
    for (const junk of ['{"model":"m","stream":true', '{"model":"m","stream":true,}', 'model=m', '[{"stream":true}]', '']) {
      const out = through(Buffer.from(junk), 2, false);
      assert.deepEqual([out.injected, out.bytes.toString()], [0, junk], junk);
    }
    // Bytes after the object make it no JSON the engine takes: with them in the closing brace's
    // chunk nothing is added; in a later one the insertion went already (refused all the same).
    assert.equal(through(Buffer.from('{"model":"m","stream":true}x'), 100, false).injected, 0);
  });

  it('reserves 256 characters of the encoding; a merged member too long for them is replaced by ours alone', () => {
    assert.equal(through(encode('{"stream":true}', 'utf-8'), 4, true).reserved, 256);
    assert.equal(through(encode('{"stream":true}', 'utf-16le'), 4, true).reserved, 512);
    assert.equal(through(encode('{"stream":true}', 'utf-32be'), 4, true).reserved, 1024);
    const long = `{"stream_options":{"x":"${'y'.repeat(300)}"},"stream":true}`;
    const out = through(Buffer.from(long), 7, true);
    assert.equal(out.bytes.length, long.length + 256);
    assert.deepEqual(JSON.parse(out.bytes.toString()).stream_options, { include_usage: true }, 'the last stream_options, ours alone');
    const unreserved = through(Buffer.from(long), 7, false);
    assert.equal(JSON.parse(unreserved.bytes.toString()).stream_options.x.length, 300, 'without a length to keep, merged');
  });
});
