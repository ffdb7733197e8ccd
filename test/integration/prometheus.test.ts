// A real Prometheus scrapes two infermeter replicas in front of one simulated model server with
// scripted latencies, and the figures are read back the way operators read them: PromQL through
// Prometheus' query API. Checked: request counts summed over replicas, TTFT/TPOT/e2e quantiles in
// the buckets the scripted latencies imply (MindIE names, seconds), the ModelArts spec's own AOM
// queries (milliseconds), the fault counters, and every query of the Grafana dashboard in
// deploy/grafana/infermeter.json, which must all answer with data. The dashboard's structure is
// checked without Prometheus.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import type { Infermeter } from '../../src/app.ts';
import { startSimServer } from '../../src/sim/model-server.ts';
import { startPrometheus, prometheusAvailable, prometheusSkip, single, type Prometheus, type QueryData } from '../helpers/prometheus.ts';
import { leaveStreamAfter } from '../helpers/client-leaves.ts';
import { figures, quantileRange, recordMeasured, span, within } from '../helpers/measured.ts';
import { startProxy } from '../helpers/proxy-harness.ts';
import { AOM_BUCKETS, INFERMETER_BUCKETS, MINDIE_BUCKETS } from '../helpers/spec-buckets.ts';
import { postResponse } from '../helpers/post.ts';

// ---------------------------------------------------------------------------------------------
// The scripted upstream and the traffic mix.

// On an idle machine: TTFT in time_to_first_token_seconds (0.1, 0.25], AOM first_token_cost
// (100, 200]; TPOT in (0.025, 0.05], AOM per_token_cost (30, 40]; e2e = 140 + 15 × 35 ≈ 665 ms
// in e2e_request_latency_seconds (0, 1], AOM request_cost (500, 1000]. The checks below bound
// the quantiles by what the replicas measured instead, which a loaded machine moves up.
const TTFT_MS = 140;
const GAP_MS = 35;
const TOKENS = 16;
// A non-streamed answer of SLOW_TOKENS arrives after 140 + 149 × 35 = 5355 ms, past the idle
// timeout and the sweep that may make it fire up to 500 ms late: always 504 upstream_timeout.
// The others' one silence (665 ms, before a non-streamed answer) has 3.3 s to spare for a
// loaded machine: with 1.3 s (a 2 s timeout), the second of two runs of the suite beside two
// CPU hogs on two shared cores timed a normal answer out (the simulator shares this process's
// event loop with both replicas).
const IDLE_TIMEOUT_MS = 4000;
const SLOW_TOKENS = 150;
const LLAMA = 'sim-llama-8b';
const QWEN = 'sim-qwen-7b';
const MISSING = 'no-such-model'; // the sim answers 404
const MESSAGES = [{ role: 'user', content: 'Say something.' }]; // the sim counts 11 prompt tokens

/** What one round of the mix adds through one replica. */
const ROUND = {
  streamed: [LLAMA, LLAMA, LLAMA, QWEN, QWEN],
  nonStreamed: [LLAMA, LLAMA, QWEN],
  received: 12, // the 5 + 3 above, 1 cancelled, 1 404, 1 invalid JSON, 1 upstream timeout
  success: 8,
  failed: 3, // 404, 400 (invalid JSON), 504 (timeout)
  cancelled: 1,
  byModel: { [LLAMA]: 7, [QWEN]: 3, [MISSING]: 1, unknown: 1 } as Record<string, number>,
};
const REPLICAS = 2;
const ROUNDS = 2;

async function streamed(dataUrl: string, model: string): Promise<void> {
  const res = await postResponse(`${dataUrl}/v1/chat/completions`, JSON.stringify({ model, stream: true, messages: MESSAGES }));
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.match(text, /data: \[DONE\]/);
}

async function nonStreamed(dataUrl: string, model: string, maxTokens?: number): Promise<number> {
  const res = await postResponse(
    `${dataUrl}/v1/chat/completions`,
    JSON.stringify({ model, messages: MESSAGES, ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }) }),
  );
  await res.arrayBuffer();
  return res.status;
}

