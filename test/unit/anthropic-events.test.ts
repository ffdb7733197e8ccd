// Anthropic's Messages API, event by event: which events are tokens, how usage reports merge
// (message_start, then message_delta, the last of each field winning) and add the prompt cache's
// tokens to the prompt, the stop reason, errors, a non-streamed body, and the route's labels.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inferenceRoute } from '../../src/data-plane/inference-route.ts';

const inferenceApi = (method: string, url: string) => inferenceRoute(method, url)?.api;
import { createRequestTimer } from '../../src/measure/request-timer.ts';
import { createDeltaSkimmer } from '../../src/measure/anthropic-events.ts';
import { classifyBody, classifyEvent } from '../../src/measure/openai-events.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { skimTokenEvent } from '../../src/measure/skim-event.ts';
import { mergeUsage, promptTotal, readUsage } from '../../src/measure/usage.ts';
import { otelMeasurements } from '../../src/metrics/dialects/otel.ts';
import { createMetrics } from '../../src/metrics/metrics.ts';
import { parseExposition } from '../helpers/exposition.ts';
import { seededRandom } from '../helpers/random.ts';
import { runTap } from '../helpers/tap-harness.ts';
import { noContainer } from '../helpers/no-container.ts';

const event = (data: { type: string } & Record<string, unknown>): [string, string] => [JSON.stringify(data), data.type];
const delta = (d: Record<string, unknown>) => event({ type: 'content_block_delta', index: 0, delta: d });
const start = (usage: Record<string, unknown>, model = 'claude-x') =>
  event({
    type: 'message_start',
    message: { id: 'msg_1', type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage },
  });
const messageDelta = (usage: Record<string, unknown>, stopReason: string | null = 'end_turn') =>
  event({ type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage });

/** SSE bytes of events, with or without their `event:` lines. */
function sse(events: Array<[string, string]>, named = true): Buffer[] {
  return events.map(([data, type]) => Buffer.from(`${named ? `event: ${type}\n` : ''}data: ${data}\n\n`));
}

function sampleOf(events: Array<[string, string]>, named = true): RequestSample {
  const run = runTap({ api: 'messages', chunks: sse(events, named) });
  assert.deepEqual(run.problems, []);
  return run.sample;
}

