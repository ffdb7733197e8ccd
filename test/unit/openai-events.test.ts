import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classifyBody, classifyEvent } from '../../src/measure/openai-events.ts';
import { skimTokenEvent } from '../../src/measure/skim-event.ts';

const chat = (delta: unknown, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }], ...extra });

describe('classifyEvent', () => {
  it('counts generated output of every kind as a token', () => {
    for (const delta of [
      { content: 'x' },
      { reasoning_content: 'x' },
      { reasoning: 'x' },
      { tool_calls: [{ index: 0, function: { arguments: '{' } }] },
      { refusal: 'no' },
      { content: [{ type: 'text', text: 'x' }] },
      { audio: { data: 'AAAA' } },
    ]) {
      assert.equal(classifyEvent(chat(delta)).token, true, JSON.stringify(delta));
    }
    assert.equal(classifyEvent(JSON.stringify({ object: 'text_completion', choices: [{ text: ' ' }] })).token, true);
    assert.equal(classifyEvent(JSON.stringify({ type: 'response.output_text.delta', delta: 'x' }), 'response.output_text.delta').token, true);
    assert.equal(classifyEvent(JSON.stringify({ type: 'response.function_call_arguments.delta', delta: '{' })).token, true);
  });

  it('does not count role-only, empty, finish, usage-only chunks or other Responses events', () => {
    for (const delta of [{ role: 'assistant' }, { role: 'assistant', content: '' }, {}, { content: null, tool_calls: [] }, { content: [] }]) {
      assert.equal(classifyEvent(chat(delta)).token, false, JSON.stringify(delta));
    }
    assert.equal(classifyEvent(JSON.stringify({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 2 } })).token, false);
    assert.equal(classifyEvent(JSON.stringify({ type: 'response.output_text.delta', delta: '' })).token, false);
    assert.equal(classifyEvent(JSON.stringify({ type: 'response.output_text.done', text: 'abc' })).token, false);
    assert.equal(classifyEvent(JSON.stringify({ type: 'response.created', response: { usage: null } })).token, false);
  });

  it('reads usage from chunks and from response.completed', () => {
    assert.deepEqual(classifyEvent(chat({ content: 'x' }, { usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } })).usage, {
      promptTokens: 3,
      completionTokens: 1,
    });
    assert.equal(classifyEvent(chat({ content: 'x' }, { usage: null })).usage, undefined);
    assert.deepEqual(classifyEvent(JSON.stringify({ type: 'response.completed', response: { usage: { input_tokens: 5, output_tokens: 7 } } })).usage, {
      promptTokens: 5,
      completionTokens: 7,
    });
    assert.equal(classifyEvent(JSON.stringify({ choices: [], usage: { prompt_tokens: -1, completion_tokens: 1.5 } })).usage, undefined);
  });

  it('recognises errors in every documented shape', () => {
    assert.equal(classifyEvent(JSON.stringify({ object: 'error', message: 'x', code: 500 })).error, true);
    assert.equal(classifyEvent(JSON.stringify({ error: { message: 'x' } })).error, true);
    assert.equal(classifyEvent(JSON.stringify({ message: 'x' }), 'error').error, true);
    assert.equal(classifyEvent('not json', 'error').error, true);
    assert.equal(classifyEvent(JSON.stringify({ type: 'error', message: 'x' })).error, true);
    assert.equal(classifyEvent(JSON.stringify({ type: 'response.failed', response: { error: {} } })).error, true);
    assert.equal(classifyEvent(chat({ content: 'x' }, { error: null })).error, false);
  });

  it('reads why generation stopped: the last non-null finish_reason, or the Responses API status', () => {
    const finish = (choices: unknown[]) => classifyEvent(JSON.stringify({ object: 'chat.completion.chunk', choices })).finishReason;
    assert.equal(finish([{ index: 0, delta: {}, finish_reason: 'stop' }]), 'stop');
    assert.equal(finish([{ index: 0, delta: { content: 'x' }, finish_reason: null }]), undefined);
    assert.equal(finish([{ index: 0, delta: { content: '.' }, finish_reason: 'length' }]), 'length', 'with the last token');
    assert.equal(classifyEvent(JSON.stringify({ choices: [{ index: 0, delta: { content: '.' }, finish_reason: 'length' }] })).token, true);
    assert.equal(finish([{ index: 0, text: '', finish_reason: 'length' }]), 'length', 'completions');
    assert.equal(
      finish([
        { index: 0, delta: {}, finish_reason: 'stop' },
        { index: 1, delta: {}, finish_reason: 'length' },
      ]),
      'length',
      'n > 1: the last',
    );
    assert.equal(
      finish([
        { index: 0, delta: {}, finish_reason: 'tool_calls' },
        { index: 1, delta: {}, finish_reason: null },
      ]),
      'tool_calls',
    );
    assert.equal(finish([{ index: 0, delta: {}, finish_reason: '' }]), undefined);
    assert.equal(finish([{ index: 0, delta: {}, finish_reason: 7 }]), undefined);
    assert.equal(finish([{ index: 0, delta: {}, finish_reason: 'x'.repeat(100) }]), 'x'.repeat(64), 'cut to 64 characters');
    const finishUsage = classifyEvent(
      JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 2 } }),
    );
    assert.deepEqual(
      [finishUsage.finishReason, finishUsage.usage],
      ['stop', { promptTokens: 1, completionTokens: 2 }],
      'finish and usage in one chunk (llama.cpp, DeepSeek)',
    );
    const responses = (type: string, response: unknown) => classifyEvent(JSON.stringify({ type, response }), type).finishReason;
    assert.equal(responses('response.completed', { status: 'completed', usage: null }), 'stop');
    assert.equal(responses('response.completed', { usage: null }), 'stop', 'the event type stands for a missing status');
    assert.equal(responses('response.incomplete', { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } }), 'length');
    assert.equal(responses('response.incomplete', { status: 'incomplete', incomplete_details: { reason: 'content_filter' } }), 'content_filter');
    assert.equal(responses('response.failed', { status: 'failed', error: {} }), undefined);
    assert.equal(classifyEvent('[DONE]').finishReason, undefined);
  });

  it('marks the end marker and malformed payloads', () => {
    assert.equal(classifyEvent('[DONE]').done, true);
    assert.equal(classifyEvent('{"choices":[').malformed, true);
    assert.equal(classifyEvent('42').malformed, true);
  });
});

