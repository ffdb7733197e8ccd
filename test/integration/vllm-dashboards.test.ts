// vLLM's own Grafana dashboards (../shared/fixtures/vllm-dashboards: the example dashboard,
// vllm_overview, performance_statistics, query_statistics) against infermeter's vllm dialect
// (INFERMETER_DIALECTS=mindie,vllm) in front of the simulated vLLM, each scraped by a real
// Prometheus: once with the engine's /metrics read, once without (INFERMETER_UPSTREAM_METRICS=off).
// A bounded mixed load goes through both (streams with and without usage, non-streamed, HTTP
// 500s, cancels, two models); then every panel query of every dashboard runs as Grafana runs a
// time-series panel: a range query over the load, its variables filled as Grafana fills them
// (test/helpers/grafana.ts), $__rate_interval 4s (Grafana's floor: four scrape intervals of 1 s).
// Each must return data, or be on the documented list (docs/metrics.md, "vLLM's dashboards") of
// queries that need the engine's metrics (without them) or what no simulated text model has (with
// them); the test holds the lists to exactly what is empty.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it, type TestContext } from 'node:test';
import type { Infermeter } from '../../src/app.ts';
import { startSimServer } from '../../src/sim/model-server.ts';
import { leaveStreamAfter } from '../helpers/client-leaves.ts';
import { combinations, expand, fillVariables, panelQueries, vllmDashboards, vllmDashboardsSkip } from '../helpers/grafana.ts';
import { prometheusAvailable, prometheusSkip, single, startPrometheus, type Prometheus } from '../helpers/prometheus.ts';
import { startProxy } from '../helpers/proxy-harness.ts';
import { post } from '../helpers/post.ts';

const LLAMA = 'sim-llama-8b';
const QWEN = 'sim-qwen-7b';
const MODELS = [LLAMA, QWEN];
const MESSAGES = [{ role: 'user', content: 'Say something.' }];
const ROUNDS = 3;

/** Queries empty without the engine's metrics: dashboard › panel › the metrics it reads. */
export const NEED_ENGINE: readonly string[] = [
  'performance_statistics.json › TPS (Tokens Per Second) Over Time › vllm:iteration_tokens_total_count',
  'prometheus_grafana.json › Cache Utilization › vllm:kv_cache_usage_perc',
  'vllm_overview.json › KV cache › vllm:kv_cache_usage_perc',
  'vllm_overview.json › Preemptions › vllm:num_preemptions_total',
  'vllm_overview.json › Prefix hits › vllm:prefix_cache_hits_total vllm:prefix_cache_queries_total',
  'vllm_overview.json › Per-model summary (selected time range) › vllm:kv_cache_usage_perc',
  'vllm_overview.json › Per-model summary (selected time range) › vllm:num_preemptions_total',
  'vllm_overview.json › Scheduler queue › vllm:num_requests_waiting_by_reason',
  'vllm_overview.json › KV cache usage › vllm:kv_cache_usage_perc',
  'vllm_overview.json › Preemptions / s › vllm:num_preemptions_total',
  'vllm_overview.json › Tokens per engine step › vllm:iteration_tokens_total_bucket',
  'vllm_overview.json › Tokens per engine step › vllm:iteration_tokens_total_sum vllm:iteration_tokens_total_count',
  'vllm_overview.json › Cache hit rates › vllm:prefix_cache_hits_total vllm:prefix_cache_queries_total',
  'vllm_overview.json › Cache hit rates › vllm:external_prefix_cache_hits_total vllm:external_prefix_cache_queries_total',
  'vllm_overview.json › Cache hit rates › vllm:mm_cache_hits_total vllm:mm_cache_queries_total',
  'vllm_overview.json › Prompt tokens by source › vllm:prompt_tokens_by_source_total',
];

/**
 * Queries empty even with the engine's metrics: a vLLM reports them only with a KV connector
 * (external prefix cache) or a multimodal model (multimodal cache); the simulated engine has
 * neither, so it does not serve them.
 */
export const NEED_CONNECTOR_OR_MULTIMODAL: readonly string[] = [
  'vllm_overview.json › Cache hit rates › vllm:external_prefix_cache_hits_total vllm:external_prefix_cache_queries_total',
  'vllm_overview.json › Cache hit rates › vllm:mm_cache_hits_total vllm:mm_cache_queries_total',
];

interface Traffic {
  readonly sent: Map<string, { failed: number; cancelled: number; ok: number }>;
}