describe('Messages API events', () => {
  it('counts text, tool input and thinking deltas as tokens, and nothing else', () => {
    for (const d of [
      { type: 'text_delta', text: 'x' },
      { type: 'input_json_delta', partial_json: '{"a' },
      { type: 'thinking_delta', thinking: 'hm' },
    ]) {
      assert.equal(classifyEvent(...delta(d)).token, true, JSON.stringify(d));
      // Thinking is reasoning: TTFT, not visible output.
      assert.equal(classifyEvent(...delta(d)).reasoning, d.type === 'thinking_delta' ? true : undefined, JSON.stringify(d));
    }
    const notTokens: Array<[string, string]> = [
      delta({ type: 'text_delta', text: '' }),
      delta({ type: 'input_json_delta', partial_json: '' }),
      delta({ type: 'signature_delta', signature: 'EqQBCgIYAhIM' }),
      delta({ type: 'citations_delta', citation: { type: 'char_location', cited_text: 'x' } }),
      event({ type: 'content_block_delta', index: 0 }),
      event({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: 'not a delta' } }),
      event({ type: 'content_block_stop', index: 0 }),
      event({ type: 'ping' }),
      event({ type: 'message_stop' }),
      start({ input_tokens: 3, output_tokens: 1 }),
      messageDelta({ output_tokens: 5 }),
    ];
    for (const [data, name] of notTokens) {
      assert.equal(classifyEvent(data, name).token, false, data);
      assert.equal(classifyEvent(data, name).error, false, data);
    }
  });

  it('reads usage, model and stop reason where the API reports them', () => {
    const s = classifyEvent(
      ...start(
        { input_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1, service_tier: 'standard' },
        'claude-sonnet-4-5',
      ),
    );
    assert.deepEqual(
      [s.usage, s.model, s.finishReason],
      [
        { promptTokens: 12, completionTokens: 1, cacheReadTokens: 0, cacheCreationTokens: 0, cachedTokens: undefined, reasoningTokens: undefined },
        'claude-sonnet-4-5',
        undefined,
      ],
    );
    const d = classifyEvent(...messageDelta({ output_tokens: 30 }, 'max_tokens'));
    assert.deepEqual([d.usage, d.finishReason], [{ promptTokens: undefined, completionTokens: 30 }, 'max_tokens']);
    assert.equal(classifyEvent(...messageDelta({ output_tokens: 30 }, null)).finishReason, undefined);
  });

  it('fails on an error event, whatever its data', () => {
    assert.equal(classifyEvent('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', 'error').error, true);
    assert.equal(classifyEvent('{"type":"error","error":{"type":"api_error","message":"x"}}').error, true, 'without its event line too');
    assert.equal(classifyEvent('Overloaded', 'error').error, true);
  });

  it('merges usage field by field: message_delta restates input_tokens, or leaves it (and the cache counts) to message_start', () => {
    const events = (final: Record<string, unknown>) => [
      start({ input_tokens: 10, cache_creation_input_tokens: 4, cache_read_input_tokens: 100, output_tokens: 1 }),
      event({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
      delta({ type: 'text_delta', text: 'a' }),
      event({ type: 'ping' }),
      delta({ type: 'text_delta', text: 'b' }),
      event({ type: 'content_block_stop', index: 0 }),
      messageDelta(final),
      event({ type: 'message_stop' }),
    ];
    for (const named of [true, false]) {
      const only = sampleOf(events({ output_tokens: 7 }), named);
      assert.deepEqual(
        [only.promptTokens, only.completionTokens, only.tokenEvents, only.finishReason, only.responseModel],
        [114, 7, 2, 'end_turn', 'claude-x'],
        `named ${named}`,
      );
      assert.equal(only.tpot?.tokens, 6, 'n = the final output_tokens');
      const restated = sampleOf(events({ input_tokens: 20, cache_read_input_tokens: 50, output_tokens: 9 }), named);
      assert.deepEqual([restated.promptTokens, restated.completionTokens], [20 + 4 + 50, 9], 'each field: its last report');
      const nulls = sampleOf(events({ input_tokens: null, cache_creation_input_tokens: null, cache_read_input_tokens: null, output_tokens: 3 }), named);
      assert.deepEqual([nulls.promptTokens, nulls.completionTokens], [114, 3], 'null states nothing');
    }
  });

  it('leaves a data-only Messages event to the full classifier', () => {
    const [data] = delta({ type: 'text_delta', text: 'x' });
    assert.equal(skimTokenEvent(Buffer.from(data)), undefined);
    assert.equal(
      skimTokenEvent(Buffer.from('{"choices":[],"usage":{"prompt_tokens":1,"cache_read_input_tokens":2}}')),
      undefined,
      'cache counts are not skimmed',
    );
  });

  it('reads a non-streamed answer: usage with the cache, stop_reason, model; an error body', () => {
    const body = JSON.stringify({
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'claude-x-1',
      content: [{ type: 'text', text: 'Hi' }],
      stop_reason: 'refusal',
      stop_sequence: null,
      usage: { input_tokens: 5, cache_creation_input_tokens: 7, cache_read_input_tokens: 0, output_tokens: 2 },
    });
    const facts = classifyBody(body);
    assert.deepEqual([facts.finishReason, facts.model, facts.error], ['refusal', 'claude-x-1', false]);
    assert.equal(promptTotal(facts.usage!), 12);
    const run = runTap({ api: 'messages', chunks: [Buffer.from(body)], headers: { 'content-type': 'application/json' } });
    assert.deepEqual([run.sample.promptTokens, run.sample.completionTokens, run.sample.finishReason, run.sample.ttft], [12, 2, 'refusal', undefined]);
    assert.equal(classifyBody('{"type":"error","error":{"type":"not_found_error","message":"model"}}').error, true);
  });

  it('keeps usage as reported when no cache field is there, and copies nothing for a full report', () => {
    assert.deepEqual(readUsage({ input_tokens: 3, output_tokens: 4 }), { promptTokens: 3, completionTokens: 4 });
    assert.equal(promptTotal({ promptTokens: 3, completionTokens: 4 }), 3);
    assert.equal(promptTotal({ promptTokens: undefined, completionTokens: 4 }), undefined);
    const later = { promptTokens: 5, completionTokens: 6 };
    assert.equal(mergeUsage({ promptTokens: 1, completionTokens: 2 }, later), later);
    assert.deepEqual(mergeUsage({ promptTokens: 1, completionTokens: 2, cacheReadTokens: 3 }, later), {
      ...later,
      cacheReadTokens: 3,
      cacheCreationTokens: undefined,
      cachedTokens: undefined,
      reasoningTokens: undefined,
    });
  });
});

describe("createDeltaSkimmer (a block's template)", () => {
  it('agrees with the full classifier on deltas that share the template, and leaves the others to it', () => {
    const skimmer = createDeltaSkimmer();
    const random = seededRandom(23);
    const strings = ['"a"', '""', '" "', '"\\""', '"\\\\"', '"x\\"y"', '"é"', '"}}"', '"\\u0000"'];
    const shapes = [
      (t: string) => `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":${t}}}`,
      (t: string) => `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":${t}}}`,
      (t: string) => `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":${t}}}`,
      (t: string) => `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":${t}}}`,
      (t: string) => `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":${t}}}`,
      (t: string) => `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":${t},"thinking":"always"}}`,
      (t: string) => `{"type":"content_block_delta","index":0,"delta":{"text":${t},"text":"last wins"}}`,
      (t: string) => `{"type":"message_delta","delta":{"text":${t}}}`,
    ];
    let skimmed = 0;
    let shape = shapes[0]!;
    for (let i = 0; i < 4000; i++) {
      // A stream's deltas come in runs of one shape (a block), now and then another.
      if (random() < 0.05) shape = shapes[Math.floor(random() * shapes.length)]!;
      const payload = shape(strings[Math.floor(random() * strings.length)]!);
      const bytes = Buffer.from(`xx${payload}yy`);
      const full = classifyEvent(payload, 'content_block_delta');
      const fast = skimmer.skim(bytes, 2, bytes.length - 2);
      if (fast === undefined) {
        if (full.token) skimmer.learn(bytes, 2, bytes.length - 2);
      } else {
        skimmed++;
        assert.equal(fast, full.token, payload);
        // A thinking block's template says reasoning; a text or tool-input block's, visible output.
        if (fast) assert.equal(skimmer.reasoning, full.reasoning === true, payload);
      }
    }
    assert.ok(skimmed > 1800, `skimmed ${skimmed} of 4000`);
  });
});

describe('the /v1/messages route', () => {
  it('is inference under any prefix; count_tokens and batches are not', () => {
    assert.equal(inferenceApi('POST', '/v1/messages'), 'messages');
    assert.equal(inferenceApi('POST', '/anthropic/v1/messages?beta=true'), 'messages');
    assert.equal(inferenceApi('POST', '/v1/messages/'), 'messages');
    assert.equal(inferenceApi('POST', '/v1/messages/count_tokens'), undefined);
    assert.equal(inferenceApi('POST', '/v1/messages/batches'), undefined);
    assert.equal(inferenceApi('GET', '/v1/messages'), undefined);
  });

  it("is labelled by every dialect: the AOM path, the OpenTelemetry operation, vLLM's finished reason", async () => {
    const clock = { now: 0 };
    const labels = { service_id: 'svc' };
    const metrics = createMetrics({
      clock: () => clock.now,
      throughputWindowSeconds: 10,
      version: 'test',
      dialects: ['mindie', 'aom', 'vllm', 'otel'],
      buckets: {},
      aom: { periodSeconds: 30, labels },
      container: noContainer(() => clock.now),
    });
    const timer = createRequestTimer('messages', () => clock.now, metrics.sink);
    timer.identify('claude-x', true);
    timer.responseHeaders(200, true);
    clock.now = 100;
    timer.tokenEvent();
    clock.now = 120;
    timer.tokenEvent();
    timer.usage({ promptTokens: 3, completionTokens: 2, cacheReadTokens: 5, cacheCreationTokens: 1 });
    timer.finishReason('max_tokens');
    timer.responseFinished();
    timer.close(true);
    clock.now = 30_000; // the AOM period ends
    const m = parseExposition(await metrics.render());
    assert.equal(m.value('infer_service_request_total', { ...labels, model_name: 'claude-x', code: '2xx', method: 'POST', path: '/v1/messages' }), 1);
    assert.equal(
      m.sum('gen_ai_server_time_to_first_token_seconds_count', {
        gen_ai_operation_name: 'chat',
        gen_ai_provider_name: 'anthropic',
        gen_ai_request_model: 'claude-x',
      }),
      1,
    );
    assert.equal(m.sum('gen_ai_client_token_usage_sum', { gen_ai_operation_name: 'chat', gen_ai_token_type: 'input' }), 9);
    assert.equal(m.sum('vllm:request_success_total', { model_name: 'claude-x', finished_reason: 'length' }), 1);
    assert.equal(m.value('prompt_tokens_total', { model_name: 'claude-x' }), 9);
    // `openai`, the default provider name, names the API's flavour; an engine's name stays.
    const sample = sampleOf([start({ input_tokens: 1, output_tokens: 1 }), delta({ type: 'text_delta', text: 'x' }), messageDelta({ output_tokens: 1 })]);
    const providers = (providerName: string): Set<unknown> => {
      const names = new Set<unknown>();
      otelMeasurements(sample, { providerName }, (_instrument, _value, attributes) => names.add(attributes['gen_ai.provider.name']));
      return names;
    };
    assert.deepEqual([...providers('openai')], ['anthropic']);
    assert.deepEqual([...providers('vllm')], ['vllm']);
    const chat = runTap({ api: 'chat', chunks: [Buffer.from('data: {"choices":[{"delta":{"content":"x"}}]}\n\n')] }).sample;
    const names = new Set<unknown>();
    otelMeasurements(chat, { providerName: 'openai' }, (_i, _v, attributes) => names.add(attributes['gen_ai.provider.name']));
    assert.deepEqual([...names], ['openai']);
  });
});
