import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classifyBody, classifyEvent } from '../../src/measure/openai-events.ts';

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
    assert.deepEqual(
      classifyEvent(JSON.stringify({ type: 'response.completed', response: { usage: { input_tokens: 5, output_tokens: 7 } } })).usage,
      { promptTokens: 5, completionTokens: 7 },
    );
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
    });
    assert.equal(classifyBody('{"error":{"message":"bad"}}').error, true);
    assert.equal(classifyBody('<html>').malformed, true);
  });
});
