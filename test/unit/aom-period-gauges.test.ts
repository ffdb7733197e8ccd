// The AOM period gauges against a fake clock: each period's min/avg/max/total are those of
// exactly the requests that fell in it; an empty period reports 0 requests and no min/avg/max.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createRequestTimer } from '../../src/measure/request-timer.ts';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.ts';
import { parseExposition, type Exposition } from '../helpers/exposition.ts';
import { noContainer } from '../helpers/no-container.ts';

const SERVICE = { service_id: 'svc-1', source: 'pod-a' };

function setup(tools = { gpu: false, npu: false }): { metrics: Metrics; clock: { now: number }; scrape: () => Promise<Exposition> } {
  const clock = { now: 0 };
  const metrics = createMetrics({
    clock: () => clock.now,
    throughputWindowSeconds: 10,
    version: 'test',
    dialects: ['aom'],
    buckets: {},
    aom: { periodSeconds: 30, labels: SERVICE },
    openConnections: () => 3,
    container: noContainer(() => clock.now, tools),
  });
  return { metrics, clock, scrape: async () => parseExposition(await metrics.render()) };
}

/** A streamed request: first token after `ttftMs`, then tokens every `gapMs`; usage at the end. */
function stream(m: Metrics, clock: { now: number }, model: string, ttftMs: number, gapMs: number, tokens: number, status = 200): void {
  const start = clock.now;
  const timer = createRequestTimer('chat', () => clock.now, m.sink);
  timer.identify(model, true);
  timer.responseHeaders(status, status === 200);
  if (status === 200) {
    for (let i = 0; i < tokens; i++) {
      clock.now = start + ttftMs + i * gapMs;
      timer.tokenEvent();
    }
    timer.usage({ promptTokens: 10, completionTokens: tokens });
  }
  timer.responseFinished();
  timer.close(true);
}

