// Real model-server recordings from ../shared/fixtures/real-streams (third-party data, read in
// place, never copied into the repo). Without that folder this suite says so and skips, except
// under CI, where that fails.
import assert from 'node:assert/strict';
import { describe, it as test } from 'node:test';
import { REAL_STREAMS, REAL_STREAMS_DIR, realBody, realStreamBytes, realStreamsAvailable, realStreamsSkip } from '../helpers/fixtures.ts';
import { rechunk, seededRandom } from '../helpers/random.ts';
import { runTap } from '../helpers/tap-harness.ts';
import { checkEventByEvent, checkRechunked } from './stream-checks.ts';

// Each test skips on its own (not the suite), so the run's summary counts what did not run.
const it = (name: string, fn: () => void) => test(name, { skip: realStreamsSkip }, fn);

describe('real recorded streams', () => {
  it('the recordings are there', () => assert.ok(realStreamsAvailable(), `real recordings not found at ${REAL_STREAMS_DIR}`));
  for (const { file, api, expect } of REAL_STREAMS) {
    it(`${file}: classified event by event`, () => {
      checkEventByEvent(api, realStreamBytes(file), expect, file);
    });
    it(`${file}: same figures at random chunk boundaries`, () => {
      checkRechunked(api, realStreamBytes(file), expect, file);
    });
    // The event splitter's other forms (event-splitter.ts): the SSE specification's CRLF and CR
    // line ends and a byte-order mark read as the recording's own LF.
    it(`${file}: same figures with CRLF or CR line ends, and after a byte-order mark`, () => {
      const bytes = realStreamBytes(file);
      if (bytes.includes(0x0d)) return; // has CRs of its own: rewritten, its lines would change
      const text = bytes.toString('latin1');
      for (const [form, nl] of [
        ['CRLF', '\r\n'],
        ['CR', '\r'],
      ] as const) {
        checkRechunked(api, Buffer.from(text.replaceAll('\n', nl), 'latin1'), expect, `${file} (${form})`, 6);
      }
      checkRechunked(api, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]), expect, `${file} (byte-order mark)`, 6);
    });
  }

  const json = { 'content-type': 'application/json' };
  const bodyChunks = (file: string, seed: number) => rechunk(realBody(file), seededRandom(seed), 97);

  it('aigateway-openai-chat-nonstream.json: usage of a non-streamed answer', () => {
    for (let seed = 1; seed <= 5; seed++) {
      const { sample, problems } = runTap({ api: 'chat', chunks: bodyChunks('aigateway-openai-chat-nonstream.json', seed), headers: json });
      assert.equal(sample.streamed, false);
      assert.equal(sample.outcome, 'success');
      assert.equal(sample.promptTokens, 8);
      assert.equal(sample.completionTokens, 377);
      assert.equal(sample.ttft, undefined, 'no TTFT for a non-streamed answer');
      assert.equal(sample.tpot, undefined, 'no TPOT for a non-streamed answer');
      assert.deepEqual(problems, []);
    }
  });

  it("llamacpp-b4747-chat-nonstream.json: usage and the engine's timings of a non-streamed answer", () => {
    for (let seed = 1; seed <= 5; seed++) {
      const { sample, problems } = runTap({ api: 'chat', chunks: bodyChunks('llamacpp-b4747-chat-nonstream.json', seed), headers: json });
      assert.equal(sample.outcome, 'success');
      assert.equal(sample.promptTokens, 59);
      assert.equal(sample.completionTokens, 8);
      assert.equal(sample.finishReason, 'length');
      // prompt_n 1: the prompt came from llama.cpp's cache, all but one token.
      assert.deepEqual(sample.engineTimings, { promptTokens: 1, promptMs: 0.374, predictedTokens: 8, predictedMs: 0.734 });
      assert.deepEqual(problems, []);
    }
  });

  it('vercelai-openai-embedding.json: prompt tokens only', () => {
    const { sample } = runTap({ api: 'embeddings', chunks: bodyChunks('vercelai-openai-embedding.json', 1), headers: json });
    assert.equal(sample.promptTokens, 12);
    assert.equal(sample.completionTokens, undefined);
    assert.equal(sample.usageSource, 'upstream');
  });

  it('aigateway-openai-chat-bad-request-400.json: a failed request with no token figures', () => {
    const { sample } = runTap({ api: 'chat', status: 400, chunks: bodyChunks('aigateway-openai-chat-bad-request-400.json', 1), headers: json });
    assert.equal(sample.outcome, 'failed');
    assert.equal(sample.failure, 'upstream_status');
    assert.equal(sample.status, 400);
    assert.equal(sample.promptTokens, undefined);
    assert.equal(sample.completionTokens, undefined);
    assert.equal(sample.e2e, undefined);
  });
});
