// A vLLM Grafana dashboard in front of a server that is not vLLM: a real Prometheus scrapes
// infermeter (INFERMETER_DIALECTS=vllm) in front of the simulated model server, and every query
// of the panels of vLLM's own example dashboard (examples/online_serving/prometheus_grafana/
// grafana.json in the vLLM repository, its 2026 revision: E2E latency, token throughput,
// inter-token latency, TPOT, scheduler state, TTFT, cache utilisation, prompt and generation
// length heatmaps, finish reason, queue time, prefill and decode time, max generation tokens) is
// run the way Grafana runs it, with $model_name and $__rate_interval expanded. Each must answer
// with data, and the counters with exactly the traffic sent.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Infermeter } from '../../src/app.ts';
import { startSimServer } from '../../src/sim/model-server.ts';
import { prometheusAvailable, prometheusSkip, single, startPrometheus, type QueryData } from '../helpers/prometheus.ts';
import { leaveStreamAfter } from '../helpers/client-leaves.ts';
import { startProxy } from '../helpers/proxy-harness.ts';

const LLAMA = 'sim-llama-8b';
const QWEN = 'sim-qwen-7b';
const TOKENS = 12; // the sim's default when a request sets no max_tokens
const MESSAGES = [{ role: 'user', content: 'Say something.' }];
// Four requests at a time go upstream, the rest wait their turn in infermeter's admission
// queue: vLLM's WAITING phase as a proxy sees it.
const MAX_CONCURRENCY = 4;

/** One round per model: streams with and without sampling parameters, one non-streamed, one the client leaves. */
const STREAMS: ReadonlyArray<{ readonly max_tokens?: number; readonly n?: number }> = [{}, {}, { max_tokens: 8 }, { max_tokens: 20, n: 1 }];

async function streamed(url: string, model: string, params: Readonly<Record<string, number>>): Promise<void> {
  const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model, stream: true, messages: MESSAGES, ...params }) });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.match(text, /data: \[DONE\]/);
}

async function nonStreamed(url: string, model: string): Promise<void> {
  const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model, messages: MESSAGES, max_tokens: 6 }) });
  assert.equal(res.status, 200, await res.text());
}

/** A stream the client leaves after its first content: vLLM's `abort`. */
function cancelled(url: string, model: string): Promise<void> {
  return leaveStreamAfter(url, { model, stream: true, messages: MESSAGES }, '"content":"the"');
}

async function round(app: Infermeter): Promise<void> {
  await Promise.all(
    [LLAMA, QWEN].flatMap((model) => [...STREAMS.map((p) => streamed(app.dataUrl, model, p)), nonStreamed(app.dataUrl, model), cancelled(app.dataUrl, model)]),
  );
}
const PER_MODEL_ROUND = STREAMS.length + 2;

/** The example dashboard's panels, by title, each with its queries on `m` (the metric, filtered by model). */
function dashboardQueries(model: string): Array<{ panel: string; expr: string }> {
  const m = (name: string): string => `${name}{model_name="${model}"}`;
  const rate = (name: string): string => `rate(${m(name)}[1m])`;
  const quantiles = (family: string): string[] => [
    ...[0.99, 0.95, 0.9, 0.5].map((q) => `histogram_quantile(${q}, sum by(le) (${rate(`${family}_bucket`)}))`),
    `${rate(`${family}_sum`)}\n/\n${rate(`${family}_count`)}`,
  ];
  const heatmap = (family: string): string => `sum by(le) (increase(${m(`${family}_bucket`)}[1m]))`;
  const panels: Record<string, string[]> = {
    'E2E Request Latency': quantiles('vllm:e2e_request_latency_seconds'),
    'Token Throughput': [rate('vllm:prompt_tokens_total'), rate('vllm:generation_tokens_total')],
    'Inter Token Latency': quantiles('vllm:inter_token_latency_seconds'),
    'Time Per Output Token (TPOT)': quantiles('vllm:request_time_per_output_token_seconds'),
    'Scheduler State': [m('vllm:num_requests_running'), m('vllm:num_requests_waiting')],
    'Time To First Token Latency': quantiles('vllm:time_to_first_token_seconds'),
    'Cache Utilization': [m('vllm:kv_cache_usage_perc')],
    'Request Prompt Length': [heatmap('vllm:request_prompt_tokens')],
    'Request Generation Length': [heatmap('vllm:request_generation_tokens')],
    'Finish Reason': [`sum by(finished_reason) (increase(${m('vllm:request_success_total')}[1m]))`],
    'Queue Time': [rate('vllm:request_queue_time_seconds_sum')],
    'Requests Prefill and Decode Time': [rate('vllm:request_prefill_time_seconds_sum'), rate('vllm:request_decode_time_seconds_sum')],
    'Max Generation Token in Sequence Group': [rate('vllm:request_max_num_generation_tokens_sum')],
  };
  return Object.entries(panels).flatMap(([panel, exprs]) => exprs.map((expr) => ({ panel, expr })));
}