describe('classifyBody', () => {
  it('reads usage and errors of a whole body', () => {
    assert.deepEqual(classifyBody('{"usage":{"prompt_tokens":8,"completion_tokens":3}}'), {
      usage: { promptTokens: 8, completionTokens: 3 },
      error: false,
      malformed: false,
      finishReason: undefined,
    });
    assert.equal(classifyBody('{"error":{"message":"bad"}}').error, true);
    assert.equal(classifyBody('<html>').malformed, true);
  });

  it('reads the finish reason of a whole body', () => {
    assert.equal(
      classifyBody('{"object":"chat.completion","choices":[{"index":0,"message":{"content":"x"},"finish_reason":"length"}]}').finishReason,
      'length',
    );
    assert.equal(classifyBody('{"object":"text_completion","choices":[{"index":0,"text":"x","finish_reason":"stop"}]}').finishReason, 'stop');
    assert.equal(classifyBody('{"object":"response","status":"completed","output":[]}').finishReason, 'stop');
    assert.equal(classifyBody('{"object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}').finishReason, 'length');
    assert.equal(classifyBody('{"object":"list","data":[]}').finishReason, undefined, 'embeddings');
  });
});

describe("the engine's timings (llama.cpp)", () => {
  const finish = (timings: unknown) => chat({}, { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], timings });
  const full = { prompt_n: 12, prompt_ms: 18.25, prompt_per_token_ms: 1.52, predicted_n: 3, predicted_ms: 4.1e1, predicted_per_second: 73.2 };

  it('reads all four figures, in a chunk and in a body, the skimmer as the full classifier', () => {
    const expected = { promptTokens: 12, promptMs: 18.25, predictedTokens: 3, predictedMs: 41 };
    const data = finish(full);
    assert.deepEqual(classifyEvent(data).timings, expected);
    const skimmed = skimTokenEvent(Buffer.from(data));
    assert.ok(typeof skimmed === 'object', `skimmed without JSON.parse: ${JSON.stringify(skimmed)}`);
    assert.deepEqual(skimmed, classifyEvent(data));
    assert.deepEqual(classifyBody(JSON.stringify({ choices: [{ finish_reason: 'stop', message: { content: 'x' } }], timings: full })).timings, expected);
  });

  it('ignores timings that lack a figure or hold a negative or non-number one, as the skimmer does', () => {
    for (const timings of [{ ...full, prompt_ms: undefined }, { ...full, predicted_n: -1 }, { ...full, prompt_ms: '18' }, null, [1, 2]]) {
      const data = finish(timings);
      assert.equal(classifyEvent(data).timings, undefined, JSON.stringify(timings));
      const skimmed = skimTokenEvent(Buffer.from(data));
      if (skimmed !== undefined) assert.deepEqual(skimmed, classifyEvent(data), JSON.stringify(timings));
    }
  });
});

