// The request body tap reads a body whole whatever its size (issue 49, finding 3: padding past
// the old 4 MiB cap bought an unread body) and whatever its Content-Encoding says when the bytes
// are JSON (the engines ignore the header); bytes that are not JSON under a named coding are
// `encoded`. However the bytes are chunked.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { tapRequestBody, type RequestInspection } from '../../src/stream-tap/request-tap.ts';

/** Feeds `body` in chunks of `size` bytes to the tap, as a request would, and returns what it said. */
function inspect(body: string | Buffer, size: number, headers: Record<string, string> = {}): { result: RequestInspection; bytes: number } {
  const req = Object.assign(new EventEmitter(), { headers }) as unknown as IncomingMessage;
  let said: { result: RequestInspection; bytes: number } | undefined;
  tapRequestBody(req, (result, bytes) => {
    assert.equal(said, undefined, 'done is called once');
    said = { result, bytes };
  });
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
  for (let at = 0; at < bytes.length; at += size) req.emit('data', bytes.subarray(at, at + size));
  req.emit('end');
  assert.ok(said !== undefined, 'done was called');
  return said;
}

const model = (r: RequestInspection) => (r.ok ? [r.model, r.stream] : [r.reason]);

describe('request body tap', () => {
  it('reads a body past 4 MiB whole: 4.2 MB of white space inside the object buys no unread body', () => {
    const padded = `{"model":"m",${' '.repeat(4_200_000)}"stream":true,"messages":[]}`;
    for (const size of [65_536, 1_000_003]) {
      const at = inspect(padded, size);
      assert.deepEqual(model(at.result), ['m', true], `chunks of ${size}`);
      assert.equal(at.bytes, padded.length);
    }
    const big = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(6_000_000) }], model: 'late', stream: 'yes' });
    assert.deepEqual(model(inspect(big, 65_536).result), ['late', true], 'a model named after 6 MB is read');
  });

  it('reads a JSON body whatever its Content-Encoding says; bytes that are not JSON under a named coding are encoded', () => {
    const body = '{"model":"m","stream":true}';
    for (const coding of ['x', 'gzip', 'GZIP, br', ' ', 'identity']) {
      assert.deepEqual(model(inspect(body, 3, { 'content-encoding': coding }).result), ['m', true], `Content-Encoding: ${JSON.stringify(coding)}`);
    }
    assert.deepEqual(model(inspect(gzipSync(body), 5, { 'content-encoding': 'gzip' }).result), ['encoded']);
    assert.deepEqual(model(inspect('', 5, { 'content-encoding': 'gzip' }).result), ['empty']);
    assert.deepEqual(model(inspect(gzipSync(body), 5).result), ['not_object'], 'without the header, what it is');
  });

  it('reads a UTF-16 or UTF-32 body as Python does, chunked anywhere', () => {
    const json = '{"model":"caf\u00e9 \ud83d\ude80","stream":1}';
    const utf32 = (s: string) => {
      const points = [...s].map((c) => c.codePointAt(0)!);
      const b = Buffer.alloc(points.length * 4);
      for (const [i, p] of points.entries()) b.writeUInt32BE(p, i * 4);
      return b;
    };
    for (const [name, bytes] of [
      ['utf-16le', Buffer.from(json, 'utf16le')],
      ['utf-16be with BOM', Buffer.from(`\ufeff${json}`, 'utf16le').swap16()],
      ['utf-32be', utf32(json)],
    ] as const) {
      for (const size of [1, 3, 7]) assert.deepEqual(model(inspect(bytes, size).result), ['caf\u00e9 \ud83d\ude80', true], `${name}, chunks of ${size}`);
    }
  });
});