/** One round per model: streams with and without usage, one with max_tokens, one non-streamed, one 500, one the client leaves. */
async function round(app: Infermeter, traffic: Traffic): Promise<void> {
  await Promise.all(
    MODELS.flatMap((model) => {
      const count = traffic.sent.get(model)!;
      const ok = async (body: Record<string, unknown>): Promise<void> => {
        assert.equal((await post(`${app.dataUrl}/v1/chat/completions`, { model, messages: MESSAGES, ...body })).status, 200);
        count.ok++;
      };
      return [
        ok({ stream: true }),
        ok({ stream: true, stream_options: { include_usage: true } }),
        ok({ stream: true, max_tokens: 8 }),
        ok({ max_tokens: 6 }),
        post(`${app.dataUrl}/v1/chat/completions`, { model, stream: true, messages: MESSAGES }, { 'x-sim-status': '500' }).then(({ status }) => {
          assert.equal(status, 500);
          count.failed++;
        }),
        leaveStreamAfter(app.dataUrl, { model, stream: true, messages: MESSAGES }, '"content":"the"').then(() => void count.cancelled++),
      ];
    }),
  );
  // Routes forwarded unmeasured: vLLM counts /v1/models, leaves /health out, names an unknown path "none".
  for (const path of ['/v1/models', '/health', '/no/such/route?x=1']) await (await fetch(`${app.dataUrl}${path}`)).arrayBuffer();
}

interface Setup {
  readonly app: Infermeter;
  readonly prom: Prometheus;
  readonly traffic: Traffic;
}

async function setup(t: TestContext, engine: boolean): Promise<Setup> {
  const sim = await startSimServer({ ttftMs: 40, interTokenMs: 10, defaultTokens: 12, models: MODELS });
  t.after(() => sim.close());
  const app = await startProxy(t, sim.url, {
    INFERMETER_DIALECTS: 'mindie,vllm',
    INFERMETER_UPSTREAM_METRICS: engine ? `${sim.url}/metrics` : 'off',
    INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '1',
  });
  const traffic: Traffic = { sent: new Map(MODELS.map((m) => [m, { failed: 0, cancelled: 0, ok: 0 }])) };
  // Round 1 goes out while Prometheus starts (its first scrape comes 5-6 s in).
  const [prom] = await Promise.all([startPrometheus(t, { targets: [app.metricsUrl!] }), round(app, traffic)]);
  return { app, prom, traffic };
}

/**
 * Rounds of load, each seen scraped (its chat requests and its forwarded routes) before the next,
 * so that rate() sees every series increase (from round 2 on: round 1 is in the first scrape).
 */
async function drive(s: Setup): Promise<void> {
  await s.prom.waitForTargetsUp(15_000);
  for (let r = 1; r <= ROUNDS; r++) {
    if (r > 1) await round(s.app, s.traffic);
    const finished = r * MODELS.length * 6;
    await s.prom.waitFor('sum(vllm:request_success_total)', (d) => single(d) === finished, 15_000);
    // /v1/models and the unknown path, sent after the chat requests: counted (/health is not).
    await s.prom.waitFor('sum(http_requests_total{handler!="/v1/chat/completions"})', (d) => single(d) === 2 * r, 15_000);
  }
}

const metricsOf = (expr: string): string => [...new Set(expr.match(/\b(?:vllm:[a-z_:]+|http_[a-z_]+|up)\b/g) ?? [])].join(' ');

/** The queries of every dashboard that returned no finite value, as "dashboard › panel › metrics", with their filled text. */
async function emptyQueries(prom: Prometheus, start: number, end: number): Promise<{ empty: Map<string, string>; runs: Record<string, number> }> {
  const empty = new Map<string, string>();
  const runs: Record<string, number> = {};
  const builtins = { __rate_interval: '4s', __range: `${end - start}s`, __interval: '1s' };
  for (const d of vllmDashboards()) {
    const fillings = await fillVariables(d, prom);
    for (const q of panelQueries(d)) {
      for (const values of combinations(q.expr, fillings)) {
        const promql = expand(q.expr, values, builtins);
        runs[d.file] = (runs[d.file] ?? 0) + 1;
        const series = await prom.queryRange(promql, start, end, 1);
        const hasData = series.some((x) => x.values.some(([, v]) => Number.isFinite(Number(v))));
        if (!hasData) empty.set(`${d.file} › ${q.panel} › ${metricsOf(q.expr)}`, promql);
      }
    }
  }
  return { empty, runs };
}

/**
 * Queries run per dashboard: its panel queries, the example dashboard's once per model (its
 * model variable takes one value), vllm_overview's two SLO panels once per threshold (8 each).
 */
const RUNS = { 'performance_statistics.json': 21, 'prometheus_grafana.json': 27 * 2, 'query_statistics.json': 14, 'vllm_overview.json': 84 - 2 + 2 * 8 };

