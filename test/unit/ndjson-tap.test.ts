// Ollama's newline-delimited JSON stream, read line by line however its reads cut it: each object
// with output a token, the counts of the `done` one, an error object a stream error, a line over
// INFERMETER_MAX_EVENT_BYTES the end of the reading (event_too_large), a line that is not JSON a
// malformed event.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classifyBody } from '../../src/measure/openai-events.ts';
import { runTap } from '../helpers/tap-harness.ts';

const NDJSON = { 'content-type': 'application/x-ndjson' };
const chat = (content: string) => `{"model":"llama3.2","message":{"role":"assistant","content":"${content}"},"done":false}\n`;
const thinking = '{"model":"llama3.2","message":{"role":"assistant","content":"","thinking":"hm"},"done":false}\n';
const done = '{"model":"llama3.2","message":{"role":"assistant","content":""},"done_reason":"length","done":true,"prompt_eval_count":4,"eval_count":3}\n';
const body = chat('a') + thinking + chat('b') + chat('') + done;

describe('the NDJSON tap (Ollama)', () => {
  it('reads each line however the reads cut it', () => {
    for (const cut of [1, 7, 50, body.length]) {
      const chunks: Buffer[] = [];
      for (let i = 0; i < body.length; i += cut) chunks.push(Buffer.from(body.slice(i, i + cut)));
      const { sample, problems } = runTap({ api: 'chat', headers: NDJSON, chunks });
      assert.deepEqual(problems, [], `cut ${cut}`);
      assert.equal(sample.tokenEvents, 3, `cut ${cut}`);
      assert.equal(sample.promptTokens, 4, `cut ${cut}`);
      assert.equal(sample.completionTokens, 3, `cut ${cut}`);
      assert.equal(sample.finishReason, 'length', `cut ${cut}`);
      assert.equal(sample.outcome, 'success', `cut ${cut}`);
    }
    // The last line without its newline is read at the end.
    assert.equal(runTap({ api: 'chat', headers: NDJSON, chunks: [Buffer.from(body.slice(0, -1))] }).sample.completionTokens, 3);
  });
  it('counts an error object, a malformed line and a line over the cap', () => {
    const error = runTap({ api: 'chat', headers: NDJSON, chunks: [Buffer.from(chat('a') + '{"error":"model runner has unexpectedly stopped"}\n')] });
    assert.equal(error.sample.outcome, 'failed');
    assert.deepEqual(runTap({ api: 'chat', headers: NDJSON, chunks: [Buffer.from('not json\n' + body)] }).problems, ['malformed_event']);
    const line = chat('x'.repeat(100));
    const over = runTap({ api: 'chat', headers: NDJSON, chunks: [Buffer.from(line.slice(0, 60)), Buffer.from(line.slice(60) + done)], maxEventBytes: 80 });
    assert.deepEqual([over.sample.tokenEvents, over.problems], [0, ['event_too_large']]);
    const at = runTap({
      api: 'chat',
      headers: NDJSON,
      chunks: [Buffer.from(line.slice(0, 60)), Buffer.from(line.slice(60) + done)],
      maxEventBytes: line.length,
    });
    assert.deepEqual([at.sample.tokenEvents, at.problems, at.sample.completionTokens], [1, [], 3]);
    // A line whole in one read is never held, so never too large.
    const whole = runTap({ api: 'chat', headers: NDJSON, chunks: [Buffer.from(line + done)], maxEventBytes: 16 });
    assert.deepEqual([whole.sample.tokenEvents, whole.problems], [1, []]);
  });
});

describe("Ollama's non-streamed answer", () => {
  it('is read for its counts; an OpenAI body with a `done` member is read as OpenAI', () => {
    const facts = classifyBody(done.replace('"message":{"role":"assistant","content":""}', '"response":"abc"'));
    assert.deepEqual([facts.usage, facts.finishReason, facts.model], [{ promptTokens: 4, completionTokens: 3 }, 'length', 'llama3.2']);
    const openai = classifyBody(
      '{"done":true,"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}',
    );
    assert.deepEqual([openai.usage, openai.finishReason], [{ promptTokens: 1, completionTokens: 2 }, 'stop']);
  });
});