describe('AOM period gauges', () => {
  it('serve the last completed period, unchanged until the next one ends', async () => {
    const { metrics, clock, scrape } = setup();
    const l = (labels: Record<string, string> = {}) => ({ ...SERVICE, model_name: 'm', ...labels });

    // Period 0 [0 s, 30 s): two streams and one failure.
    clock.now = 1_000;
    stream(metrics, clock, 'm', 100, 20, 11); // TTFT 100 ms, TPOT 20 ms, per token incl. first (100 + 200) / 11
    clock.now = 5_000;
    stream(metrics, clock, 'm', 300, 40, 6); // TTFT 300 ms, TPOT 40 ms, (300 + 200) / 6
    clock.now = 6_000;
    stream(metrics, clock, 'm', 0, 0, 0, 503);

    let m = await scrape();
    assert.deepEqual(m.series('infer_service_request_total'), [], 'nothing before the first period ends');
    assert.equal(m.value('infer_service_request_connect_count', SERVICE), 3, 'connections are read when collected');

    clock.now = 30_000;
    m = await scrape();
    assert.equal(m.value('infer_service_request_total', l({ code: '2xx', method: 'POST', path: '/v1/chat/completions' })), 2);
    assert.equal(m.value('infer_service_request_total', l({ code: '5xx', method: 'POST', path: '/v1/chat/completions' })), 1);
    assert.equal(m.value('infer_service_token_count', l()), 17);
    assert.equal(m.value('infer_service_first_token_min_cost', l()), 100);
    assert.equal(m.value('infer_service_first_token_max_cost', l()), 300);
    assert.equal(m.value('infer_service_first_token_avg_cost', l()), 200);
    // Per token after the first: (10 * 20 + 5 * 40) / 15 tokens, min/max over requests.
    assert.ok(Math.abs(m.value('infer_service_per_token_avg_cost', l())! - 400 / 15) < 1e-9);
    assert.equal(m.value('infer_service_per_token_min_cost', l()), 20);
    assert.equal(m.value('infer_service_per_token_max_cost', l()), 40);
    // Per token, first included: (300 + 500) ms over 17 tokens; per request 300/11 and 500/6.
    assert.ok(Math.abs(m.value('infer_service_token_latency_avg_cost', l())! - 800 / 17) < 1e-9);
    assert.ok(Math.abs(m.value('infer_service_token_latency_min_cost', l())! - 300 / 11) < 1e-9);
    assert.ok(Math.abs(m.value('infer_service_token_latency_max_cost', l())! - 500 / 6) < 1e-9);

    // Period 1 [30 s, 60 s): one stream. Until 60 s, period 0 is still what is served.
    clock.now = 45_000;
    stream(metrics, clock, 'm', 50, 10, 3);
    m = await scrape();
    assert.equal(m.value('infer_service_token_count', l()), 17, 'unchanged until the period ends');
    clock.now = 60_500;
    m = await scrape();
    assert.equal(m.value('infer_service_request_total', l({ code: '2xx', method: 'POST', path: '/v1/chat/completions' })), 1);
    assert.equal(m.value('infer_service_request_total', l({ code: '5xx', method: 'POST', path: '/v1/chat/completions' })), 0);
    assert.equal(m.value('infer_service_token_count', l()), 3);
    assert.equal(m.value('infer_service_first_token_avg_cost', l()), 50);

    // Period 2 [60 s, 90 s): nothing happens.
    clock.now = 95_000;
    m = await scrape();
    assert.equal(m.value('infer_service_request_total', l({ code: '2xx', method: 'POST', path: '/v1/chat/completions' })), 0);
    assert.equal(m.value('infer_service_token_count', l()), 0);
    for (const name of ['first_token', 'per_token', 'token_latency']) {
      for (const stat of ['avg', 'min', 'max']) {
        assert.deepEqual(m.series(`infer_service_${name}_${stat}_cost`), [], `${name} ${stat} left out of an empty period`);
      }
    }
    metrics.close();
  });

  it('publish an empty period, not stale activity, when several periods passed without a look', async () => {
    const { metrics, clock, scrape } = setup();
    const l = { ...SERVICE, model_name: 'm' };
    const ok = { ...l, code: '2xx', method: 'POST', path: '/v1/chat/completions' };
    // Period 1 [30 s, 60 s) has a request; nothing looks again until period 3 [90 s, 120 s).
    clock.now = 31_000;
    assert.deepEqual((await scrape()).series('infer_service_token_count'), [], 'period 0 was empty and had no model yet');
    clock.now = 45_000;
    stream(metrics, clock, 'm', 50, 10, 3);
    clock.now = 59_999;
    assert.equal((await scrape()).value('infer_service_token_count', l), 0, 'period 1 is not over: empty period 0 still served');
    clock.now = 90_000; // period 2 [60 s, 90 s), in which nothing happened, has just ended
    let m = await scrape();
    assert.deepEqual([m.value('infer_service_request_total', ok), m.value('infer_service_token_count', l)], [0, 0], 'period 2 is served: empty');
    assert.deepEqual(m.series('infer_service_first_token_avg_cost'), []);
    // A request finishing on a period's first millisecond belongs to that period.
    clock.now = 120_000 - 50 - 20;
    stream(metrics, clock, 'm', 50, 10, 3); // finishes at exactly 120 s: period 4
    clock.now = 150_000;
    m = await scrape();
    assert.deepEqual([m.value('infer_service_request_total', ok), m.value('infer_service_token_count', l)], [1, 3], 'period 4');
    clock.now = 150_000 + 5 * 30_000; // five periods later, unseen: the last of them is empty
    m = await scrape();
    assert.deepEqual([m.value('infer_service_request_total', ok), m.value('infer_service_token_count', l)], [0, 0]);
    metrics.close();
  });

  it('attribute a request to the period in which it finished, and its TTFT to the period of its first token', async () => {
    const { metrics, clock, scrape } = setup();
    clock.now = 29_900;
    const timer = createRequestTimer('chat', () => clock.now, metrics.sink);
    timer.identify('m', true);
    timer.responseHeaders(200, true);
    clock.now = 29_950;
    timer.tokenEvent(); // first token in period 0
    clock.now = 30_100;
    timer.tokenEvent();
    timer.responseFinished();
    timer.close(true); // finished in period 1
    clock.now = 30_200;
    let m = await scrape();
    const l = { ...SERVICE, model_name: 'm' };
    assert.equal(m.value('infer_service_first_token_avg_cost', l), 50);
    assert.equal(m.value('infer_service_request_total', { ...l, code: '2xx', method: 'POST', path: '/v1/chat/completions' }), 0);
    clock.now = 60_000;
    m = await scrape();
    assert.equal(m.value('infer_service_request_total', { ...l, code: '2xx', method: 'POST', path: '/v1/chat/completions' }), 1);
    assert.deepEqual(m.series('infer_service_first_token_avg_cost'), []);
    metrics.close();
  });
});

describe('AOM accelerator families', () => {
  it('exist only where the vendor tool does', async () => {
    for (const tools of [
      { gpu: false, npu: false },
      { gpu: true, npu: false },
      { gpu: false, npu: true },
    ]) {
      const { metrics } = setup(tools);
      const text = await metrics.render();
      assert.equal(text.includes('# TYPE ma_container_gpu_util gauge'), tools.gpu);
      assert.equal(text.includes('# TYPE ma_container_gpu_mem_used_megabytes gauge'), tools.gpu);
      assert.equal(text.includes('# TYPE ma_container_npu_util gauge'), tools.npu);
      assert.equal(text.includes('# TYPE ma_container_npu_memory_util gauge'), tools.npu);
      // A tool that answers nothing leaves its families without samples, never zeros.
      assert.doesNotMatch(text, /^ma_container_(gpu|npu)_\w+\{/m);
      metrics.close();
    }
  });
});