/** A streamed request the client leaves once its first token arrived: cancelled while decoding. */
function cancelledStream(dataUrl: string, model: string): Promise<void> {
  return leaveStreamAfter(dataUrl, { model, stream: true, messages: MESSAGES }, '"content":"the"');
}

/** Bytes that are not HTTP: the data plane answers 400 and counts a malformed client. */
function notHttp(dataUrl: string): Promise<string> {
  const { hostname, port } = new URL(dataUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: hostname, port: Number(port) });
    let answer = '';
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    socket.on('close', () => resolve(answer));
    socket.on('connect', () => socket.end('THIS IS NOT HTTP\r\n\r\n'));
  });
}

async function round(app: Infermeter): Promise<void> {
  const url = app.dataUrl;
  const statuses = await Promise.all([
    ...ROUND.streamed.map((m) => streamed(url, m).then(() => 200)),
    ...ROUND.nonStreamed.map((m) => nonStreamed(url, m)),
    cancelledStream(url, LLAMA).then(() => 0),
    nonStreamed(url, MISSING),
    postResponse(`${url}/v1/chat/completions`, '{oops, not json').then(async (r) => {
      await r.arrayBuffer();
      return r.status;
    }),
    nonStreamed(url, LLAMA, SLOW_TOKENS),
    notHttp(url).then((a) => (a.startsWith('HTTP/1.1 400') ? -400 : Number.NaN)),
  ]);
  assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 200, 200, 0, 404, 400, 504, -400]);
}

// ---------------------------------------------------------------------------------------------
// The dashboard.

const DASHBOARD_FILE = new URL('../../deploy/grafana/infermeter.json', import.meta.url);
const DOCS = readFileSync(new URL('../../docs/metrics.md', import.meta.url), 'utf8');

interface Target {
  readonly expr?: string;
  readonly refId?: string;
  readonly datasource?: { readonly type?: string; readonly uid?: string };
}
interface Panel {
  readonly id?: number;
  readonly type?: string;
  readonly title?: string;
  readonly gridPos?: { readonly x: number; readonly y: number; readonly w: number; readonly h: number };
  readonly datasource?: { readonly type?: string; readonly uid?: string };
  readonly targets?: readonly Target[];
  readonly panels?: readonly Panel[];
}
interface Dashboard {
  readonly schemaVersion: number;
  readonly title: string;
  readonly uid: string;
  readonly panels: readonly Panel[];
  readonly templating: { readonly list: ReadonlyArray<Record<string, unknown>> };
}

const dashboard = (): Dashboard => JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;

/** Every panel, those nested in (collapsed) rows included. */
function allPanels(panels: readonly Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

function dashboardQueries(d: Dashboard): Array<{ panel: string; refId: string; expr: string }> {
  return allPanels(d.panels).flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title ?? `#${p.id}`, refId: t.refId ?? '?', expr: t.expr ?? '' })));
}

/** Grafana's variables as Grafana would expand them for a 5-minute dashboard range. */
function expand(expr: string, model: string, job: string, instance = '.*'): string {
  return expr
    .replaceAll('$__rate_interval', '1m')
    .replaceAll('$__range', '5m')
    .replaceAll('$__interval', '15s')
    .replaceAll('${model}', model)
    .replaceAll('$model', model)
    .replaceAll('${job}', job)
    .replaceAll('$job', job)
    .replaceAll('${instance}', instance)
    .replaceAll('$instance', instance);
}

/**
 * Each selector of a metric in an expression, with its matchers ('' where it has none): a
 * query that selects no job would count a MindIE engine's same-named series with infermeter's.
 */
function selectors(expr: string): Array<{ name: string; matchers: string }> {
  const out: Array<{ name: string; matchers: string }> = [];
  for (const name of metricNames(expr)) {
    const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    for (const m of expr.matchAll(new RegExp(`(?<![\\w:"])${escaped}(?![\\w:])(\\{[^}]*\\})?`, 'g'))) out.push({ name, matchers: m[1] ?? '' });
  }
  return out;
}