/** The numbers of an answer: a vector's values, or a scalar. */
function numbers(data: QueryData): number[] {
  if (data.resultType === 'vector') return data.result.map((s) => Number(s.value[1]));
  if (data.resultType === 'scalar') return [Number(data.result[1])];
  return [];
}

describe('a vLLM Grafana dashboard in front of a non-vLLM server', { skip: prometheusSkip }, () => {
  it("answers every panel query of vLLM's example dashboard, with the traffic's exact counts", async (t) => {
    assert.ok(prometheusAvailable, 'prometheus must be installed (Debian package prometheus)');
    const sim = await startSimServer({ ttftMs: 60, interTokenMs: 15, defaultTokens: TOKENS, models: [LLAMA, QWEN] });
    t.after(() => sim.close());
    const app = await startProxy(t, sim.url, {
      INFERMETER_DIALECTS: 'vllm',
      INFERMETER_MAX_CONCURRENCY: String(MAX_CONCURRENCY),
      INFERMETER_UPSTREAM_METRICS: `${sim.url}/metrics`,
      INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '1',
    });
    // Round 1 makes every series exist before round 2, so that rate() over both sees an increase.
    // It goes out while Prometheus starts (its first scrape comes 5-6 s in).
    const [prom] = await Promise.all([startPrometheus(t, { targets: [app.metricsUrl!] }), round(app)]);
    await prom.waitForTargetsUp(15_000);

    // The dashboard's model variable: label_values(model_name).
    const finished = `sum(vllm:request_success_total{model_name="${LLAMA}"}) + sum(vllm:request_success_total{model_name="${QWEN}"})`;
    const equals = (n: number) => (data: QueryData) => single(data) === n;
    await prom.waitFor(finished, equals(2 * PER_MODEL_ROUND), 15_000);
    await round(app);
    await prom.waitFor(finished, equals(2 * 2 * PER_MODEL_ROUND), 15_000);
    await prom.waitFor(
      `histogram_quantile(0.9, sum by(le) (rate(vllm:time_to_first_token_seconds_bucket{model_name="${QWEN}"}[1m])))`,
      (d) => Number.isFinite(single(d)),
      10_000,
    );

    const labels = (await (await fetch(`${prom.url}/api/v1/label/model_name/values`)).json()) as { data: string[] };
    assert.deepEqual(labels.data.filter((v) => v.startsWith('sim-')).sort(), [LLAMA, QWEN].sort());

    for (const model of [LLAMA, QWEN]) {
      for (const { panel, expr } of dashboardQueries(model)) {
        const values = numbers(await prom.query(expr));
        assert.ok(values.length > 0, `${model} "${panel}": no data for ${expr}`);
        assert.ok(values.every(Number.isFinite), `${model} "${panel}": ${values.join(', ')} for ${expr}`);
      }
      // Exact counts, from the counters themselves (increase() extrapolates).
      const vector = async (promql: string): Promise<Record<string, number>> =>
        Object.fromEntries((await prom.vector(promql)).map((s) => [s.metric.finished_reason ?? '', s.value]));
      const rounds = 2;
      assert.deepEqual(await vector(`sum by(finished_reason) (vllm:request_success_total{model_name="${model}"})`), {
        length: (STREAMS.length + 1) * rounds, // the sim stops every answer at max_tokens
        abort: rounds,
        stop: 0,
        error: 0,
      });
      const one = async (promql: string): Promise<number> => single(await prom.query(promql));
      const successTokens = STREAMS.reduce((n, p) => n + (p.max_tokens ?? TOKENS), 6);
      const generated = await one(`vllm:generation_tokens_total{model_name="${model}"}`);
      assert.ok(generated > successTokens * rounds && generated < (successTokens + TOKENS) * rounds, `generation tokens ${generated}`);
      assert.equal(await one(`vllm:request_params_max_tokens_count{model_name="${model}"}`), 3 * rounds, 'the requests that set max_tokens');
      assert.equal(await one(`vllm:request_params_max_tokens_sum{model_name="${model}"}`), (8 + 20 + 6) * rounds);
      assert.equal(await one(`vllm:request_params_n_count{model_name="${model}"}`), PER_MODEL_ROUND * rounds, 'n: every finished request, 1 by default');
      assert.equal(await one(`vllm:request_queue_time_seconds_count{model_name="${model}"}`), PER_MODEL_ROUND * rounds);
      assert.equal(
        await one(`vllm:time_to_first_token_seconds_count{model_name="${model}"}`),
        (STREAMS.length + 1) * rounds,
        'the streams, the one left included',
      );
    }
    // 12 requests at once and room for 4: the others waited in the admission queue.
    assert.ok((await prom.vector('sum(vllm:request_queue_time_seconds_sum)'))[0]!.value > 0, 'time spent in the admission queue');
  });
});
