// A new dialect is its own module plus one row of the dialect table (metrics/dialects/index.ts).
// The dummy dialect below is that module, written here, and its row is added to a table of this
// test's own ([...DIALECTS, DUMMY]), passed to loadConfig and startInfermeter: DIALECTS itself
// is never changed, so nothing leaks into other tests. With that one row the dummy is validated
// by the configuration (its name and its bucket override), built on /metrics, counted on the
// pass-through route through its own hook, and listed in the help of INFERMETER_DIALECTS and
// INFERMETER_BUCKETS_<FAMILY> (the README's rows are the real table's, checked in config.test.ts).
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { Registry } from '@prometheus-io/client';
import { startInfermeter } from '../../src/app.ts';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { CONFIGURATION_TABLE } from '../../src/config/variables.ts';
import { silentLogger } from '../../src/log.ts';
import { bucketsFor, OWN_BUCKETS, type BucketTable } from '../../src/metrics/exposition/buckets.ts';
import type { Dialect, DialectContext } from '../../src/metrics/dialects/dialect.ts';
import { bucketFamiliesHelp, DIALECTS, dialectsHelp, histogramFamilies, type DialectRow } from '../../src/metrics/dialects/index.ts';
import { registerDerived, registerHistogram } from '../../src/metrics/exposition/families.ts';
import { createMetrics } from '../../src/metrics/metrics.ts';
import type { MeasurementState } from '../../src/metrics/state/recorder.ts';
import { parseExposition } from '../helpers/exposition.ts';
import { nextFinished, scrape } from '../helpers/proxy-harness.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';

// ---- The dummy dialect's own module: its buckets, its factory, its pass-through labels. ----

const DUMMY_BUCKETS = { dummy_request_milliseconds: [10, 100, 1000] } as const satisfies BucketTable;

/** Pass-through requests the dummy counted, by route: the test awaits them here. */
type Forwarded = (route: string, method: string, status: number) => void;

function createDummyDialect(registry: Registry, state: MeasurementState, context: DialectContext, forwarded: Forwarded): Dialect {
  const latency = registerHistogram(registry, {
    name: 'dummy_request_milliseconds',
    help: 'End to end, in milliseconds.',
    buckets: bucketsFor(DUMMY_BUCKETS, 'dummy_request_milliseconds', context.buckets),
    labelName: 'model',
  });
  registerDerived(registry, {
    name: 'dummy_requests_total',
    help: 'Inference requests received.',
    type: 'counter',
    collect: () => [...state.models.values()].map((m) => ({ value: m.received, labels: { model: m.model } })),
  });
  const routes = new Map<string, number>();
  registerDerived(registry, {
    name: 'dummy_forwarded_total',
    help: 'Requests forwarded unmeasured, by route.',
    type: 'counter',
    collect: () => [...routes].map(([route, value]) => ({ value, labels: { route } })),
  });
  return {
    name: 'dummy',
    metricNames: ['dummy_request_milliseconds', 'dummy_requests_total', 'dummy_forwarded_total'],
    finished(sample) {
      if (sample.e2e !== undefined) latency.observe(sample.model, sample.e2e * 1000);
    },
    httpRequest(route, method, status) {
      routes.set(route, (routes.get(route) ?? 0) + 1);
      forwarded(route, method, status);
    },
  };
}

/** The dummy's row; `forwarded` lets a test await what its dialect counted. */
function dummyRow(forwarded: Forwarded = () => undefined): DialectRow {
  return {
    name: 'dummy',
    help: "a test's own `dummy_*` names",
    buckets: DUMMY_BUCKETS,
    create: (registry, state, context) => createDummyDialect(registry, state, context, forwarded),
    passThroughLabels: (target, method) => (target.split('?')[0] === '/v1/models' ? ['/v1/models', method ?? 'OTHER'] : undefined),
  };
}

const withDummy = (forwarded?: Forwarded): readonly DialectRow[] => [...DIALECTS, dummyRow(forwarded)];

// ---- The tests. ----

