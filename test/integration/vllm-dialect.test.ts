// The vLLM dialect on a real proxy in front of the simulated server: vLLM's names, types, HELP
// texts, labels and buckets on /metrics, figures that match the requests' own samples, agreement
// with the MindIE twins when both are on, and the rule when the upstream is vLLM itself and its
// exposition is relayed: infermeter's vllm:* families win, the engine's same-named ones are
// dropped from the relay (their _created companions with them) and counted.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it, type TestContext } from 'node:test';
import type { Infermeter } from '../../src/app.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { startSimServer } from '../../src/sim/model-server.ts';
import { NODE_CLIENT_LINT, type Exposition } from '../helpers/exposition.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';
import { pythonLes as specLes, VLLM_BUCKETS } from '../helpers/spec-buckets.ts';
import { post } from '../helpers/post.ts';

const MODEL = 'sim-llama-8b';
const l = (labels: Record<string, string> = {}) => ({ model_name: MODEL, engine: '0', ...labels });

// vLLM v0.12's families: type and HELP text (vllm/v1/metrics/loggers.py).
const FAMILIES: ReadonlyArray<readonly [string, string, string]> = [
  ['vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.'],
  ['vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.'],
  ['vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.'],
  ['vllm:num_preemptions_total', 'counter', 'Cumulative number of preemption from the engine.'],
  ['vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.'],
  ['vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.'],
  ['vllm:request_success_total', 'counter', 'Count of successfully processed requests.'],
  ['vllm:request_prompt_tokens', 'histogram', 'Number of prefill tokens processed.'],
  ['vllm:request_generation_tokens', 'histogram', 'Number of generation tokens processed.'],
  ['vllm:time_to_first_token_seconds', 'histogram', 'Histogram of time to first token in seconds.'],
  ['vllm:inter_token_latency_seconds', 'histogram', 'Histogram of inter-token latency in seconds.'],
  ['vllm:request_time_per_output_token_seconds', 'histogram', 'Histogram of time_per_output_token_seconds per request.'],
  ['vllm:e2e_request_latency_seconds', 'histogram', 'Histogram of e2e request latency in seconds.'],
  ['vllm:request_decode_time_seconds', 'histogram', 'Histogram of time spent in DECODE phase for request.'],
];

const near = (a: number | undefined, b: number, what: string): void =>
  assert.ok(a !== undefined && Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);

/** The proxy in front of the simulated server, with the engine's /metrics read on demand. */
async function simProxy(t: TestContext, dialects: string): Promise<Infermeter> {
  const sim = await startSimServer({ ttftMs: 20, interTokenMs: 2, defaultTokens: 6, models: [MODEL] });
  t.after(() => sim.close());
  return startProxy(t, sim.url, {
    INFERMETER_DIALECTS: dialects,
    INFERMETER_UPSTREAM_METRICS: `${sim.url}/metrics`,
    INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '3600',
  });
}

