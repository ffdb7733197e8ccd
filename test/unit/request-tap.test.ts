// The request body's inspection cap at its edge: a body of exactly INFERMETER_MAX_INSPECT_BYTES
// is read, one byte more is not (too_large), however the bytes are chunked.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { tapRequestBody, type RequestInspection } from '../../src/stream-tap/request-tap.ts';

/** Feeds `body` in chunks of `size` bytes to the tap, as a request would, and returns what it said. */
function inspect(body: string, maxBytes: number, size: number): { result: RequestInspection; bytes: number } {
  const req = Object.assign(new EventEmitter(), { headers: {} }) as unknown as IncomingMessage;
  let said: { result: RequestInspection; bytes: number } | undefined;
  tapRequestBody(req, maxBytes, (result, bytes) => {
    assert.equal(said, undefined, 'done is called once');
    said = { result, bytes };
  });
  const bytes = Buffer.from(body);
  for (let at = 0; at < bytes.length; at += size) req.emit('data', bytes.subarray(at, at + size));
  req.emit('end');
  assert.ok(said !== undefined, 'done was called');
  return said;
}

describe('request body tap', () => {
  it('reads a body of exactly the cap, and refuses one byte more', () => {
    const body = JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'x'.repeat(100) }] });
    for (const size of [1, 7, body.length]) {
      const at = inspect(body, body.length, size);
      assert.deepEqual([at.result.ok, at.result.ok && at.result.model, at.bytes], [true, 'm', body.length], `exactly the cap, chunks of ${size}`);
      const over = inspect(body, body.length - 1, size);
      assert.deepEqual(over.result, { ok: false, reason: 'too_large' }, `one byte over the cap, chunks of ${size}`);
      assert.ok(over.bytes > body.length - 1, `${over.bytes} bytes seen when it gave up`);
    }
    // A cap of 0 reads nothing: an empty body is "empty", any byte is too large.
    assert.deepEqual(inspect('', 0, 1).result, { ok: false, reason: 'empty' });
    assert.deepEqual(inspect('{}', 0, 1).result, { ok: false, reason: 'too_large' });
  });
});
