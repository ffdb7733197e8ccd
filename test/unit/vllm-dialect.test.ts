// The vLLM dialect against a fake clock: scripted requests through the recorder give exact
// values under vLLM's names and labels. vLLM's per-request TPOT is one observation per request
// (MindIE's is n - 1), its inter-token latency one per token after the first, and
// request_success_total splits finished requests by vLLM's finished_reason.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createRequestTimer, type RequestTimer } from '../../src/measure/request-timer.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { vllmFinishedReason } from '../../src/metrics/dialects/vllm.ts';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.ts';
import { parseExposition, type Exposition } from '../helpers/exposition.ts';
import { pythonLes as specLes, VLLM_BUCKETS } from '../helpers/spec-buckets.ts';

const AOM = { periodSeconds: 30, labels: {} };

function setup(dialects: Array<'vllm' | 'mindie'> = ['vllm'], buckets = {}): { metrics: Metrics; clock: { now: number }; scrape: () => Promise<Exposition> } {
  const clock = { now: 0 };
  const metrics = createMetrics({ clock: () => clock.now, throughputWindowSeconds: 10, version: 'test', dialects, buckets, aom: AOM });
  return { metrics, clock, scrape: async () => parseExposition(await metrics.render()) };
}

interface Script {
  /** Milliseconds after the start at which token events arrive. */
  readonly tokensAt: readonly number[];
  readonly usage?: { promptTokens: number; completionTokens: number };
  readonly finishReason?: string;
  /** Milliseconds after the start of the last byte to the client (success) or of the client leaving. */
  readonly endAt: number;
  readonly delivered?: boolean;
}

/** A streamed request starting at the clock's current time. */
function stream(m: Metrics, clock: { now: number }, model: string, s: Script): void {
  const start = clock.now;
  const timer = createRequestTimer('chat', () => clock.now, m.sink);
  timer.identify(model, true);
  timer.responseHeaders(200, true);
  for (const at of s.tokensAt) {
    clock.now = start + at;
    timer.responseBody();
    timer.tokenEvent();
  }
  if (s.usage !== undefined) timer.usage(s.usage);
  if (s.finishReason !== undefined) timer.finishReason(s.finishReason);
  clock.now = start + s.endAt;
  if (s.delivered !== false) timer.responseFinished();
  timer.close(s.delivered !== false);
}

const close = (actual: number | undefined, expected: number, what: string): void =>
  assert.ok(actual !== undefined && Math.abs(actual - expected) < 1e-12, `${what}: ${actual} vs ${expected}`);

