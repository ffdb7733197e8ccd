// The answer to a request whose body had usage injected (src/data-plane/injected-answer.ts):
// which answers are held, which held ones are refusals, and how a non-refusal is passed on.
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { PassThrough } from 'node:stream';
import { holdAnswer, mayBeRefusal, MAX_REFUSAL_BYTES } from '../../src/data-plane/injected-answer.ts';

type Held = { refused: true } | { refused: false; body: string; size: number; complete: boolean };

function hold(status: number, chunks: readonly (string | Buffer)[]): Promise<{ held: Held; response: PassThrough }> {
  const response = new PassThrough();
  return new Promise((resolve) => {
    holdAnswer(response, status, {
      refused: () => resolve({ held: { refused: true }, response }),
      passOn: (held, size, complete) => resolve({ held: { refused: false, body: Buffer.concat(held).toString(), size, complete }, response }),
    });
    for (const chunk of chunks) response.write(chunk);
    response.end();
  });
}

const VLLM_REFUSAL = JSON.stringify({ object: 'error', message: "[{'type': 'extra_forbidden', 'loc': ('body', 'stream_options'), 'msg': 'Extra inputs are not permitted'}]", type: 'BadRequestError', code: 400 });

describe('injected answers', () => {
  it('holds only 4xx answers: a success, a redirect or a 5xx goes to the client at once', () => {
    for (const status of [400, 404, 422, 499]) assert.equal(mayBeRefusal(status), true, String(status));
    for (const status of [200, 204, 302, 500, 503]) assert.equal(mayBeRefusal(status), false, String(status));
  });

  it('takes a 400 that rejects stream_options as a refusal, however its body was cut', async () => {
    const { held } = await hold(400, [VLLM_REFUSAL.slice(0, 20), VLLM_REFUSAL.slice(20)]);
    assert.deepEqual(held, { refused: true });
  });

  it('passes any other 4xx on whole, byte for byte', async () => {
    const body = JSON.stringify({ error: { message: 'The model `x` does not exist.', type: 'NotFoundError', code: 404 } });
    const { held } = await hold(404, [body]);
    assert.deepEqual(held, { refused: false, body, size: Buffer.byteLength(body), complete: true });
  });

  it(`passes on an answer over ${MAX_REFUSAL_BYTES} bytes unread: what was held, then the rest on the paused response`, async () => {
    const big = Buffer.alloc(MAX_REFUSAL_BYTES + 1, 'a');
    const { held, response } = await hold(400, [big, 'tail']);
    assert.equal(held.refused, false);
    assert.ok(!held.refused && !held.complete && held.size === big.length);
    assert.equal(response.isPaused(), true, 'the rest waits for the caller');
    const rest: Buffer[] = [];
    for await (const chunk of response) rest.push(chunk as Buffer);
    assert.equal(Buffer.concat(rest).toString(), 'tail');
  });
});