describe("llama-server's own completion format (/completion, /infill)", () => {
  // As b4747's and master's to_json_non_oaicompat_partial / _final write them.
  const partial = { index: 0, content: ' sky', tokens: [], stop: false, id_slot: -1, tokens_predicted: 2, tokens_evaluated: 5 };
  const last = {
    index: 0,
    content: '',
    tokens: [],
    id_slot: 0,
    stop: true,
    model: 'gguf',
    tokens_predicted: 7,
    tokens_evaluated: 5,
    stop_type: 'limit',
    timings: { prompt_n: 5, prompt_ms: 1.5, predicted_n: 7, predicted_ms: 9 },
  };
  it('counts each content event a token and reads the counts and the stop type of the last', () => {
    assert.deepEqual(classifyEvent(JSON.stringify(partial)), {
      token: true,
      usage: undefined,
      error: false,
      done: false,
      malformed: false,
      finishReason: undefined,
    });
    assert.equal(classifyEvent(JSON.stringify({ ...partial, content: '' })).token, false);
    const facts = classifyEvent(JSON.stringify(last));
    assert.equal(facts.token, false);
    assert.deepEqual(facts.usage, { promptTokens: 5, completionTokens: 7 });
    assert.equal(facts.finishReason, 'length');
    assert.equal(facts.model, 'gguf');
    assert.deepEqual(facts.timings, { promptTokens: 5, promptMs: 1.5, predictedTokens: 7, predictedMs: 9 });
    assert.equal(classifyEvent(JSON.stringify({ ...last, stop_type: 'eos' })).finishReason, 'stop');
    assert.equal(classifyEvent(JSON.stringify({ ...last, stop_type: 'constructor' })).finishReason, undefined);
    assert.equal(classifyEvent(JSON.stringify({ error: { code: 500, message: 'x', type: 'server_error' } })).error, true);
  });
  it('reads a non-streamed answer', () => {
    const body = classifyBody(JSON.stringify({ ...last, content: 'The sky is blue.', stop_type: 'eos' }));
    assert.deepEqual(body.usage, { promptTokens: 5, completionTokens: 7 });
    assert.equal(body.finishReason, 'stop');
    // Not llama.cpp's: OpenAI's shapes are read as before.
    assert.equal(
      classifyBody(JSON.stringify({ content: 'x', stop: true, choices: [], usage: { prompt_tokens: 1, completion_tokens: 2 } })).usage?.completionTokens,
      2,
    );
  });
});
