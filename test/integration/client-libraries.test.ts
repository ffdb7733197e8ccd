// The client libraries a newcomer tries first, against `infermeter sim` (the real command) with
// infermeter in front: the openai SDK's chat completions, completions, responses.stream() and
// embeddings (base64, its default), and the Vercel AI SDK's streamText with its default OpenAI
// provider (the Responses API). Each must get a whole answer, and infermeter must measure it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it, type TestContext } from 'node:test';
import { createOpenAI } from '@ai-sdk/openai';
import { streamText } from 'ai';
import OpenAI from 'openai';
import type { Infermeter } from '../../src/app.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { nextFinished, startProxy } from '../helpers/proxy-harness.ts';

const LAUNCHER = fileURLToPath(new URL('../../bin/infermeter.js', import.meta.url));
const MODEL = 'sim-llama-8b';
const WORDS = ['the', ' model', ' answers', ' with', ' tokens'];

/** `infermeter sim --port 0`, stopped in teardown; resolves with its URL. */
function startSimCommand(t: Pick<TestContext, 'after'>): Promise<string> {
  const child = spawn(process.execPath, [LAUNCHER, 'sim', '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(async () => {
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const url = /url +(http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
      if (url !== undefined) resolve(url);
    });
    child.once('exit', () => reject(new Error(`infermeter sim exited, having printed: ${out}`)));
  });
}

