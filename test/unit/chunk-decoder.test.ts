// The chunked framing read on the side (chunk-decoder.ts): the chunks' bytes from reads cut
// anywhere, and which reads are whole chunks as they came.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChunkDecoder } from '../../src/data-plane/chunk-decoder.ts';

const chunk = (text: string, ext = ''): string => `${Buffer.byteLength(text).toString(16)}${ext}\r\n${text}\r\n`;

function decode(reads: readonly string[]): { bytes: string; whole: boolean[]; views: boolean } {
  const decoder = new ChunkDecoder();
  let bytes = '';
  let views = true;
  const whole = reads.map((text) => {
    const read = Buffer.from(text, 'latin1');
    return decoder.feed(read, (b) => {
      views &&= b.buffer === read.buffer;
      bytes += b.toString('latin1');
    });
  });
  return { bytes, whole, views };
}

describe('the chunk decoder', () => {
  const events = ['data: {"a":1}\n\n', 'data: bb\n\ndata: ccc\n\n', `data: ${'x'.repeat(300)}\n\n`, 'data: [DONE]\n\n'];
  const body = `${events.map((e) => chunk(e)).join('')}0\r\n\r\n`;

  it('finds the same bytes wherever the reads are cut, as views of them', () => {
    for (let a = 1; a < body.length; a++) {
      for (const b of [a + 1, a + 7, body.length]) {
        if (b > body.length) continue;
        const { bytes, views } = decode([body.slice(0, a), body.slice(a, b), body.slice(b)].filter((r) => r !== ''));
        assert.equal(bytes, events.join(''), `cut at ${a} and ${b}`);
        assert.ok(views);
      }
    }
  });

  it('says a read is whole only when it begins and ends between chunks and holds no last chunk', () => {
    const [e0, e1, e2] = events.map((e) => chunk(e));
    assert.deepEqual(decode([e0!, e1! + e2!, '0\r\n\r\n']).whole, [true, true, false]);
    assert.deepEqual(decode([e0!.slice(0, 5), e0!.slice(5), e1!]).whole, [false, false, true]);
    assert.deepEqual(decode([e0! + e1!.slice(0, 2), e1!.slice(2) + e2!]).whole, [false, false]);
    assert.deepEqual(decode([e0!, `${e1!}0\r\n\r\n`]).whole, [true, false]);
  });

  it('skips extensions, takes upper-case hex and lone LFs, and reads nothing after the last chunk', () => {
    const { bytes, whole } = decode([`${chunk('hello', ';name=value')}A\n0123456789\n`, '0\r\nTrailer: x\r\n\r\n5\r\nafter\r\n']);
    assert.equal(bytes, 'hello0123456789');
    assert.deepEqual(whole, [true, false]);
  });
  it("skips a size's leading zeros, however many, and reads nothing past a size llhttp refuses (over 16 significant digits)", () => {
    const padded = (text: string, width: number): string => `${Buffer.byteLength(text).toString(16).padStart(width, '0')}\r\n${text}\r\n`;
    const { bytes, whole } = decode([padded('one', 14), padded('two', 20) + padded('three', 40), '0'.repeat(30) + '\r\n\r\n']);
    assert.equal(bytes, 'onetwothree');
    assert.deepEqual(whole, [true, true, false]);
    // 16 significant digits fit in llhttp's uint64; 17 overflow it (Node's parser errs).
    const over = decode([`${'0'.repeat(5)}1${'0'.repeat(16)}\r\nabc\r\n`, padded('after', 3)]);
    assert.equal(over.bytes, '');
    assert.deepEqual(over.whole, [false, false]);
  });
});