const PROMQL_WORDS = new Set([
  'sum',
  'avg',
  'max',
  'min',
  'count',
  'by',
  'without',
  'on',
  'ignoring',
  'or',
  'and',
  'unless',
  'rate',
  'increase',
  'irate',
  'histogram_quantile',
  'label_replace',
  'vector',
  'le',
  'model_name',
  'kind',
  'reason',
  'counter',
  'instance',
  'process',
  'inf',
  'nan',
  'slo_class',
  'slo',
  'job',
]);

/** Metric names an expression reads (strings, durations and PromQL words left out). */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\$\{?\w+\}?/g, '');
  const names = new Set<string>();
  for (const m of bare.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) if (!PROMQL_WORDS.has(m[0].toLowerCase())) names.add(m[0]);
  return [...names];
}

const documented = (name: string): boolean => [name, name.replace(/_(bucket|sum|count)$/, '')].some((n) => DOCS.includes(`\`${n}\``));

describe('Grafana dashboard deploy/grafana/infermeter.json', () => {
  it('is a valid Grafana dashboard on a ${datasource} variable, with a model variable and only documented metrics', () => {
    const d = dashboard();
    assert.equal(typeof d.title, 'string');
    assert.match(d.uid, /^[A-Za-z0-9_-]{1,40}$/);
    assert.ok(d.schemaVersion >= 36 && d.schemaVersion <= 41, `schemaVersion ${d.schemaVersion}`);

    const vars = new Map(d.templating.list.map((v) => [v.name as string, v]));
    const ds = vars.get('datasource');
    assert.ok(ds, 'a datasource variable');
    assert.equal(ds.type, 'datasource');
    assert.equal(ds.query, 'prometheus');
    const model = vars.get('model');
    assert.ok(model, 'a model variable');
    assert.equal(model.type, 'query');
    assert.deepEqual(model.datasource, { type: 'prometheus', uid: '${datasource}' });
    const queryOf = (v: Record<string, unknown>): string => (typeof v.query === 'string' ? v.query : (v.query as { query: string }).query).replace(/\s+/g, '');
    assert.equal(queryOf(model), 'label_values(request_received_total{job=~"$job",instance=~"$instance"},model_name)');
    assert.equal(model.multi, true);
    assert.equal(model.includeAll, true);
    // $job: the jobs of infermeter_build_info, a family only infermeter exposes, so "All" (every
    // such job, no allValue) never takes in an engine's job; $instance: within them.
    const job = vars.get('job');
    const instance = vars.get('instance');
    assert.ok(job && instance, 'job and instance variables');
    assert.equal(queryOf(job), 'label_values(infermeter_build_info,job)');
    assert.equal(job.allValue, undefined, "All is the list of infermeter's jobs, not a regex that could match an engine's");
    assert.equal(queryOf(instance), 'label_values(infermeter_build_info{job=~"$job"},instance)');
    for (const v of [job, instance]) {
      assert.equal(v.type, 'query');
      assert.deepEqual(v.datasource, { type: 'prometheus', uid: '${datasource}' });
      assert.equal(v.multi, true);
      assert.equal(v.includeAll, true);
      assert.deepEqual((v.current as { value: unknown }).value, ['$__all'], `${String(v.name)} defaults to All`);
    }
    const order = d.templating.list.map((v) => v.name);
    assert.ok(order.indexOf('job') < order.indexOf('instance') && order.indexOf('instance') < order.indexOf('model'), 'each variable after those it uses');

    const panels = allPanels(d.panels);
    const ids = panels.map((p) => p.id);
    assert.ok(
      ids.every((id) => Number.isInteger(id)),
      'every panel has an integer id',
    );
    assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
    for (const p of panels) {
      const g = p.gridPos;
      assert.ok(g, `panel ${p.title} has a gridPos`);
      for (const k of ['x', 'y', 'w', 'h'] as const) assert.ok(Number.isInteger(g[k]) && g[k] >= 0, `panel ${p.title} gridPos.${k}`);
      assert.ok(g.w >= 1 && g.h >= 1 && g.x + g.w <= 24, `panel ${p.title} fits the 24-column grid`);
      if (p.type === 'row') continue;
      assert.deepEqual(p.datasource, { type: 'prometheus', uid: '${datasource}' }, `panel ${p.title} uses the datasource variable`);
      assert.ok((p.targets ?? []).length > 0, `panel ${p.title} has queries`);
      const refIds = (p.targets ?? []).map((t) => t.refId);
      assert.equal(new Set(refIds).size, refIds.length, `panel ${p.title} refIds are unique`);
      for (const t of p.targets ?? []) {
        if (t.datasource !== undefined) assert.deepEqual(t.datasource, { type: 'prometheus', uid: '${datasource}' }, `panel ${p.title} ${t.refId} datasource`);
        assert.ok(typeof t.expr === 'string' && t.expr.trim() !== '', `panel ${p.title} ${t.refId} has an expr`);
      }
    }
    // Panels do not overlap.
    const boxes = panels.map((p) => ({ title: p.title, ...p.gridPos! }));
    for (const [i, a] of boxes.entries())
      for (const b of boxes.slice(i + 1))
        assert.ok(a.x + a.w <= b.x || b.x + b.w <= a.x || a.y + a.h <= b.y || b.y + b.h <= a.y, `panels ${a.title} and ${b.title} overlap`);

    const titles = panels.map((p) => p.title ?? '').join('\n');
    for (const want of [
      /request rate/i,
      /failure/i,
      /first token/i,
      /per output token/i,
      /end-to-end/i,
      /tokens per second/i,
      /in-flight/i,
      /kv-cache/i,
      /upstream errors/i,
      /by tenant/i,
      /first visible output/i,
      /proxy's own time/i,
    ])
      assert.match(titles, want);
    // A TTFT panel with exemplars on (Grafana shows each bucket's request id, scraped as OpenMetrics).
    const exemplars = panels.filter((p) =>
      (p.targets ?? []).some((t) => (t as { exemplar?: boolean }).exemplar === true && /time_to_first_token_seconds_bucket/.test(t.expr ?? '')),
    );
    assert.ok(exemplars.length >= 1, 'an exemplar-enabled TTFT panel');

    const queries = dashboardQueries(d);
    for (const q of queries) {
      for (const name of metricNames(q.expr)) assert.ok(documented(name), `${q.panel} ${q.refId}: ${name} is not in docs/metrics.md`);
      // Every query aggregates over replicas (sum/avg/max/count by ...), and filters by model
      // where its metric has the label.
      assert.match(q.expr, /\b(sum|avg|max|count)\b/, `${q.panel} ${q.refId} aggregates`);
      const perModel = metricNames(q.expr).some((n) => !n.startsWith('infermeter_'));
      if (perModel) assert.match(q.expr, /model_name=~"\$model"/, `${q.panel} ${q.refId} filters model_name=~"$model"`);
      // Every selector selects infermeter's job and the instance (docs/deploy.md).
      const selected = selectors(q.expr);
      assert.ok(selected.length > 0, `${q.panel} ${q.refId}: no selector found`);
      for (const { name, matchers } of selected) {
        assert.match(matchers, /\bjob=~"\$job"/, `${q.panel} ${q.refId}: ${name}${matchers} selects no job`);
        assert.match(matchers, /\binstance=~"\$instance"/, `${q.panel} ${q.refId}: ${name}${matchers} selects no instance`);
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Prometheus against two replicas.

/** A prices file for the run: per-token prices for every model, and a pool. */
function pricesFile(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'infermeter-prices-'));
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
  const path = join(dir, 'prices.yaml');
  writeFileSync(
    path,
    'currency: USD\nversion: "test"\nmodels:\n  - match: "*"\n    per_million_tokens: { prompt: 0.20, completion: 0.60 }\n    per_hour: 12.50\n',
  );
  return path;
}

const inRange = (v: number, low: number, high: number, what: string): void => assert.ok(v > low && v <= high, `${what} = ${v}, expected in (${low}, ${high}]`);

describe('Prometheus scraping two infermeter replicas', { skip: prometheusSkip }, () => {
  it('sums requests over replicas, puts the quantiles in the scripted buckets, answers the AOM spec queries and every dashboard query', async (t) => {
    assert.ok(prometheusAvailable, 'prometheus must be installed (Debian package prometheus)');
    const started = Date.now();
    const phases: string[] = [];
    const phase = (name: string): void => void phases.push(`${name} at ${Date.now() - started} ms`);
    const sim = await startSimServer({ ttftMs: TTFT_MS, interTokenMs: GAP_MS, defaultTokens: TOKENS, models: [LLAMA, QWEN] });
    t.after(() => sim.close());
    const env = {
      INFERMETER_DIALECTS: 'mindie,aom',
      INFERMETER_AOM_SERVICE_ID: 'svc-test',
      INFERMETER_AOM_PERIOD_SECONDS: '2',
      // The dashboard's "By tenant" row (requests without the header are tenant none).
      INFERMETER_TENANT: 'header:x-tenant-id',
      // The dashboard's SLO row.
      INFERMETER_SLO: 'ttft:2000 tpot:200',
      // The dashboard's chargeback row (per-token prices: a cost from each request's end).
      INFERMETER_PRICES_FILE: pricesFile(t),
      INFERMETER_UPSTREAM_METRICS: `${sim.url}/metrics`,
      INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '1',
      INFERMETER_UPSTREAM_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS),
    };
    const replicas: Infermeter[] = [];
    for (let i = 0; i < REPLICAS; i++) replicas.push(await startProxy(t, sim.url, env));
    // What the replicas measured, whatever Prometheus makes of it: the quantiles and means read
    // through PromQL are bounded by these, never by how fast this machine is.
    const measured = replicas.map(recordMeasured);
    // Round 1 makes every series exist in Prometheus before round 2: rate() sees no increase in a
    // series' first sample, so round 2's traffic is what the rates measure. It goes out while
    // Prometheus starts (its first scrape comes 5-6 s in), and is seen scraped before round 2.
    const [prom] = await Promise.all([
      startPrometheus(t, { targets: replicas.map((r) => r.metricsUrl!) }).then((p: Prometheus) => {
        phase('prometheus ready');
        return p;
      }),
      Promise.all(replicas.map(round)).then(() => phase('round 1 sent')),
    ]);
    await prom.waitForTargetsUp(15_000);
    phase('targets up');

    const finished = 'sum(request_success_total) + sum(request_failed_total) + sum(request_cancelled_total)';
    const equals = (n: number) => (data: QueryData) => single(data) === n;
    await prom.waitFor(finished, equals(ROUND.received * REPLICAS), 15_000);
    phase('round 1 scraped');
    await Promise.all(replicas.map(round));
    phase('round 2 sent');
    const total = ROUND.received * REPLICAS * ROUNDS;
    await prom.waitFor(finished, equals(total), 15_000);
    phase('round 2 scraped');
    const observed: Record<string, number> = {};
    const dashboardValues: string[] = [];
    const value = async (promql: string): Promise<number> => (observed[promql] = single(await prom.query(promql)));

    await t.test('counters summed over replicas equal the requests sent', async () => {
      assert.equal(await value('sum(request_received_total)'), total);
      assert.equal(await value('sum(request_success_total)'), ROUND.success * REPLICAS * ROUNDS);
      assert.equal(await value('sum(request_failed_total)'), ROUND.failed * REPLICAS * ROUNDS);
      assert.equal(await value('sum(request_cancelled_total{phase="decoding"})'), ROUND.cancelled * REPLICAS * ROUNDS);
      const byModel = await prom.vector('sum by (model_name) (request_received_total)');
      assert.deepEqual(
        Object.fromEntries(byModel.map((s) => [s.metric.model_name, s.value])),
        Object.fromEntries(Object.entries(ROUND.byModel).map(([m, n]) => [m, n * REPLICAS * ROUNDS])),
      );
      const perReplica = await prom.vector('sum by (instance) (request_received_total)');
      assert.deepEqual(
        perReplica.map((s) => s.value),
        [total / REPLICAS, total / REPLICAS],
      );
      // Every kind is there from the start (at 0), so rate() and alerts see a series before the first fault.
      const upstreamErrors = await prom.vector('sum by (kind) (infermeter_upstream_errors_total)');
      assert.deepEqual(Object.fromEntries(upstreamErrors.map((s) => [s.metric.kind, s.value])), {
        upstream_protocol: 0,
        upstream_reset: 0,
        upstream_timeout: REPLICAS * ROUNDS,
        upstream_unreachable: 0,
      });
      assert.equal(await value('sum(infermeter_client_errors_total{kind="malformed"})'), REPLICAS * ROUNDS);
      assert.equal(await value('sum(infermeter_request_body_uninspected_total{reason="invalid_json"})'), REPLICAS * ROUNDS);
      // Every successful request reported its usage (16 generated tokens); a cancelled stream
      // keeps the one or two tokens it delivered.
      const successTokens = ROUND.success * REPLICAS * ROUNDS * TOKENS;
      const generated = await value('sum(generation_tokens_total)');
      assert.ok(generated > successTokens && generated <= successTokens + ROUND.cancelled * REPLICAS * ROUNDS * TOKENS, `generation tokens ${generated}`);
    });

    // The rate windows need two samples with round 2 between them; the last scrape above may
    // hold round 2 already, so wait until the quantile is a number.
    const ttftP90 = 'histogram_quantile(0.9, sum by (le) (rate(time_to_first_token_seconds_bucket[1m])))';
    await prom.waitFor(ttftP90, (d) => Number.isFinite(single(d)), 10_000);
    phase('rates defined');

    // The script bounds what the replicas measure from below: the first token cannot arrive
    // before the simulated server sends it (a timer fires at most 1 ms early), nor the last.
    // (A single gap or TPOT can: a first token held up by a busy machine shortens them.) Above,
    // the load on this machine decides. So a quantile is checked to lie in the buckets from the
    // smallest to the largest value the replicas measured, and a mean between those values: a
    // quantile read from the wrong family, bucket or unit falls outside.
    const samples = measured.flatMap((m) => m.samples);
    const succeeded = samples.filter((x) => x.outcome === 'success');
    const ttfts = figures(samples, (x) => x.ttft);
    const tpots = figures(samples, (x) => x.tpot?.seconds);
    const e2es = figures(succeeded, (x) => x.e2e);
    const gaps = measured.flatMap((m) => m.gaps);
    t.diagnostic(`measured: TTFT ${span(ttfts)} s, TPOT ${span(tpots)} s, e2e ${span(e2es)} s, inter-token ${span(gaps)} s over ${gaps.length} gaps`);

    await t.test('what the replicas measured is at least what the script waits', () => {
      assert.ok(span(ttfts)[0] >= (TTFT_MS - 1) / 1000, `fastest TTFT ${span(ttfts)[0]}`);
      for (const x of succeeded.filter((y) => y.streamed)) {
        // The last of 16 tokens: 16 timers, each up to 1 ms early.
        assert.ok(x.lastToken! >= (TTFT_MS + (TOKENS - 1) * GAP_MS - TOKENS) / 1000, `last token at ${x.lastToken} s`);
        assert.ok(
          Math.abs(x.ttft! + x.tpot!.seconds * x.tpot!.tokens - x.lastToken!) < 1e-9,
          `TTFT ${x.ttft} + TPOT ${JSON.stringify(x.tpot)} = last token ${x.lastToken}`,
        );
        assert.ok(x.ttft! < x.lastToken! && x.lastToken! <= x.e2e!, `TTFT ${x.ttft} < last token ${x.lastToken} <= e2e ${x.e2e}`);
      }
    });

    await t.test('MindIE quantiles lie in the buckets of what the replicas measured', async () => {
      within(await value(ttftP90), quantileRange(ttfts, MINDIE_BUCKETS.time_to_first_token_seconds), 'TTFT p90 (s)');
      within(
        await value('histogram_quantile(0.5, sum by (le) (rate(time_to_first_token_seconds_bucket[1m])))'),
        quantileRange(ttfts, MINDIE_BUCKETS.time_to_first_token_seconds),
        'TTFT p50 (s)',
      );
      within(
        await value('histogram_quantile(0.9, sum by (le) (rate(time_per_output_token_seconds_bucket[1m])))'),
        quantileRange(tpots, MINDIE_BUCKETS.time_per_output_token_seconds),
        'TPOT p90 (s)',
      );
      within(
        await value('histogram_quantile(0.9, sum by (le) (rate(inter_token_latency_seconds_bucket[1m])))'),
        quantileRange(gaps, INFERMETER_BUCKETS.inter_token_latency_seconds),
        'inter-token latency p90 (s)',
      );
      within(
        await value('histogram_quantile(0.9, sum by (le) (rate(e2e_request_latency_seconds_bucket[1m])))'),
        quantileRange(e2es, MINDIE_BUCKETS.e2e_request_latency_seconds),
        'e2e p90 (s)',
      );
      // The mean is exact where the quantile interpolates: between the fastest and slowest measured.
      within(
        await value('sum(rate(e2e_request_latency_seconds_sum[1m])) / sum(rate(e2e_request_latency_seconds_count[1m]))'),
        [(TTFT_MS + (TOKENS - 1) * GAP_MS - 5) / 1000, span(e2es)[1]],
        'e2e mean (s)',
      );
      within(await value('sum(rate(time_to_first_token_seconds_sum[1m])) / sum(rate(time_to_first_token_seconds_count[1m]))'), span(ttfts), 'TTFT mean (s)');
    });

    await t.test("the ModelArts spec's AOM queries (ms) agree with what the replicas measured", async () => {
      const svc = 'service_id="svc-test"';
      const ms = (xs: number[]) => xs.map((x) => x * 1000);
      // As the spec writes them (004: "histogram_quantile(0.90, avg(rate(..._bucket{service_id=...}[1m]))by(le))").
      within(
        await value(`histogram_quantile(0.90, avg(rate(infer_service_request_cost_bucket{${svc}}[1m])) by (le))`),
        quantileRange(ms(e2es), AOM_BUCKETS.infer_service_request_cost),
        'request cost p90 (ms)',
      );
      within(
        await value(`histogram_quantile(0.90,avg(rate(infer_service_first_token_cost_bucket{${svc}}[1m]))by(le))`),
        quantileRange(ms(ttfts), AOM_BUCKETS.infer_service_first_token_cost),
        'first token cost p90 (ms)',
      );
      within(
        await value(`histogram_quantile(0.90,avg(rate(infer_service_per_token_cost_bucket{${svc}}[1m]))by(le))`),
        quantileRange(ms(tpots), AOM_BUCKETS.infer_service_per_token_cost),
        'per token cost p90 (ms)',
      );
      // Token counts are the script's: 11 prompt tokens each; 16 generated, or the one or two a
      // cancelled stream delivered.
      inRange(await value(`histogram_quantile(0.90,avg(rate(infer_service_input_token_quantity_bucket{${svc}}[1m]))by(le))`), 0, 16, 'input tokens p90');
      inRange(await value(`histogram_quantile(0.90,avg(rate(infer_service_output_token_quantity_bucket{${svc}}[1m]))by(le))`), 8, 16, 'output tokens p90');
      // The spec's averages: increase over [59999ms] of _sum / _count, by service_id.
      const avg = (family: string) =>
        `sum(increase(${family}_sum{${svc}}[59999ms]))by(service_id)/sum(increase(${family}_count{${svc}}[59999ms]))by(service_id)`;
      within(await value(avg('infer_service_first_token_cost')), span(ms(ttfts)), 'first token cost avg (ms)');
      within(await value(avg('infer_service_per_token_cost')), span(ms(tpots)), 'per token cost avg (ms)');
      // "Average latency equals infer_service_request_cost_sum divided by infer_service_request_cost_count."
      within(
        await value(`sum(infer_service_request_cost_sum{${svc}}) / sum(infer_service_request_cost_count{${svc}})`),
        [TTFT_MS + (TOKENS - 1) * GAP_MS - 5, span(ms(e2es))[1]],
        'request cost avg (ms)',
      );
      // Twins: each AOM histogram has its MindIE twin's count, over both replicas.
      assert.equal(await value(`sum(infer_service_first_token_cost_count{${svc}}) - sum(time_to_first_token_seconds_count)`), 0);
      assert.equal(await value(`count(count by (instance) (infer_service_request_cost_count{${svc}}))`), REPLICAS);
    });

    await t.test('the engine families are read from the simulated engine', async () => {
      const kv = await prom.vector('npu_cache_usage_perc');
      assert.equal(kv.length, REPLICAS * 2, 'both models on both replicas');
      for (const s of kv) assert.ok(s.value >= 0 && s.value <= 1, `KV-cache usage ${s.value}`);
      assert.equal(await value('sum(infermeter_upstream_metrics_up)'), REPLICAS);
      assert.equal(await value('sum(infermeter_upstream_engine_info{engine="vllm"})'), REPLICAS);
    });

    await t.test('every dashboard query answers with data', async () => {
      const queries = dashboardQueries(dashboard());
      assert.ok(queries.length >= 15, `${queries.length} queries`);
      // $job's "All", as Grafana fills it: every value of label_values(infermeter_build_info, job).
      const labelValues = async (label: string, match: string): Promise<string[]> =>
        ((await (await fetch(`${prom.url}/api/v1/label/${label}/values?${new URLSearchParams({ 'match[]': match })}`)).json()) as { data: string[] }).data;
      const jobs = await labelValues('job', 'infermeter_build_info');
      assert.deepEqual(jobs, ['infermeter']);
      const job = jobs.join('|');
      const instances = await labelValues('instance', `infermeter_build_info{job=~"${job}"}`);
      assert.equal(instances.length, REPLICAS);
      // "All" (the variable's allValue) and a multi-value selection as Grafana writes it; one
      // instance on its own.
      for (const [model, instance] of [
        ['.*', '.*'],
        [`${LLAMA}|${QWEN}`, '.*'],
        ['.*', instances[0]!],
      ] as const) {
        for (const q of queries) {
          // A pool's cost is settled each minute of the pool's time: this run is shorter than one
          // (the split is checked to the nano-unit on an injected clock, test/integration/chargeback.test.ts).
          if (q.panel === 'Idle share of the pools (per day)') continue;
          const expr = expand(q.expr, model, job, instance);
          assert.doesNotMatch(expr, /\$/, `${q.panel} ${q.refId}: a variable left unexpanded in ${expr}`);
          const data = await prom.query(expr);
          assert.equal(data.resultType, 'vector', `${q.panel} ${q.refId}`);
          assert.ok(data.result.length > 0, `${q.panel} ${q.refId} has no data for model=~"${model}", instance=~"${instance}": ${expr}`);
          const values = data.result.map((s) => Number(s.value[1]));
          assert.ok(
            values.some(Number.isFinite),
            `${q.panel} ${q.refId} has only NaN for model=~"${model}", instance=~"${instance}": ${JSON.stringify(data.result)}`,
          );
          if (model === '.*' && instance === '.*')
            dashboardValues.push(
              `[${q.panel} ${q.refId}] ${data.result.map((r) => `${JSON.stringify(r.metric)}=${Number(r.value[1]).toPrecision(4)}`).join(' ')}`,
            );
        }
      }
      // The model variable's label_values(request_received_total{job=~"$job", instance=~"$instance"}, model_name), through the API Grafana uses.
      const models = await labelValues('model_name', `request_received_total{job=~"${job}", instance=~".*"}`);
      assert.deepEqual([...models].sort(), [MISSING, QWEN, LLAMA, 'unknown'].sort());
    });

    for (const [q, v] of Object.entries(observed)) t.diagnostic(`${v}\t${q}`);
    for (const line of dashboardValues) t.diagnostic(line);
    phase('queries done');
    t.diagnostic(phases.join('; '));
  });
});