describe('vLLM dialect', () => {
  it("gives exact values under vLLM's names for a scripted mix of requests", async () => {
    const { metrics, clock, scrape } = setup();
    const l = (labels: Record<string, string> = {}) => ({ model_name: 'm', engine: '0', ...labels });

    // 1. Five tokens 20 ms apart after a TTFT of 100 ms; usage 10 + 5; stop.
    clock.now = 1_000;
    stream(metrics, clock, 'm', { tokensAt: [100, 120, 140, 160, 180], usage: { promptTokens: 10, completionTokens: 5 }, finishReason: 'stop', endAt: 200 });
    // 2. Three events 100 ms apart carrying 9 tokens (usage at the end only); length.
    clock.now = 2_000;
    stream(metrics, clock, 'm', { tokensAt: [50, 150, 250], usage: { promptTokens: 20, completionTokens: 9 }, finishReason: 'length', endAt: 300 });
    // 3. One token only: vLLM's per-request TPOT and decode time are 0. Ends on tool calls: stop.
    clock.now = 3_000;
    stream(metrics, clock, 'm', { tokensAt: [400], usage: { promptTokens: 30, completionTokens: 1 }, finishReason: 'tool_calls', endAt: 500 });
    // 4. The client leaves while decoding, after two tokens: abort.
    clock.now = 4_000;
    stream(metrics, clock, 'm', { tokensAt: [60, 90], endAt: 100, delivered: false });
    // 5. The upstream answers 500: a failure, not a finished request for vLLM.
    clock.now = 5_000;
    const failed = createRequestTimer('chat', () => clock.now, metrics.sink);
    failed.identify('m', false);
    failed.responseHeaders(500, false);
    clock.now = 5_010;
    failed.close(true);
    // 6. A non-streamed answer with usage, cut by max_tokens.
    clock.now = 6_000;
    const whole = createRequestTimer('chat', () => clock.now, metrics.sink);
    whole.identify('m', false);
    whole.responseHeaders(200, false);
    clock.now = 6_700;
    whole.responseBody();
    whole.usage({ promptTokens: 3, completionTokens: 4 });
    whole.finishReason('length');
    whole.responseFinished();
    whole.close(true);
    // 7. Another model, still waiting for its first token; and a third one running.
    const waiting: RequestTimer = createRequestTimer('chat', () => clock.now, metrics.sink);
    waiting.identify('q', true);
    const running: RequestTimer = createRequestTimer('chat', () => clock.now, metrics.sink);
    running.identify('q', true);
    running.responseHeaders(200, true);
    running.tokenEvent();

    const x = await scrape();
    // Counters and gauges, from the shared state.
    assert.equal(x.value('vllm:request_success_total', l({ finished_reason: 'stop' })), 2);
    assert.equal(x.value('vllm:request_success_total', l({ finished_reason: 'length' })), 2);
    assert.equal(x.value('vllm:request_success_total', l({ finished_reason: 'abort' })), 1);
    for (const reason of ['stop', 'length', 'abort']) {
      assert.equal(x.value('vllm:request_success_total', { model_name: 'q', engine: '0', finished_reason: reason }), 0, `q ${reason}: a series from the start`);
    }
    assert.equal(x.value('vllm:prompt_tokens_total', l()), 10 + 20 + 30 + 3);
    assert.equal(x.value('vllm:generation_tokens_total', l()), 5 + 9 + 1 + 2 + 4, 'the cancelled stream keeps its 2 token events');
    assert.equal(x.value('vllm:num_requests_running', l()), 0);
    assert.equal(x.value('vllm:num_requests_waiting', l()), 0);
    assert.equal(x.value('vllm:num_requests_waiting', { model_name: 'q', engine: '0' }), 1);
    assert.equal(x.value('vllm:num_requests_running', { model_name: 'q', engine: '0' }), 1);
    assert.deepEqual(x.series('vllm:kv_cache_usage_perc'), [], "engine-only: no samples without the engine's metrics");
    assert.deepEqual(x.series('vllm:num_preemptions_total'), []);

    // TTFT: streams 1-4 (100, 50, 400, 60 ms) and q's running one (0 ms).
    assert.equal(x.value('vllm:time_to_first_token_seconds_count', l()), 4);
    close(x.value('vllm:time_to_first_token_seconds_sum', l()), 0.61, 'TTFT sum');
    assert.equal(x.value('vllm:time_to_first_token_seconds_bucket', l({ le: '0.06' })), 2);
    assert.equal(x.value('vllm:time_to_first_token_seconds_bucket', l({ le: '0.1' })), 3);

    // Inter-token latency: one observation per gap (1 token each, no cumulative usage):
    // 4 x 20 ms, 2 x 100 ms, 1 x 30 ms.
    assert.equal(x.value('vllm:inter_token_latency_seconds_count', l()), 7);
    close(x.value('vllm:inter_token_latency_seconds_sum', l()), 0.08 + 0.2 + 0.03, 'ITL sum');
    assert.equal(x.value('vllm:inter_token_latency_seconds_bucket', l({ le: '0.01' })), 0);
    assert.equal(x.value('vllm:inter_token_latency_seconds_bucket', l({ le: '0.025' })), 4);
    assert.equal(x.value('vllm:inter_token_latency_seconds_bucket', l({ le: '0.05' })), 5);
    assert.equal(x.value('vllm:inter_token_latency_seconds_bucket', l({ le: '0.1' })), 7);

    // Per-request TPOT: one observation per stream with a first token, weight 1 (not n - 1):
    // 80 ms / 4 = 20 ms; 200 ms / 8 = 25 ms; 0 (one token); 30 ms / 1 = 30 ms.
    assert.equal(x.value('vllm:request_time_per_output_token_seconds_count', l()), 4);
    close(x.value('vllm:request_time_per_output_token_seconds_sum', l()), 0.02 + 0.025 + 0 + 0.03, 'TPOT sum');
    assert.equal(x.value('vllm:request_time_per_output_token_seconds_bucket', l({ le: '0.01' })), 1, 'the one-token request observes 0');
    assert.equal(x.value('vllm:request_time_per_output_token_seconds_bucket', l({ le: '0.025' })), 3);
    assert.equal(x.value('vllm:request_time_per_output_token_seconds_bucket', l({ le: '0.05' })), 4);

    // Decode time: last token - first token of each stream with a first token.
    assert.equal(x.value('vllm:request_decode_time_seconds_count', l()), 4);
    close(x.value('vllm:request_decode_time_seconds_sum', l()), 0.08 + 0.2 + 0 + 0.03, 'decode sum');

    // e2e: successful requests only (1, 2, 3, 6).
    assert.equal(x.value('vllm:e2e_request_latency_seconds_count', l()), 4);
    close(x.value('vllm:e2e_request_latency_seconds_sum', l()), 0.2 + 0.3 + 0.5 + 0.7, 'e2e sum');
    assert.equal(x.value('vllm:e2e_request_latency_seconds_bucket', l({ le: '0.3' })), 2);
    assert.equal(x.value('vllm:e2e_request_latency_seconds_bucket', l({ le: '0.5' })), 3);
    assert.equal(x.value('vllm:e2e_request_latency_seconds_bucket', l({ le: '0.8' })), 4);

    // Token histograms: every request with a count (the cancelled one has no prompt tokens).
    assert.equal(x.value('vllm:request_prompt_tokens_count', l()), 4);
    assert.equal(x.value('vllm:request_prompt_tokens_sum', l()), 63);
    assert.equal(x.value('vllm:request_generation_tokens_count', l()), 5);
    assert.equal(x.value('vllm:request_generation_tokens_sum', l()), 21);
    assert.equal(x.value('vllm:request_generation_tokens_bucket', l({ le: '1.0' })), 1);
    assert.equal(x.value('vllm:request_generation_tokens_bucket', l({ le: '5.0' })), 4);
    assert.equal(x.value('vllm:request_generation_tokens_bucket', l({ le: '10.0' })), 5);

    // vLLM's buckets, with +Inf.
    assert.deepEqual(
      x
        .series('vllm:time_to_first_token_seconds_bucket')
        .filter((s) => s.labels.model_name === 'm')
        .map((s) => s.labels.le),
      specLes(VLLM_BUCKETS['vllm:time_to_first_token_seconds']!),
    );
    metrics.close();
  });

  it('counts TPOT once per request where MindIE counts it once per token', async () => {
    const { metrics, clock, scrape } = setup(['mindie', 'vllm']);
    stream(metrics, clock, 'm', { tokensAt: [50, 150, 250], usage: { promptTokens: 20, completionTokens: 9 }, finishReason: 'stop', endAt: 300 });
    const x = await scrape();
    assert.equal(x.value('time_per_output_token_seconds_count', { model_name: 'm' }), 8);
    close(x.value('time_per_output_token_seconds_sum', { model_name: 'm' }), 0.2, 'MindIE: the decode time');
    assert.equal(x.value('vllm:request_time_per_output_token_seconds_count', { model_name: 'm', engine: '0' }), 1);
    close(x.value('vllm:request_time_per_output_token_seconds_sum', { model_name: 'm', engine: '0' }), 0.025, 'vLLM: the mean');
    // The inter-token latencies agree: both are per token as the wire shows them.
    assert.equal(
      x.value('vllm:inter_token_latency_seconds_count', { model_name: 'm', engine: '0' }),
      x.value('inter_token_latency_seconds_count', { model_name: 'm' }),
    );
    assert.equal(
      x.value('vllm:inter_token_latency_seconds_sum', { model_name: 'm', engine: '0' }),
      x.value('inter_token_latency_seconds_sum', { model_name: 'm' }),
    );
    metrics.close();
  });

  it('shares one gap among the tokens of an event with cumulative usage', async () => {
    const { metrics, clock, scrape } = setup();
    const timer = createRequestTimer('chat', () => clock.now, metrics.sink);
    timer.identify('m', true);
    timer.responseHeaders(200, true);
    clock.now = 100;
    timer.tokenEvent(1);
    clock.now = 160;
    timer.tokenEvent(4); // 60 ms over 3 tokens
    timer.responseFinished();
    timer.close(true);
    const x = await scrape();
    assert.equal(x.value('vllm:inter_token_latency_seconds_count', { model_name: 'm', engine: '0' }), 3);
    close(x.value('vllm:inter_token_latency_seconds_sum', { model_name: 'm', engine: '0' }), 0.06, 'ITL sum');
    assert.equal(x.value('vllm:inter_token_latency_seconds_bucket', { model_name: 'm', engine: '0', le: '0.01' }), 0);
    assert.equal(x.value('vllm:inter_token_latency_seconds_bucket', { model_name: 'm', engine: '0', le: '0.025' }), 3);
    metrics.close();
  });

  it('applies bucket overrides of its families', async () => {
    const { metrics, clock, scrape } = setup(['vllm'], { 'vllm:e2e_request_latency_seconds': [1, 10] });
    stream(metrics, clock, 'm', { tokensAt: [10], endAt: 20 });
    const x = await scrape();
    assert.deepEqual(
      x.series('vllm:e2e_request_latency_seconds_bucket').map((s) => s.labels.le),
      ['1.0', '10.0', '+Inf'],
      'written as vLLM writes them',
    );
    metrics.close();
  });

  it("derives vLLM's finished_reason from the outcome and the upstream's finish_reason", () => {
    const sample = (outcome: RequestSample['outcome'], finishReason?: string) => ({ outcome, finishReason }) as RequestSample;
    assert.equal(vllmFinishedReason(sample('success', 'stop')), 'stop');
    assert.equal(vllmFinishedReason(sample('success', 'length')), 'length');
    assert.equal(vllmFinishedReason(sample('success', 'abort')), 'abort');
    for (const other of ['tool_calls', 'content_filter', 'eos_token', 'function_call', undefined]) {
      assert.equal(vllmFinishedReason(sample('success', other)), 'stop', String(other));
    }
    assert.equal(vllmFinishedReason(sample('cancelled', 'length')), 'abort');
    assert.equal(vllmFinishedReason(sample('cancelled')), 'abort');
    const failed = (status: number, failure: RequestSample['failure']) => ({ outcome: 'failed', status, failure }) as RequestSample;
    assert.equal(vllmFinishedReason(failed(500, 'upstream_status')), 'error', 'the engine took it and failed');
    assert.equal(vllmFinishedReason(failed(200, 'stream_error')), 'error');
    assert.equal(vllmFinishedReason(failed(502, 'upstream_unreachable')), 'error');
    assert.equal(vllmFinishedReason(failed(200, 'upstream_reset')), 'error');
    assert.equal(vllmFinishedReason(failed(404, 'upstream_status')), undefined, 'refused before the engine: not counted, as vLLM');
    assert.equal(vllmFinishedReason(failed(400, 'upstream_status')), undefined);
  });

  it('gives the phases as a proxy sees them, and the request parameters as the request set them', async () => {
    const { metrics, clock, scrape } = setup();
    const l = { model_name: 'm', engine: '0' };
    // 1. Waited 500 ms in the admission queue, first token at 1 s, last at 3 s; max_tokens 64, n 2.
    clock.now = 10_000;
    let timer = createRequestTimer('chat', () => clock.now, metrics.sink);
    timer.identify('m', true, { maxTokens: 64, n: 2 });
    clock.now = 10_500;
    timer.admitted();
    timer.responseHeaders(200, true);
    for (const at of [11_000, 12_000, 13_000]) {
      clock.now = at;
      timer.responseBody();
      timer.tokenEvent();
    }
    timer.responseFinished();
    timer.close(true);
    // 2. No limit, no parameters: queue 0, n 1, no max_tokens observation; cancelled while decoding.
    clock.now = 20_000;
    stream(metrics, clock, 'm', { tokensAt: [200, 400], endAt: 500, delivered: false });
    // 3. Embeddings: phases (none streamed) and no sampling parameters.
    timer = createRequestTimer('embeddings', () => clock.now, metrics.sink);
    timer.identify('m', false, { maxTokens: 5, n: 3 });
    timer.responseHeaders(200, false);
    timer.responseBody();
    timer.responseFinished();
    timer.close(true);
    // 4. A failure: vLLM would not have finished it; none of these families observes it.
    timer = createRequestTimer('chat', () => clock.now, metrics.sink);
    timer.identify('m', true, { maxTokens: 7, n: 1 });
    timer.fail('upstream_status', 500);
    timer.close(true);

    const x = await scrape();
    assert.equal(x.value('vllm:request_queue_time_seconds_count', l), 3);
    close(x.value('vllm:request_queue_time_seconds_sum', l), 0.5, 'queue sum');
    assert.equal(x.value('vllm:request_queue_time_seconds_bucket', { ...l, le: '0.5' }), 3);
    assert.equal(x.value('vllm:request_prefill_time_seconds_count', l), 2);
    close(x.value('vllm:request_prefill_time_seconds_sum', l), 0.5 + 0.2, 'prefill: TTFT minus the queue');
    assert.equal(x.value('vllm:request_inference_time_seconds_count', l), 2);
    close(x.value('vllm:request_inference_time_seconds_sum', l), 2.5 + 0.4, 'inference: last token minus the queue');
    assert.equal(x.value('vllm:request_params_n_count', l), 2);
    assert.equal(x.value('vllm:request_params_n_sum', l), 3, 'n 2, and the default 1');
    assert.equal(x.value('vllm:request_params_n_bucket', { ...l, le: '1.0' }), 1);
    assert.equal(x.value('vllm:request_params_max_tokens_count', l), 1);
    assert.equal(x.value('vllm:request_params_max_tokens_sum', l), 64);
    assert.equal(x.value('vllm:request_max_num_generation_tokens_count', l), 1);
    assert.equal(x.value('vllm:request_max_num_generation_tokens_bucket', { ...l, le: '50.0' }), 0);
    assert.equal(x.value('vllm:request_max_num_generation_tokens_bucket', { ...l, le: '100.0' }), 1);
  });

  it("takes the phases from the engine's own timings where the answer carries them, and counts those requests", async () => {
    const { metrics, clock, scrape } = setup();
    const l = { model_name: 'm', engine: '0' };
    const timings = (promptMs: number, predictedMs: number) => ({ promptTokens: 40, promptMs, predictedTokens: 3, predictedMs });
    // 1. A stream: waited 100 ms in infermeter's queue, first token at 900 ms, last at 1300 ms;
    //    the engine says prefill 250 ms, decode 380 ms. Queue: 900 - 250 = 650 ms (all that
    //    came before its prefill), not the 100 ms infermeter saw.
    clock.now = 10_000;
    let timer = createRequestTimer('chat', () => clock.now, metrics.sink);
    timer.identify('m', true);
    clock.now = 10_100;
    timer.admitted();
    timer.responseHeaders(200, true);
    for (const at of [10_900, 11_100, 11_300]) {
      clock.now = at;
      timer.responseBody();
      timer.tokenEvent();
    }
    timer.engineTimings(timings(250, 380));
    timer.responseFinished();
    timer.close(true);
    // 2. A whole answer, head at 2 s: prefill 500 ms, decode 1200 ms, queue 2 - 0.5 - 1.2 = 0.3 s.
    clock.now = 20_000;
    timer = createRequestTimer('chat', () => clock.now, metrics.sink);
    timer.identify('m', false);
    clock.now = 22_000;
    timer.responseHeaders(200, false);
    timer.responseBody();
    timer.engineTimings(timings(500, 1200));
    timer.responseFinished();
    timer.close(true);
    // 3. A stream without timings: the estimate (queue 0, prefill = TTFT 200 ms, decode 100 ms).
    clock.now = 30_000;
    stream(metrics, clock, 'm', { tokensAt: [200, 300], endAt: 400 });

    const x = await scrape();
    assert.equal(x.value('vllm:request_queue_time_seconds_count', l), 3);
    close(x.value('vllm:request_queue_time_seconds_sum', l), 0.65 + 0.3 + 0, "queue: the time before the engine's prefill");
    assert.equal(x.value('vllm:request_prefill_time_seconds_count', l), 3);
    close(x.value('vllm:request_prefill_time_seconds_sum', l), 0.25 + 0.5 + 0.2, "prefill: the engine's, then the estimate");
    assert.equal(x.value('vllm:request_decode_time_seconds_count', l), 3);
    close(x.value('vllm:request_decode_time_seconds_sum', l), 0.38 + 1.2 + 0.1, "decode: the engine's, then the estimate");
    close(x.value('vllm:request_inference_time_seconds_sum', l), 0.63 + 1.7 + 0.3, 'inference: prefill + decode');
    assert.equal(x.value('vllm:request_time_per_output_token_seconds_count', l), 2, "TPOT stays the streams' own");
    assert.equal(x.value('infermeter_engine_timings_total', { model_name: 'm' }), 2, "requests whose phases are the engine's");
    metrics.close();
  });

  it("lists its families in vLLM's order, every one prefixed vllm: but vLLM's HTTP layer's", () => {
    const { metrics } = setup();
    const vllm = metrics.dialects.find((d) => d.name === 'vllm')!;
    assert.deepEqual(vllm.metricNames, [
      'vllm:num_requests_running',
      'vllm:num_requests_waiting',
      'vllm:kv_cache_usage_perc',
      'vllm:gpu_cache_usage_perc',
      'vllm:num_preemptions_total',
      'vllm:prompt_tokens_total',
      'vllm:generation_tokens_total',
      'vllm:request_success_total',
      'vllm:num_requests_waiting_by_reason',
      'vllm:prefix_cache_queries_total',
      'vllm:prefix_cache_hits_total',
      'vllm:external_prefix_cache_queries_total',
      'vllm:external_prefix_cache_hits_total',
      'vllm:mm_cache_queries_total',
      'vllm:mm_cache_hits_total',
      'vllm:prompt_tokens_by_source_total',
      'vllm:iteration_tokens_total',
      'vllm:request_prefill_kv_computed_tokens',
      'http_requests_total',
      'http_request_duration_seconds',
      'vllm:request_prompt_tokens',
      'vllm:request_generation_tokens',
      'vllm:request_max_num_generation_tokens',
      'vllm:request_params_n',
      'vllm:request_params_max_tokens',
      'vllm:time_to_first_token_seconds',
      'vllm:inter_token_latency_seconds',
      'vllm:request_time_per_output_token_seconds',
      'vllm:e2e_request_latency_seconds',
      'vllm:request_queue_time_seconds',
      'vllm:request_inference_time_seconds',
      'vllm:request_prefill_time_seconds',
      'vllm:request_decode_time_seconds',
      'vllm:time_per_output_token_seconds',
      'vllm:time_per_output_tokens_seconds',
    ]);
    metrics.close();
  });
});