/** A mix: streamed chat and completions (cut by max_tokens), Responses API, non-streamed, a 404, a client that leaves. */
async function traffic(app: Infermeter): Promise<RequestSample[]> {
  const finished = nextFinished(app, 8);
  const messages = [{ role: 'user', content: 'Say something about metrics.' }];
  for (let i = 0; i < 3; i++) await post(`${app.dataUrl}/v1/chat/completions`, { model: MODEL, messages, stream: true });
  await post(`${app.dataUrl}/v1/completions`, { model: MODEL, prompt: 'Once', max_tokens: 4, stream: true });
  await post(`${app.dataUrl}/v1/responses`, { model: MODEL, input: 'Hello', stream: true });
  await post(`${app.dataUrl}/v1/chat/completions`, { model: MODEL, messages });
  await post(`${app.dataUrl}/v1/chat/completions`, { model: 'no-such-model', messages, stream: true });
  // The client leaves after its first bytes of a long answer.
  const abort = new AbortController();
  const res = await fetch(`${app.dataUrl}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({ model: MODEL, messages, stream: true, max_tokens: 500 }),
    signal: abort.signal,
  });
  const reader = res.body!.getReader();
  let text = '';
  while (!text.includes('"content":"the"')) text += new TextDecoder().decode((await reader.read()).value);
  abort.abort();
  await reader.closed.catch(() => undefined);
  return finished;
}

describe('vLLM dialect', () => {
  it("serves vLLM's names, types, labels and buckets in front of the simulated server, with the requests' figures", async (t) => {
    const app = await simProxy(t, 'vllm');
    const samples = (await traffic(app)).filter((s) => s.model === MODEL);
    // The simulated engine frees the abandoned request when its connection closes, which may
    // come a moment after the proxy counted the request as cancelled.
    let x: Exposition;
    for (let tries = 0; ; tries++) {
      await app.metrics.engineScraper!.scrapeOnce();
      x = await scrape(app);
      if (x.value('vllm:num_requests_running', l()) === 0 || tries === 50) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }

    for (const [name, type, help] of FAMILIES) {
      assert.ok(x.text.includes(`# HELP ${name} ${help}\n# TYPE ${name} ${type}\n`), `${name}: HELP and TYPE`);
    }
    assert.doesNotMatch(x.text, /^(request_received_total|time_to_first_token_seconds|infer_service_)/m, 'vLLM alone: no other dialect');
    for (const line of x.text.split('\n').filter((s) => s.startsWith('vllm:'))) {
      assert.match(line, /\bengine="0"/, line);
      assert.match(line, /\bmodel_name="/, line);
    }
    for (const name of FAMILIES.filter(([, type]) => type === 'histogram').map(([n]) => n)) {
      const les = x
        .series(`${name}_bucket`)
        .filter((s) => s.labels.model_name === MODEL)
        .map((s) => s.labels.le);
      assert.ok(VLLM_BUCKETS[name] !== undefined, `${name}: a vLLM histogram with buckets pinned in spec-buckets.ts`);
      assert.deepEqual(les, specLes(VLLM_BUCKETS[name]), `${name}: vLLM's buckets`);
    }

    // finished_reason: the simulated server stops every answer on max_tokens ("length"), but the
    // Responses API's completed status reads as "stop"; the client that left is "abort"; the 404
    // is a failure, not counted (its model has its three series at 0).
    assert.equal(x.value('vllm:request_success_total', l({ finished_reason: 'length' })), 5);
    assert.equal(x.value('vllm:request_success_total', l({ finished_reason: 'stop' })), 1);
    assert.equal(x.value('vllm:request_success_total', l({ finished_reason: 'abort' })), 1);
    assert.equal(x.sum('vllm:request_success_total', { model_name: 'no-such-model' }), 0);

    // Counters, from the same samples.
    const sum = (read: (s: RequestSample) => number | undefined) => samples.reduce((total, s) => total + (read(s) ?? 0), 0);
    assert.equal(
      x.value('vllm:prompt_tokens_total', l()),
      sum((s) => s.promptTokens),
    );
    assert.equal(
      x.value('vllm:generation_tokens_total', l()),
      sum((s) => s.completionTokens),
    );
    assert.ok(sum((s) => s.completionTokens) >= 6 * 3 + 4 + 6 + 6, "every answer's tokens, the cut one's too");

    // Histograms: TTFT, per-request TPOT and decode time once per stream that produced a token;
    // inter-token latency once per token after the first; e2e once per success.
    const streams = samples.filter((s) => s.ttft !== undefined);
    assert.equal(streams.length, 6);
    assert.equal(x.value('vllm:time_to_first_token_seconds_count', l()), 6);
    near(
      x.value('vllm:time_to_first_token_seconds_sum', l()),
      sum((s) => s.ttft),
      'TTFT sum',
    );
    // The sim's 20 ms timer counts whole milliseconds: it can fire up to 1 ms early on the
    // proxy's finer clock.
    assert.ok(
      streams.every((s) => s.ttft! >= 0.019),
      `the simulated TTFT of 20 ms: ${streams.map((s) => s.ttft).join(', ')}`,
    );
    assert.equal(x.value('vllm:request_time_per_output_token_seconds_count', l()), 6);
    near(
      x.value('vllm:request_time_per_output_token_seconds_sum', l()),
      sum((s) => (s.ttft === undefined ? undefined : (s.tpot?.seconds ?? 0))),
      'TPOT sum',
    );
    assert.equal(x.value('vllm:request_decode_time_seconds_count', l()), 6);
    near(
      x.value('vllm:request_decode_time_seconds_sum', l()),
      sum((s) => (s.ttft === undefined ? undefined : s.lastToken! - s.ttft)),
      'decode sum',
    );
    assert.equal(
      x.value('vllm:inter_token_latency_seconds_count', l()),
      sum((s) => (s.tokenEvents > 0 ? s.tokenEvents - 1 : 0)),
    );
    near(x.value('vllm:inter_token_latency_seconds_sum', l()), x.value('vllm:request_decode_time_seconds_sum', l())!, 'ITL sum = decode time');
    assert.equal(x.value('vllm:e2e_request_latency_seconds_count', l()), 6);
    assert.equal(x.value('vllm:request_generation_tokens_count', l()), samples.filter((s) => s.completionTokens !== undefined).length);

    // The engine's own figures (the simulator's vLLM-style /metrics): queues and KV cache.
    assert.equal(x.value('vllm:num_requests_running', l()), 0);
    assert.equal(x.value('vllm:num_requests_waiting', l()), 0);
    assert.equal(x.value('vllm:kv_cache_usage_perc', l()), 0);
    assert.equal(x.value('vllm:num_preemptions_total', l()), 0);
  });

  it('agrees with the MindIE twins when both are on', async (t) => {
    const app = await simProxy(t, 'mindie,vllm');
    await traffic(app);
    const x = await scrape(app);
    const m = { model_name: MODEL };
    const pairs = [
      ['time_to_first_token_seconds', 'vllm:time_to_first_token_seconds'],
      ['inter_token_latency_seconds', 'vllm:inter_token_latency_seconds'],
      ['e2e_request_latency_seconds', 'vllm:e2e_request_latency_seconds'],
      ['request_prompt_tokens', 'vllm:request_prompt_tokens'],
      ['request_generation_tokens', 'vllm:request_generation_tokens'],
    ] as const;
    for (const [mindie, vllm] of pairs) {
      assert.equal(x.value(`${vllm}_count`, l()), x.value(`${mindie}_count`, m), `${vllm}_count`);
      near(x.value(`${vllm}_sum`, l()), x.value(`${mindie}_sum`, m)!, `${vllm}_sum`);
    }
    assert.equal(x.value('vllm:prompt_tokens_total', l()), x.value('prompt_tokens_total', m));
    assert.equal(x.value('vllm:generation_tokens_total', l()), x.value('generation_tokens_total', m));
    const finished = (e: Exposition, reason: string) => e.value('vllm:request_success_total', l({ finished_reason: reason }))!;
    assert.equal(finished(x, 'stop') + finished(x, 'length'), x.value('request_success_total', m));
    assert.equal(finished(x, 'abort'), x.sum('request_cancelled_total', m));
    // TPOT: MindIE counts each request's mean once per token after the first, vLLM once.
    assert.ok(x.value('time_per_output_token_seconds_count', m)! > x.value('vllm:request_time_per_output_token_seconds_count', l())!);
  });

  it('reads bucket overrides from INFERMETER_BUCKETS_VLLM_*', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const app = await startProxy(t, upstream.url, { INFERMETER_DIALECTS: 'vllm', INFERMETER_BUCKETS_VLLM_E2E_REQUEST_LATENCY_SECONDS: '0.5,5' });
    await (await fetch(`${app.dataUrl}/v1/completions`, { method: 'POST', body: '{"model":"m"}' })).arrayBuffer();
    const x = await scrape(app);
    assert.deepEqual(
      x.series('vllm:e2e_request_latency_seconds_bucket').map((s) => s.labels.le),
      ['0.5', '5.0', '+Inf'],
      'as vLLM writes them',
    );
    assert.equal(x.value('vllm:request_success_total', { model_name: 'm', engine: '0', finished_reason: 'stop' }), 1, 'no finish_reason in the body: stop');
  });
});