describe('the dialect table: a new dialect is one module plus one row', () => {
  it('is validated by the configuration from the row: its name and its histogram family', () => {
    const env = { INFERMETER_DIALECTS: 'mindie,dummy', INFERMETER_BUCKETS_DUMMY_REQUEST_MILLISECONDS: '5,50' };
    const config = loadConfig(env, { dialectTable: withDummy() });
    assert.deepEqual(config.dialects, ['mindie', 'dummy']);
    assert.deepEqual(config.buckets, { dummy_request_milliseconds: [5, 50] });
    assert.throws(
      () => loadConfig({ INFERMETER_DIALECTS: 'dummy,dummy' }, { dialectTable: withDummy() }),
      /INFERMETER_DIALECTS: expected a comma-separated list of mindie, aom, vllm, otel, dummy, each at most once/,
    );
    // Without the row (the real table): neither the name nor its family is known; nothing leaked.
    assert.throws(
      () => loadConfig(env),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.problems.some((p) => p.variable === 'INFERMETER_DIALECTS' && p.expected === 'a comma-separated list of mindie, aom, vllm, otel, each at most once') &&
        e.problems.some((p) => p.variable === 'INFERMETER_BUCKETS_DUMMY_REQUEST_MILLISECONDS' && p.expected.startsWith('the name of a histogram family')),
    );
    assert.ok(!DIALECTS.some((row) => row.name === 'dummy'));
  });

  it('is listed where the dialects and the bucket families are documented', () => {
    const table = withDummy();
    assert.match(dialectsHelp(table), /`otel` \([^)]*\), `dummy` \(a test's own `dummy_\*` names\), e\.g\./);
    assert.match(bucketFamiliesHelp(table), /; the `dummy` dialect's `dummy_request_milliseconds`; infermeter's own /);
    const own = Object.keys(OWN_BUCKETS);
    assert.deepEqual(
      histogramFamilies(table),
      [...histogramFamilies().slice(0, -own.length), 'dummy_request_milliseconds', ...own],
      "after the other dialects', before infermeter's own",
    );
    // The configuration table (--help, and the README's rows, compared in config.test.ts) is the real table's text.
    const meaning = (name: string) => CONFIGURATION_TABLE.find((v) => v.name === name)?.meaning.join(' ');
    assert.equal(meaning('INFERMETER_DIALECTS'), dialectsHelp(DIALECTS));
    assert.equal(meaning('INFERMETER_BUCKETS_<FAMILY>'), bucketFamiliesHelp(DIALECTS));
    for (const row of DIALECTS) assert.ok(meaning('INFERMETER_DIALECTS')!.includes(`\`${row.name}\` (${row.help})`), row.name);
    assert.ok(!meaning('INFERMETER_DIALECTS')!.includes('dummy'));
  });

  it('is rendered on /metrics, with its bucket override, and counts the pass-through route through its own hook', async (t: TestContext) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) =>
      req.url === '/v1/models'
        ? { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{"data":[{"id":"m"}]}' }] }
        : {
            status: 200,
            headers: { 'content-type': 'application/json' },
            body: [{ data: '{"choices":[{"index":0,"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}' }],
          },
    );
    const counted: Array<[string, string, number]> = [];
    const table = withDummy((route, method, status) => counted.push([route, method, status]));
    const config = loadConfig(
      {
        INFERMETER_UPSTREAM: upstream.url,
        INFERMETER_PORT: '0',
        INFERMETER_MANAGEMENT_PORT: '0',
        INFERMETER_METRICS_PORT: '0',
        INFERMETER_UPSTREAM_METRICS: 'off',
        INFERMETER_DIALECTS: 'mindie,dummy',
        INFERMETER_BUCKETS_DUMMY_REQUEST_MILLISECONDS: '1000,60000',
      },
      { dialectTable: table },
    );
    const app = await startInfermeter(config, { log: silentLogger, dialectTable: table });
    t.after(() => app.close());

    const finished = nextFinished(app, 1);
    await (await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'm' }) })).arrayBuffer();
    await finished;
    // The data plane reports a pass-through request when its response closes, in its own
    // 'close' listener, registered before this one: once this fires, the report is made.
    const closed = new Promise<void>((resolve) => app.dataServer!.once('request', (_req, res) => res.once('close', resolve)));
    await (await fetch(`${app.dataUrl}/v1/models?x=1`)).arrayBuffer();
    await closed;
    assert.deepEqual(counted, [['/v1/models', 'GET', 200]], "the dummy's labels, from its passThroughLabels");

    const x = await scrape(app);
    assert.equal(x.value('dummy_requests_total', { model: 'm' }), 1);
    assert.deepEqual(
      x.series('dummy_request_milliseconds_bucket').map((s) => [s.labels.le, s.value]),
      [
        ['1000', 1],
        ['60000', 1],
        ['+Inf', 1],
      ],
      'the override INFERMETER_BUCKETS_DUMMY_REQUEST_MILLISECONDS, not the default 10, 100, 1000',
    );
    assert.equal(x.value('dummy_forwarded_total', { route: '/v1/models' }), 1);
    assert.equal(x.value('request_received_total', { model_name: 'm' }), 1, 'beside the mindie dialect');
    assert.equal(x.series('http_requests_total').length, 0, 'the vllm dialect, not enabled, counts nothing');
  });

  it('createMetrics builds the dialects of the names, from the table it is given', async (t: TestContext) => {
    const metrics = createMetrics({
      clock: () => 0,
      throughputWindowSeconds: 10,
      version: 'test',
      dialects: ['dummy'],
      dialectTable: withDummy(),
      buckets: {},
      aom: { periodSeconds: 30, labels: {} },
    });
    t.after(() => metrics.close());
    assert.deepEqual(
      metrics.dialects.map((d) => d.name),
      ['dummy'],
    );
    const x = parseExposition(await metrics.render());
    assert.deepEqual(x.series('dummy_request_milliseconds_bucket'), [], 'no request yet: no series');
    assert.match(x.text, /^# TYPE dummy_request_milliseconds histogram$/m);
    assert.throws(
      () =>
        createMetrics({
          clock: () => 0,
          throughputWindowSeconds: 10,
          version: 'test',
          dialects: ['dummy'],
          buckets: {},
          aom: { periodSeconds: 30, labels: {} },
        }),
      /no dialect named dummy in the dialect table \(mindie, aom, vllm, otel\)/,
    );
  });

  it('holds every real dialect once, each bucket family registered by its own dialect and by no other row', () => {
    const names = DIALECTS.map((row) => row.name);
    assert.deepEqual(names, [...new Set(names)]);
    for (const name of names) assert.match(name, /^[a-z][a-z0-9]*$/, 'INFERMETER_DIALECTS lower-cases what it reads');
    const families = histogramFamilies();
    assert.deepEqual(families, [...new Set(families)], "no family in two rows, nor in infermeter's own");
    for (const f of Object.keys(OWN_BUCKETS)) assert.ok(families.includes(f));
    for (const row of DIALECTS) {
      const metrics = createMetrics({
        clock: () => 0,
        throughputWindowSeconds: 10,
        version: 'test',
        dialects: [row.name],
        buckets: {},
        aom: { periodSeconds: 30, labels: {} },
      });
      const dialect = metrics.dialects[0]!;
      metrics.close();
      for (const family of Object.keys(row.buckets))
        assert.ok(dialect.metricNames.includes(family), `${row.name} registers ${family}, whose buckets its row gives`);
    }
  });
});