function assertExactly(empty: Map<string, string>, expected: readonly string[], what: string): void {
  const extra = [...empty].filter(([k]) => !expected.includes(k));
  const missing = expected.filter((k) => !empty.has(k));
  assert.deepEqual(
    { unexpectedlyEmpty: extra.map(([k, q]) => `${k}\n    ${q}`), listedButAnswered: missing },
    { unexpectedlyEmpty: [], listedButAnswered: [] },
    `${what}: the empty queries must be exactly the documented list`,
  );
}

describe("vLLM's Grafana dashboards against the vllm dialect", () => {
  it('every panel query of the four dashboards returns data, but the documented engine-only ones', {
    skip: prometheusSkip || vllmDashboardsSkip,
  }, async (t) => {
    assert.ok(prometheusAvailable, 'prometheus must be installed (Debian package prometheus)');
    const dashboards = vllmDashboards();
    assert.deepEqual(
      dashboards.map((d) => d.file),
      ['performance_statistics.json', 'prometheus_grafana.json', 'query_statistics.json', 'vllm_overview.json'],
    );
    const [withEngine, without] = await Promise.all([setup(t, true), setup(t, false)]);
    const start = Math.floor(Date.now() / 1000);
    await Promise.all([drive(withEngine), drive(without)]);
    // The last round is scraped (drive saw it): the last step, at or after that scrape, sees it.
    const end = Math.ceil(Date.now() / 1000);

    for (const s of [withEngine, without]) {
      for (const model of MODELS) {
        const sent = s.traffic.sent.get(model)!;
        const one = async (promql: string): Promise<number> => single(await s.prom.query(promql));
        assert.equal(await one(`sum(vllm:request_success_total{model_name="${model}",finished_reason="error"})`), sent.failed, 'the 500s are vLLM\'s "error"');
        assert.equal(await one(`sum(vllm:request_success_total{model_name="${model}",finished_reason="abort"})`), sent.cancelled);
        assert.equal(
          await one(`infermeter_prompt_tokens_unknown_total{model_name="${model}",outcome="cancelled"}`),
          sent.cancelled,
          "the cancels' prompt tokens are not known: counted",
        );
      }
      const total = [...s.traffic.sent.values()].reduce((n, c) => n + c.ok + c.failed + c.cancelled, 0);
      const failed = [...s.traffic.sent.values()].reduce((n, c) => n + c.failed, 0);
      assert.equal(
        single(await s.prom.query('sum(http_requests_total{handler="/v1/chat/completions",method="POST"})')),
        total,
        'every request, by the route it took',
      );
      assert.equal(single(await s.prom.query('sum(http_requests_total{status="5xx"})')), failed);
      assert.equal(single(await s.prom.query('sum(http_request_duration_seconds_count{handler="/v1/chat/completions"})')), total);
      // The pass-through route, through the data plane's httpRequest hook.
      const passThrough = await s.prom.vector('http_requests_total{handler!="/v1/chat/completions"}');
      assert.deepEqual(
        passThrough.map((x) => `${x.metric.handler} ${x.metric.method} ${x.metric.status} ${x.value}`).sort(),
        [`/v1/models GET 2xx ${ROUNDS}`, `none GET 4xx ${ROUNDS}`],
        'forwarded routes by template; /health left out as vLLM leaves it out',
      );
      assert.equal(single(await s.prom.query('sum(http_request_duration_seconds_count{handler="/v1/models",method="GET"})')), ROUNDS);
    }

    // Both Prometheus servers queried at once.
    const answers = await Promise.all([emptyQueries(withEngine.prom, start, end), emptyQueries(without.prom, start, end)]);
    for (const [{ empty, runs }, expected, what] of [
      [answers[0], NEED_CONNECTOR_OR_MULTIMODAL, "with the engine's metrics"],
      [answers[1], NEED_ENGINE, "without the engine's metrics"],
    ] as const) {
      assert.deepEqual(runs, RUNS, 'every query, with every filling');
      assertExactly(empty, expected, what);
    }
    // Prometheus stopped before infermeter closes (its after hooks run in the order registered,
    // the proxy's first): close() no longer waits on a scraper's connection, but need not cut it.
    await Promise.all([withEngine.prom.stop(), without.prom.stop()]);

    // The lists are the documentation's.
    const docs = readFileSync(new URL('../../docs/metrics.md', import.meta.url), 'utf8');
    for (const entry of [...NEED_ENGINE, ...NEED_CONNECTOR_OR_MULTIMODAL]) {
      const [file, panel] = entry.split(' › ');
      assert.ok(docs.includes(`${file}`) && docs.includes(`${panel}`), `docs/metrics.md names ${entry}`);
    }
  });
});