describe('vLLM dialect with a vLLM upstream relayed', () => {
  const VLLM = readFileSync(new URL('../../fixtures/engine-metrics/vllm-v1.prom', import.meta.url), 'utf8');
  const ENGINE_MODEL = 'meta-llama/Llama-3.1-8B-Instruct';

  it("keeps infermeter's vllm:* families, drops the engine's same-named ones (and their _created) from the relay and counts them", async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) => {
      if (req.url === '/metrics') return { status: 200, headers: { 'content-type': 'text/plain; version=0.0.4' }, body: [{ data: VLLM }] };
      if (req.url === '/v1/models')
        return { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: JSON.stringify({ data: [{ id: ENGINE_MODEL }] }) }] };
      return {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: [{ data: '{"choices":[{"index":0,"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}' }],
      };
    });
    const app = await startProxy(t, upstream.url, {
      INFERMETER_DIALECTS: 'mindie,vllm',
      INFERMETER_UPSTREAM_METRICS: `${upstream.url}/metrics`,
      INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '3600',
      INFERMETER_RELAY_UPSTREAM_METRICS: '1',
    });
    const finished = nextFinished(app, 1);
    await (await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model: ENGINE_MODEL }) })).arrayBuffer();
    await finished;
    await app.metrics.engineScraper!.scrapeOnce();
    const x = await scrape(app);
    const e = { model_name: ENGINE_MODEL, engine: '0' };

    // Each clashing family appears once: infermeter's.
    for (const name of [
      'vllm:num_requests_running',
      'vllm:kv_cache_usage_perc',
      'vllm:num_preemptions_total',
      'vllm:prompt_tokens_total',
      'vllm:generation_tokens_total',
      'vllm:request_success_total',
      'vllm:time_to_first_token_seconds',
      'vllm:inter_token_latency_seconds',
      'vllm:e2e_request_latency_seconds',
    ]) {
      assert.equal(x.text.match(new RegExp(`^# TYPE ${name} `, 'gm'))?.length, 1, `${name} once`);
    }
    assert.equal(x.value('vllm:request_success_total', { ...e, finished_reason: 'stop' }), 1, "infermeter's count, not the engine's 4");
    assert.equal(x.value('vllm:request_success_total', { ...e, finished_reason: 'length' }), 0, "not the engine's 1");
    assert.equal(x.value('vllm:prompt_tokens_total', e), 3, "not the engine's 1200");
    assert.deepEqual(
      x.series('vllm:prompt_tokens_total').map((s) => s.labels.engine),
      ['0'],
      "the engine's per-engine series are gone",
    );
    assert.equal(x.value('vllm:e2e_request_latency_seconds_count', e), 1);
    assert.deepEqual(
      x
        .series('vllm:e2e_request_latency_seconds_bucket')
        .filter((s) => s.labels.le === '+Inf')
        .map((s) => s.value),
      [1],
      "infermeter's one request; the engine's buckets (5 requests) are not relayed",
    );
    assert.deepEqual(x.series('vllm:time_to_first_token_seconds_count'), [], "a non-streamed answer has no TTFT; the engine's 5 are not relayed");
    // The queue and KV-cache figures are the engine's, through the engine mapping: summed and
    // averaged over its two data-parallel engines, under engine="0".
    assert.equal(x.value('vllm:num_requests_running', e), 5);
    assert.equal(x.value('vllm:num_requests_waiting', e), 1);
    assert.equal(x.value('vllm:kv_cache_usage_perc', e), 0.5);
    assert.equal(x.value('vllm:num_preemptions_total', e), 7);
    // _created companions of dropped families are dropped with them.
    assert.deepEqual(x.series('vllm:num_preemptions_created'), []);
    assert.deepEqual(x.series('vllm:prompt_tokens_created'), []);
    // Time inside the engine is the engine's to tell: its queue-time histogram (5 requests) is
    // relayed and infermeter's own estimate steps aside; the phases this engine does not report
    // (prefill, inference) stay infermeter's.
    assert.equal(x.value('vllm:request_queue_time_seconds_count', e), 5);
    assert.equal(x.text.match(/^# TYPE vllm:request_queue_time_seconds /gm)?.length, 1);
    assert.equal(x.value('vllm:request_prefill_time_seconds_count', e), undefined, 'a non-streamed answer has no prefill time');
    assert.equal(x.text.match(/^# TYPE vllm:request_prefill_time_seconds /gm)?.length, 1);
    // The engine-only families the dialect serves: relabelled as its own, the two data-parallel
    // engines summed under engine="0", once (the relay's copy dropped).
    assert.equal(x.value('vllm:prefix_cache_queries_total', e), 2000);
    assert.equal(x.value('vllm:prefix_cache_hits_total', e), 800);
    assert.deepEqual(
      x.series('vllm:prefix_cache_queries_total').map((s) => s.labels.engine),
      ['0'],
    );
    assert.equal(x.text.match(/^# TYPE vllm:prefix_cache_hits_total /gm)?.length, 1);
    // What infermeter does not serve is relayed as the engine wrote it.
    assert.equal(
      x.value('vllm:cache_config_info', {
        block_size: '16',
        cache_dtype: 'auto',
        enable_prefix_caching: 'True',
        engine: '0',
        gpu_memory_utilization: '0.9',
        num_cpu_blocks: 'None',
        num_gpu_blocks: '1000',
      }),
      1,
    );
    assert.equal(x.value('infermeter_relay_families', { state: 'relayed' }), 2);
    assert.equal(x.value('infermeter_relay_families', { state: 'dropped' }), 14);

    if (spawnSync('promtool', ['--version']).status === 0 || process.env.CI) {
      const check = spawnSync('promtool', ['check', 'metrics'], { input: x.text, encoding: 'utf8' });
      const findings = `${check.stdout}${check.stderr}`
        .split('\n')
        .filter(
          (line) =>
            line.trim() !== '' &&
            !/toks_per_s metric names should not contain abbreviated units/.test(line) &&
            !/^vllm:\S+ metric names should not contain ':'$/.test(line.trim()) &&
            !NODE_CLIENT_LINT.includes(line.trim()),
        );
      assert.deepEqual(findings, [], 'promtool: only the names vLLM fixes');
      assert.ok(check.status === 0 || check.status === 3);
    }
  });

  it("relays the engine's vllm:* families untouched when the vllm dialect is off", async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond(() => ({ status: 200, headers: { 'content-type': 'text/plain; version=0.0.4' }, body: [{ data: VLLM }] }));
    const app = await startProxy(t, upstream.url, {
      INFERMETER_UPSTREAM_METRICS: `${upstream.url}/metrics`,
      INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '3600',
      INFERMETER_RELAY_UPSTREAM_METRICS: '1',
    });
    await app.metrics.engineScraper!.scrapeOnce();
    const x = await scrape(app);
    assert.equal(x.value('vllm:request_success_total', { engine: '0', finished_reason: 'stop', model_name: ENGINE_MODEL }), 4);
    assert.equal(x.value('vllm:prompt_tokens_created', { engine: '1', model_name: ENGINE_MODEL }), 1.7645e9);
    assert.equal(x.value('infermeter_relay_families', { state: 'dropped' }), 0);
  });
});