describe('client libraries through infermeter in front of infermeter sim', () => {
  let app: Infermeter;
  let openai: OpenAI;
  // The suite shares one simulator and one proxy; they stop, in reverse order, after it.
  const teardown: Array<() => unknown> = [];
  const suite = { after: (fn: () => unknown) => void teardown.unshift(fn) } as Pick<TestContext, 'after'>;
  after(async () => {
    for (const fn of teardown) await fn();
  });
  before(async () => {
    const sim = await startSimCommand(suite);
    app = await startProxy(suite as TestContext, sim);
    openai = new OpenAI({ baseURL: `${app.dataUrl}/v1`, apiKey: 'sk-none', maxRetries: 0 });
  });

  const measured = (sample: RequestSample | undefined, api: string, stream: boolean, completionTokens: number | undefined): void => {
    assert.ok(sample, 'a finished request was measured');
    assert.deepEqual(
      { api: sample.api, model: sample.model, stream: sample.stream, outcome: sample.outcome, completionTokens: sample.completionTokens },
      { api, model: MODEL, stream, outcome: 'success', completionTokens },
    );
  };

  it('openai chat.completions, streamed without asking for usage: text whole, tokens counted (usage injected)', async () => {
    const finished = nextFinished(app, 1);
    const stream = await openai.chat.completions.create({ model: MODEL, stream: true, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
    let text = '';
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      assert.ok(chunk.choices.length > 0, 'the usage-only chunk infermeter asked for is not passed on');
      text += chunk.choices[0]?.delta.content ?? '';
    }
    assert.equal(text, WORDS.join(''));
    assert.ok(chunks >= 6, `${chunks} chunks`);
    measured((await finished)[0], 'chat', true, 5);
  });

  it('stream_options: null, as some clients send an unset field, counts as absent: usage injected, tokens counted', async () => {
    const finished = nextFinished(app, 1);
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, stream: true, stream_options: null, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const text = await res.text();
    assert.equal(res.status, 200);
    assert.ok(!text.includes('"usage"'), `the client, which did not ask, gets no usage chunk:\n${text}`);
    measured((await finished)[0], 'chat', true, 4);
  });

  it('openai completions, plain and streamed', async () => {
    const finished = nextFinished(app, 2);
    const plain = await openai.completions.create({ model: MODEL, prompt: 'Once', max_tokens: 3 });
    assert.equal(plain.choices[0]?.text, WORDS.slice(0, 3).join(''));
    assert.equal(plain.usage?.completion_tokens, 3);
    let text = '';
    for await (const chunk of await openai.completions.create({ model: MODEL, prompt: 'Once', max_tokens: 4, stream: true }))
      text += chunk.choices[0]?.text ?? '';
    assert.equal(text, WORDS.slice(0, 4).join(''));
    const [a, b] = await finished;
    measured(a, 'completions', false, 3);
    measured(b, 'completions', true, 4);
  });

  it("openai responses.stream(): events in OpenAI's sequence, the final response whole", async () => {
    const finished = nextFinished(app, 1);
    const stream = openai.responses.stream({ model: MODEL, input: 'Say something.', instructions: 'Be brief.' });
    const types: string[] = [];
    let deltas = '';
    let lastSequence = -1;
    for await (const event of stream) {
      types.push(event.type);
      assert.equal(event.sequence_number, lastSequence + 1, 'sequence numbers count up from 0');
      lastSequence = event.sequence_number;
      if (event.type === 'response.output_text.delta') deltas += event.delta;
    }
    const response = await stream.finalResponse();
    const middle = types.filter((t) => t !== 'response.output_text.delta');
    assert.deepEqual(middle, [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    assert.equal(response.status, 'completed');
    assert.equal(response.instructions, 'Be brief.');
    assert.equal(response.output_text, deltas);
    assert.ok(deltas.length > 0);
    const sample = (await finished)[0];
    measured(sample, 'responses', true, response.usage?.output_tokens);
    assert.equal(sample?.finishReason, 'stop');
  });

  it('openai responses.stream() cut by max_output_tokens ends incomplete, as OpenAI ends it', async () => {
    const stream = openai.responses.stream({ model: MODEL, input: 'Say something.', max_output_tokens: 3 });
    const response = await stream.finalResponse();
    assert.deepEqual(
      [response.status, response.incomplete_details?.reason, response.output_text, response.usage?.output_tokens],
      ['incomplete', 'max_output_tokens', WORDS.slice(0, 3).join(''), 3],
    );
  });

  it('openai embeddings: base64 by default (the SDK decodes it) equals the float form', async () => {
    const finished = nextFinished(app, 2);
    const base64 = await openai.embeddings.create({ model: MODEL, input: ['metering', 'proxies'] });
    const floats = await openai.embeddings.create({ model: MODEL, input: ['metering', 'proxies'], encoding_format: 'float' });
    assert.equal(base64.data.length, 2);
    for (const [i, item] of base64.data.entries()) {
      assert.equal(item.embedding.length, 16);
      assert.ok(Math.abs(Math.hypot(...item.embedding) - 1) < 1e-5, `unit length: ${Math.hypot(...item.embedding)}`);
      assert.deepEqual(
        item.embedding,
        floats.data[i]!.embedding.map((x) => Math.fround(x)),
      );
    }
    assert.notDeepEqual(base64.data[0]!.embedding, base64.data[1]!.embedding);
    const sized = await openai.embeddings.create({ model: MODEL, input: 'x', dimensions: 64 });
    assert.equal(sized.data[0]!.embedding.length, 64);
    for (const sample of await finished) measured(sample, 'embeddings', false, undefined);
  });

  it('Vercel AI SDK streamText with its default OpenAI provider (the Responses API)', async () => {
    const finished = nextFinished(app, 1);
    const provider = createOpenAI({ baseURL: `${app.dataUrl}/v1`, apiKey: 'sk-none' });
    const errors: unknown[] = [];
    const result = streamText({ model: provider(MODEL), prompt: 'Say something.', maxOutputTokens: 6, onError: ({ error }) => void errors.push(error) });
    let text = '';
    for await (const part of result.textStream) text += part;
    assert.deepEqual(errors, []);
    assert.equal(text, WORDS.join('') + ' that');
    assert.equal(await result.finishReason, 'length');
    assert.equal((await result.usage).outputTokens, 6);
    measured((await finished)[0], 'responses', true, 6);
  });
});
