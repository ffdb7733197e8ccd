// Time to first visible output over real sockets, the real recordings replayed with a gap
// between events: a stream that opens with reasoning is observed once, later than its TTFT by
// at least its reasoning events' span; a stream with no visible output is never observed; a
// stream without reasoning is observed at its TTFT. Per model and per tenant.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { createRequestTimer } from '../../src/measure/request-timer.ts';
import { realStreamBytes, realStreamsSkip } from '../helpers/fixtures.ts';
import { les, MINDIE_BUCKETS } from '../helpers/spec-buckets.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { sseScript, startReplayUpstream } from '../helpers/replay-upstream.ts';

const own = (file: string) => readFileSync(new URL(`../../fixtures/streams/${file}`, import.meta.url));
const GAP_MS = 3;

// model -> the recording replayed, its route, and its reasoning events before the first visible output.
const STREAMS: Record<string, { bytes: () => Buffer; path: string; reasoningEvents: number | null }> = {
  'deepseek-reasoner': { bytes: () => realStreamBytes('vercelai-deepseek-tool-call.chunks.txt'), path: '/v1/chat/completions', reasoningEvents: 39 },
  'gpt-5-nano': { bytes: () => realStreamBytes('aigateway-openai-chat-stream-detailed-usage.sse'), path: '/v1/chat/completions', reasoningEvents: null },
  'gpt-4o-mini': { bytes: () => realStreamBytes('otel-openai-responses-stream.sse'), path: '/v1/responses', reasoningEvents: 0 },
  'gpt-oss-20b': { bytes: () => own('vllm-responses-stream.sse'), path: '/v1/responses', reasoningEvents: 1 },
  'claude-text': { bytes: () => realStreamBytes('vercelai-anthropic-text.chunks.txt'), path: '/v1/messages', reasoningEvents: 0 },
  'claude-thinking': { bytes: () => own('anthropic-thinking-cache.sse'), path: '/v1/messages', reasoningEvents: 2 },
};

describe('time to first visible output', () => {
  it('is observed once per stream with visible output, after TTFT by the reasoning span, never without visible output', {
    skip: realStreamsSkip,
  }, async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) => sseScript(STREAMS[(JSON.parse(req.body.toString()) as { model: string }).model]!.bytes(), 1, GAP_MS));
    const app = await startProxy(t, upstream.url, { INFERMETER_TENANT: 'header:x-team' });
    const models = Object.keys(STREAMS);
    const finished = nextFinished(app, models.length);
    for (const model of models) {
      const res = await fetch(`${app.dataUrl}${STREAMS[model]!.path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-team': 'blue' },
        body: JSON.stringify({ model, stream: true }),
      });
      await res.arrayBuffer();
    }
    const samples = await finished;
    const m = await scrape(app);
    for (const s of samples) {
      const { reasoningEvents } = STREAMS[s.model]!;
      const count = m.value('infermeter_time_to_first_output_seconds_count', { model_name: s.model });
      const tenantCount = m.value('infermeter_tenant_time_to_first_output_seconds_count', { tenant: 'blue', model_name: s.model });
      const phaseCount = m.value('infermeter_reasoning_phase_seconds_count', { model_name: s.model });
      if (reasoningEvents === null) {
        // gpt-5-nano spent everything on hidden reasoning: nothing visible, nothing observed.
        assert.equal(count, undefined, `${s.model}: no series`);
        assert.equal(tenantCount, undefined, `${s.model}: no tenant series`);
        assert.equal(phaseCount, undefined, `${s.model}: no reasoning phase`);
        continue;
      }
      assert.equal(count, 1, `${s.model}: observed once`);
      assert.equal(tenantCount, 1, `${s.model}: observed once for its tenant`);
      const firstOutput = m.value('infermeter_time_to_first_output_seconds_sum', { model_name: s.model })!;
      if (reasoningEvents === 0) {
        assert.equal(firstOutput, s.ttft, `${s.model}: no reasoning, TTFT`);
        assert.equal(phaseCount, undefined, `${s.model}: no reasoning phase`);
      } else {
        // The visible output came reasoningEvents gaps after the first (reasoning) token at least.
        assert.ok(
          firstOutput - s.ttft! >= (reasoningEvents * GAP_MS - 1) / 1000,
          `${s.model}: ${firstOutput} after TTFT ${s.ttft} by ${reasoningEvents} gaps of ${GAP_MS} ms`,
        );
        assert.equal(phaseCount, 1, `${s.model}: one reasoning phase`);
        const phase = m.value('infermeter_reasoning_phase_seconds_sum', { model_name: s.model })!;
        assert.ok(Math.abs(phase - (firstOutput - s.ttft!)) < 1e-9, `${s.model}: reasoning phase ${phase} = time to first output - TTFT`);
      }
    }
    // The TTFT buckets (MindIE's spec), so that the two compare.
    const bounds = m
      .series('infermeter_time_to_first_output_seconds_bucket')
      .filter((x) => x.labels.model_name === 'deepseek-reasoner')
      .map((x) => x.labels.le);
    assert.deepEqual(bounds, les(MINDIE_BUCKETS.time_to_first_token_seconds));
  });
});

describe('time to first visible output, as the timer tells it', () => {
  it('is told once, at the first visible token, after the first output; deferred until the labels are known; never for reasoning alone', () => {
    const events: string[] = [];
    let now = 0;
    const sink = {
      started: () => void events.push('started'),
      firstOutput: (_i: unknown, ttft: number | undefined) => void events.push(`first ${ttft}`),
      firstVisibleOutput: (_i: unknown, seconds: number, phase: number | undefined) => void events.push(`visible ${seconds} ${phase}`),
      finished: () => void events.push('finished'),
    };
    // Labels known first: told at the visible token itself.
    let timer = createRequestTimer('chat', () => now, sink);
    timer.identify('m', true);
    timer.responseHeaders(200, true);
    now = 100;
    timer.responseBody();
    timer.tokenEvent(undefined, true);
    now = 250;
    timer.responseBody();
    timer.tokenEvent(undefined, true);
    assert.deepEqual(events, ['started', 'first 0.1'], 'reasoning alone: no visible output yet');
    now = 400;
    timer.responseBody();
    timer.tokenEvent();
    now = 500;
    timer.responseBody();
    timer.tokenEvent();
    timer.responseFinished();
    timer.close(true);
    assert.deepEqual(events, ['started', 'first 0.1', 'visible 0.4 0.3', 'finished']);
    // Output before the labels (the body read after the response began): told at identify, in order.
    events.length = 0;
    now = 0;
    timer = createRequestTimer('chat', () => now, sink);
    timer.responseHeaders(200, true);
    now = 50;
    timer.responseBody();
    timer.tokenEvent();
    assert.deepEqual(events, []);
    timer.identify('m', true);
    assert.deepEqual(events, ['started', 'first 0.05', 'visible 0.05 undefined']);
    // Reasoning only, to the end: never told.
    events.length = 0;
    timer = createRequestTimer('chat', () => now, sink);
    timer.identify('m', true);
    timer.responseHeaders(200, true);
    timer.responseBody();
    timer.tokenEvent(undefined, true);
    timer.responseFinished();
    timer.close(true);
    assert.deepEqual(events, ['started', 'first 0', 'finished']);
  });
});
