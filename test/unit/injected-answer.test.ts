// The answer to a request whose body had usage injected (src/data-plane/injected-answer.ts):
// which answers are held, which held ones are refusals, and how a non-refusal is passed on.
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { PassThrough } from 'node:stream';
import type { UpstreamResponse } from '../../src/data-plane/upstream-response.ts';
import { createBodyBudget } from '../../src/data-plane/body-budget.ts';
import { holdAnswer, mayBeRefusal, MAX_REFUSAL_BYTES } from '../../src/data-plane/injected-answer.ts';

type Held = { refused: true } | { refused: false; body: string; size: number; complete: boolean };

const CLIENT_BODY = Buffer.from('{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}');

function hold(status: number, chunks: readonly (string | Buffer)[], original: Buffer = CLIENT_BODY): Promise<{ held: Held; response: PassThrough }> {
  const response = new PassThrough();
  return new Promise((resolve) => {
    holdAnswer(response as unknown as UpstreamResponse, status, original, {
      refused: () => resolve({ held: { refused: true }, response }),
      passOn: (held, size, complete) => resolve({ held: { refused: false, body: Buffer.concat(held).toString(), size, complete }, response }),
    });
    for (const chunk of chunks) response.write(chunk);
    response.end();
  });
}

const VLLM_REFUSAL = JSON.stringify({
  object: 'error',
  message: "[{'type': 'extra_forbidden', 'loc': ('body', 'stream_options'), 'msg': 'Extra inputs are not permitted'}]",
  type: 'BadRequestError',
  code: 400,
});

describe('injected answers', () => {
  it('holds only 4xx answers: a success, a redirect or a 5xx goes to the client at once', () => {
    for (const status of [400, 404, 422, 499]) assert.equal(mayBeRefusal(status), true, String(status));
    for (const status of [200, 204, 302, 500, 503]) assert.equal(mayBeRefusal(status), false, String(status));
  });

  it('takes a 400 that rejects stream_options as a refusal, however its body was cut', async () => {
    const { held } = await hold(400, [VLLM_REFUSAL.slice(0, 20), VLLM_REFUSAL.slice(20)]);
    assert.deepEqual(held, { refused: true });
  });

  it("takes each engine's way of refusing an unknown field as a refusal", async () => {
    const refusals: Array<[number, string]> = [
      [
        422,
        JSON.stringify({
          detail: [{ type: 'extra_forbidden', loc: ['body', 'stream_options'], msg: 'Extra inputs are not permitted', input: { include_usage: true } }],
        }),
      ], // FastAPI / pydantic v2
      [
        422,
        JSON.stringify({
          error: 'Failed to deserialize the JSON body into the target type: unknown field `stream_options`, expected one of `model`, `messages`',
          error_type: 'validation',
        }),
      ], // TGI (serde)
      [
        400,
        JSON.stringify({
          error: { message: 'Unrecognized request argument supplied: stream_options', type: 'invalid_request_error', param: null, code: null },
        }),
      ], // OpenAI
      [400, JSON.stringify({ error: { code: 400, message: 'Unsupported param: stream_options', type: 'invalid_request_error' } })], // llama.cpp's style
      [400, JSON.stringify({ detail: [{ loc: ['body', 'stream_options', 'include_usage'], msg: 'extra fields not permitted', type: 'value_error.extra' }] })], // pydantic v1
    ];
    for (const [status, body] of refusals) assert.deepEqual((await hold(status, [body])).held, { refused: true }, body);
  });

  it('never takes for a refusal what the client can make an engine say', async () => {
    // vLLM's 404 echoes the model the client named.
    const echoed = JSON.stringify({
      object: 'error',
      message: 'The model `stream_options` does not exist (extra inputs are not permitted).',
      type: 'NotFoundError',
      code: 404,
    });
    assert.equal((await hold(404, [echoed], Buffer.from('{"model":"stream_options","stream":true}'))).held.refused, false, 'a 404');
    // pydantic echoes the input of a field the client added: the text is the client's.
    const ownField = JSON.stringify({
      detail: [{ type: 'extra_forbidden', loc: ['body', 'foo'], msg: 'Extra inputs are not permitted', input: 'stream_options' }],
    });
    assert.equal(
      (await hold(422, [ownField], Buffer.from('{"model":"m","stream":true,"foo":"stream_options"}'))).held.refused,
      false,
      "the client's own value",
    );
    // The client's own stream_options refused: it would be refused without infermeter too.
    const own = JSON.stringify({ error: { message: 'Unrecognized request argument supplied: stream_options' } });
    assert.equal((await hold(400, [own], Buffer.from('{"model":"m","stream":true,"stream_options":{}}'))).held.refused, false, "the client's own field");
    // Naming the field without refusing it, or a server error.
    assert.equal((await hold(400, [JSON.stringify({ error: { message: 'stream_options requires stream' } })])).held.refused, false, 'no refusal phrase');
    assert.equal(
      (await hold(500, [JSON.stringify({ error: { message: 'Unrecognized request argument supplied: stream_options' } })])).held.refused,
      false,
      'a 500',
    );
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

  it('takes what it holds from the budget for answers: past it, the answer is passed on unread and counted; the bytes given back', async () => {
    const budget = createBodyBudget(100);
    const other = budget.hold();
    other.take(90);
    const response = new PassThrough();
    let unheld = 0;
    const held = await new Promise<Held>((resolve) => {
      holdAnswer(
        response as unknown as UpstreamResponse,
        400,
        CLIENT_BODY,
        {
          refused: () => resolve({ refused: true }),
          passOn: (chunks, size, complete) => resolve({ refused: false, body: Buffer.concat(chunks).toString(), size, complete }),
        },
        budget,
        () => unheld++,
      );
      response.write(VLLM_REFUSAL.slice(0, 5));
      response.write(VLLM_REFUSAL.slice(5, 20));
    });
    assert.deepEqual(held, { refused: false, body: VLLM_REFUSAL.slice(0, 20), size: 20, complete: false }, 'not read: passed on, the rest to follow');
    assert.equal(unheld, 1);
    assert.equal(budget.held(), 90, 'its bytes given back');
  });
});
