// The OTLP export against a receiver of the test's own (node:http, protobuf and JSON decoded):
// real traffic through the proxy in front of the simulated model server arrives as the
// semantic-convention histograms, with their attributes, the conventions' bucket boundaries,
// the resource from the standard variables, and counts and sums equal to the otel dialect's on
// /metrics (one measurement, two ways out). Close awaits a last export; with workers, the
// primary exports everyone's traffic. Waits are on the receiver's exports, never fixed sleeps.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { hostname } from 'node:os';
import { describe, it, type TestContext } from 'node:test';
import { startInfermeter } from '../../src/app.ts';
import { startClusterPrimary } from '../../src/cluster/primary.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger, silentLogger } from '../../src/log.ts';
import { startSimServer, type SimServer } from '../../src/sim/model-server.ts';
import type { Exposition } from '../helpers/exposition.ts';
import { OTEL_BUCKETS } from '../helpers/spec-buckets.ts';
import { startOtlpReceiver, type HistogramPoint, type OtlpReceiver, type ReceivedExport, type ReceivedMetric } from '../helpers/otlp-receiver.ts';
import { nextFinished, scrape } from '../helpers/proxy-harness.ts';
import { post } from '../helpers/post.ts';

const MODEL = 'sim-llama-8b';

const SEMCONV = [
  { name: 'gen_ai.server.time_to_first_token', unit: 's', family: 'gen_ai_server_time_to_first_token_seconds' },
  { name: 'gen_ai.server.time_per_output_token', unit: 's', family: 'gen_ai_server_time_per_output_token_seconds' },
  { name: 'gen_ai.server.request.duration', unit: 's', family: 'gen_ai_server_request_duration_seconds' },
  { name: 'gen_ai.client.token.usage', unit: '{token}', family: 'gen_ai_client_token_usage' },
] as const;

const metric = (e: ReceivedExport, name: string): ReceivedMetric | undefined => e.metrics.find((m) => m.name === name);
const total = (e: ReceivedExport, name: string): number => (metric(e, name)?.points ?? []).reduce((n, p) => n + p.count, 0);

/** The point whose attributes include `match` exactly as given (and no other series does). */
function point(e: ReceivedExport, name: string, match: Record<string, string | number>): HistogramPoint {
  const hits = (metric(e, name)?.points ?? []).filter(
    (p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v) && Object.keys(p.attributes).length === Object.keys(match).length,
  );
  assert.equal(hits.length, 1, `${name} ${JSON.stringify(match)}: one point (of ${JSON.stringify(metric(e, name)?.points.map((p) => p.attributes))})`);
  return hits[0]!;
}

/** Every OTLP point has its twin on /metrics: labels = attributes with `_` for `.`, same count, sum and buckets. */
function assertSameAsExposition(e: ReceivedExport, m: Exposition): void {
  for (const { name, family } of SEMCONV) {
    const points = metric(e, name)?.points ?? [];
    assert.equal(points.length, m.series(`${family}_count`).length, `${family}: as many series on /metrics as points in OTLP`);
    for (const p of points) {
      const labels = Object.fromEntries(Object.entries(p.attributes).map(([k, v]) => [k.replace(/\./g, '_'), String(v)]));
      assert.equal(m.value(`${family}_count`, labels), p.count, `${family}_count ${JSON.stringify(labels)}`);
      const sum = m.value(`${family}_sum`, labels)!;
      assert.ok(Math.abs(sum - p.sum!) <= 1e-9 * Math.max(1, sum), `${family}_sum ${sum} vs OTLP ${p.sum}`);
      let cumulative = 0;
      p.explicitBounds.forEach((bound, i) => {
        cumulative += p.bucketCounts[i]!;
        assert.equal(m.value(`${family}_bucket`, { ...labels, le: String(bound) }), cumulative, `${family}_bucket le=${bound}`);
      });
    }
  }
}

/**
 * A receiver and a simulated model server, and one teardown in the right order: infermeter first
 * (its last export still reaches the receiver), then the model server, then the receiver.
 */
async function setup(t: TestContext): Promise<{ receiver: OtlpReceiver; sim: SimServer; own: <T extends { close(): Promise<void> }>(app: T) => T }> {
  const receiver = await startOtlpReceiver();
  const sim = await startSimServer({ ttftMs: 25, interTokenMs: 3, models: [MODEL] });
  const apps: Array<{ close(): Promise<void> }> = [];
  t.after(async () => {
    for (const app of apps) await app.close();
    await sim.close();
    await receiver.close();
  });
  return {
    receiver,
    sim,
    own(app) {
      apps.push(app);
      return app;
    },
  };
}

const BASE_ENV = {
  INFERMETER_PORT: '0',
  INFERMETER_MANAGEMENT_PORT: '0',
  INFERMETER_METRICS_PORT: '0',
  INFERMETER_UPSTREAM_METRICS: 'off',
};

describe('OTLP export', () => {
  for (const protocol of ['http/protobuf', 'http/json'] as const) {
    it(`pushes the semantic-convention histograms of real traffic (${protocol})`, async (t) => {
      const { receiver, sim, own } = await setup(t);
      const env = {
        ...BASE_ENV,
        INFERMETER_UPSTREAM: sim.url,
        INFERMETER_DIALECTS: 'otel',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
        OTEL_METRIC_EXPORT_INTERVAL: '200',
        OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=secret%20one',
        OTEL_SERVICE_NAME: 'infermeter-test',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=ci,service.name=overridden',
      };
      const app = own(await startInfermeter(loadConfig(env), { log: silentLogger }));
      const messages = [{ role: 'user', content: 'Say something.' }];
      const n = 9;
      const finished = nextFinished(app, n);
      const statuses = [
        ...(await Promise.all(
          [1, 2, 3].map(() => post(`${app.dataUrl}/v1/chat/completions`, { model: MODEL, stream: true, max_tokens: 6, messages }).then((a) => a.status)),
        )),
        (await post(`${app.dataUrl}/v1/chat/completions`, { model: MODEL, max_tokens: 4, messages })).status,
        (await post(`${app.dataUrl}/v1/chat/completions`, { model: MODEL, max_tokens: 4, messages })).status,
        (await post(`${app.dataUrl}/v1/completions`, { model: MODEL, stream: true, max_tokens: 5, prompt: 'Once' })).status,
        (await post(`${app.dataUrl}/v1/responses`, { model: MODEL, stream: true, max_output_tokens: 3, input: 'Hi' })).status,
        (await post(`${app.dataUrl}/v1/embeddings`, { model: MODEL, input: ['a', 'b'] })).status,
        (await post(`${app.dataUrl}/v1/chat/completions`, { model: 'missing', messages })).status,
      ];
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 200, 200, 404]);
      const samples = await finished;
      const prompt = (api: string) => samples.filter((s) => s.api === api && s.outcome === 'success').map((s) => s.promptTokens!);

      const e = await receiver.waitFor((x) => total(x, 'gen_ai.server.request.duration') === n && total(x, 'gen_ai.client.token.usage') === 15);
      assert.equal(e.path, '/v1/metrics');
      assert.equal(e.contentType, protocol === 'http/json' ? 'application/json' : 'application/x-protobuf');
      assert.equal(e.headers['x-api-key'], 'secret one', 'OTEL_EXPORTER_OTLP_HEADERS sent, percent-decoded');
      assert.equal(e.resource['service.name'], 'infermeter-test', 'OTEL_SERVICE_NAME wins over service.name in OTEL_RESOURCE_ATTRIBUTES');
      assert.equal(e.resource['deployment.environment.name'], 'ci');
      assert.equal(e.resource['service.instance.id'], hostname());
      assert.equal(e.resource['telemetry.sdk.language'], 'nodejs');
      assert.equal(typeof e.resource['service.version'], 'string');
      assert.deepEqual(
        e.scopes.map((s) => s.name),
        ['infermeter'],
      );

      for (const { name, unit, family } of SEMCONV) {
        const m = metric(e, name);
        assert.ok(m !== undefined, `${name} exported`);
        assert.equal(m.unit, unit, `${name} unit`);
        assert.equal(m.temporality, 2, `${name} cumulative`);
        for (const p of m.points) {
          assert.deepEqual(p.explicitBounds, OTEL_BUCKETS[family], `${name}: the conventions' bucket boundaries`);
          assert.equal(p.bucketCounts.length, p.explicitBounds.length + 1);
          assert.equal(
            p.bucketCounts.reduce((a, b) => a + b, 0),
            p.count,
            `${name}: buckets add up to the count`,
          );
        }
      }
      assert.deepEqual(e.metrics.map((m) => m.name).sort(), SEMCONV.map((s) => s.name).sort(), 'exactly the four instruments');

      const port = Number(new URL(sim.url).port);
      const base = {
        'gen_ai.provider.name': 'openai',
        'server.address': '127.0.0.1',
        'server.port': port,
        'gen_ai.request.model': MODEL,
        'gen_ai.response.model': MODEL,
      };
      const chat = { ...base, 'gen_ai.operation.name': 'chat' };
      const completion = { ...base, 'gen_ai.operation.name': 'text_completion' };
      const embeddings = { ...base, 'gen_ai.operation.name': 'embeddings' };
      // Streams only for TTFT and TPOT: three chat streams and the Responses API stream (chat); one completion stream.
      assert.equal(point(e, 'gen_ai.server.time_to_first_token', chat).count, 4);
      assert.equal(point(e, 'gen_ai.server.time_to_first_token', completion).count, 1);
      // Node's timers count whole milliseconds: the sim's 25 ms timer can fire up to 1 ms early on
      // infermeter's finer clock (seen: 24.15 ms, under CPU contention). Without the delay, TTFT
      // would be about 1 ms.
      assert.ok(
        point(e, 'gen_ai.server.time_to_first_token', chat).min! >= 0.024,
        `TTFT ${point(e, 'gen_ai.server.time_to_first_token', chat).min} s includes the simulated 25 ms`,
      );
      assert.equal(point(e, 'gen_ai.server.time_per_output_token', chat).count, 4);
      assert.equal(point(e, 'gen_ai.server.time_per_output_token', completion).count, 1);
      assert.equal(metric(e, 'gen_ai.server.time_to_first_token')!.points.length, 2);
      // Every request's duration; the failed one with error.type and no response model.
      assert.equal(point(e, 'gen_ai.server.request.duration', chat).count, 6);
      assert.equal(point(e, 'gen_ai.server.request.duration', completion).count, 1);
      assert.equal(point(e, 'gen_ai.server.request.duration', embeddings).count, 1);
      const failed = {
        'gen_ai.provider.name': 'openai',
        'server.address': '127.0.0.1',
        'server.port': port,
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'missing',
        'error.type': '404',
      };
      assert.equal(point(e, 'gen_ai.server.request.duration', failed).count, 1);
      // Tokens as the upstream reported them: output = max tokens asked for.
      const tokens = (attributes: Record<string, string | number>, type: string) =>
        point(e, 'gen_ai.client.token.usage', { ...attributes, 'gen_ai.token.type': type });
      assert.deepEqual([tokens(chat, 'output').count, tokens(chat, 'output').sum], [6, 3 * 6 + 2 * 4 + 3]);
      assert.deepEqual([tokens(chat, 'input').count, tokens(chat, 'input').sum], [6, [...prompt('chat'), ...prompt('responses')].reduce((a, b) => a + b, 0)]);
      assert.deepEqual([tokens(completion, 'output').count, tokens(completion, 'output').sum], [1, 5]);
      assert.deepEqual([tokens(completion, 'input').count, tokens(completion, 'input').sum], [1, prompt('completions')[0]]);
      assert.deepEqual([tokens(embeddings, 'input').count, tokens(embeddings, 'input').sum], [1, prompt('embeddings')[0]]);
      assert.equal(metric(e, 'gen_ai.client.token.usage')!.points.length, 5, 'no output tokens for embeddings, none for the failure');

      // The same measurement on /metrics, in its Prometheus form.
      assertSameAsExposition(e, await scrape(app));
    });
  }

  it('awaits a last export when infermeter closes', async (t) => {
    const { receiver, sim } = await setup(t);
    const config = loadConfig({
      ...BASE_ENV,
      INFERMETER_UPSTREAM: sim.url,
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `${receiver.url}/custom/path`,
      OTEL_METRIC_EXPORT_INTERVAL: '3600000', // no periodic export during the test
    });
    const app = await startInfermeter(config, { log: silentLogger });
    let closed = false;
    t.after(() => (closed ? undefined : app.close())); // runs after setup's teardown: only if the test failed early
    const finished = nextFinished(app, 1);
    assert.equal((await post(`${app.dataUrl}/v1/chat/completions`, { model: MODEL, stream: true, max_tokens: 3, messages: [] })).status, 200);
    await finished;
    assert.equal(receiver.exports.length, 0, 'nothing exported before the interval');
    assert.doesNotMatch(await (await fetch(app.metricsUrl!)).text(), /gen_ai_/, 'the export needs no otel dialect on /metrics');
    await app.close();
    closed = true;
    assert.equal(receiver.exports.length, 1, 'close returned after the last export arrived');
    const e = receiver.exports[0]!;
    assert.equal(e.path, '/custom/path', 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is used as it is');
    assert.equal(total(e, 'gen_ai.server.request.duration'), 1);
    assert.equal(total(e, 'gen_ai.server.time_to_first_token'), 1);
  });

  it('on close while an export is in flight, sends the last export after it: nothing measured since is lost', async (t) => {
    const receiver = await startOtlpReceiver({ holdFirst: true });
    const sim = await startSimServer({ ttftMs: 5, interTokenMs: 1, models: [MODEL] });
    // Close's bound is OTEL_METRIC_EXPORT_TIMEOUT (held to the interval: 2 s); an export's
    // deadline, OTEL_EXPORTER_OTLP_TIMEOUT, 500 ms. The held export is cut at its deadline, and
    // the SDK's last export, which follows it, has the rest of close's bound: 1.5 s or more. (With
    // both at 2 s, the last export had only the time between the first export and the close,
    // tens of milliseconds, and once in the suite close's bound ended first.)
    const app = await startInfermeter(
      loadConfig({
        ...BASE_ENV,
        INFERMETER_UPSTREAM: sim.url,
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_METRIC_EXPORT_INTERVAL: '2000',
        OTEL_EXPORTER_OTLP_TIMEOUT: '500',
      }),
      { log: silentLogger },
    );
    let closed = false;
    t.after(async () => {
      receiver.release();
      if (!closed) await app.close();
      await sim.close();
      await receiver.close();
    });
    assert.equal((await post(`${app.dataUrl}/v1/chat/completions`, { model: MODEL, stream: true, max_tokens: 2, messages: [] })).status, 200);
    // The first export with that request is received and held unanswered: in flight.
    await receiver.waitFor((e) => total(e, 'gen_ai.server.request.duration') === 1);
    const finished = nextFinished(app, 1);
    assert.equal((await post(`${app.dataUrl}/v1/chat/completions`, { model: MODEL, stream: true, max_tokens: 2, messages: [] })).status, 200);
    await finished;
    // The SDK sends close's last export once the one in flight is done: here, when its deadline
    // cuts it (the receiver never answers it). Whether the cut connection's callback comes
    // before that last export (it is sent at once) or after (it waits for it, and says so), the
    // export with the second request has reached the receiver when close ends. (On a machine so
    // slow that the first export was cut before the close, the last one is sent at once.)
    const closing = app.close().then(() => {
      closed = true;
      return receiver.exports.some((e) => total(e, 'gen_ai.server.request.duration') === 2);
    });
    assert.ok(await closing, 'the last export, with the request measured while the first was in flight, reached the receiver before close ended');
  });

  it('keeps serving while the receiver refuses, counts each failed export, logs once, and loses nothing it measured', async (t) => {
    const receiver = await startOtlpReceiver({ refuse: 2 });
    const sim = await startSimServer({ ttftMs: 5, interTokenMs: 1, models: [MODEL] });
    const logs: string[] = [];
    // An export's deadline is its interval: at 100 ms, a busy machine's slow export was cut and
    // counted failed beside the two refused (3 failures, once in a suite's run). A second is far
    // from what an export to a loopback receiver takes under any load the suite sees.
    const app = await startInfermeter(
      loadConfig({ ...BASE_ENV, INFERMETER_UPSTREAM: sim.url, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_METRIC_EXPORT_INTERVAL: '1000' }),
      { log: createLogger('info', (line) => logs.push(line)) },
    );
    t.after(async () => {
      await app.close();
      await sim.close();
      await receiver.close();
    });
    // Traffic while the exports are refused: the proxy does not notice.
    for (let i = 0; i < 3; i++)
      assert.equal((await post(`${app.dataUrl}/v1/chat/completions`, { model: MODEL, stream: true, max_tokens: 2, messages: [] })).status, 200);
    // Cumulative temporality: the first export accepted carries everything measured before it.
    const e = await receiver.waitFor((x) => total(x, 'gen_ai.server.request.duration') === 3);
    assert.equal(receiver.refused(), 2);
    assert.equal(total(e, 'gen_ai.server.time_to_first_token'), 3);
    // The receiver has the export before infermeter has its answer: wait for infermeter to count it.
    let m = await scrape(app);
    for (const deadline = Date.now() + 5000; m.value('infermeter_otlp_exports_total', { result: 'success' }) === 0; m = await scrape(app)) {
      assert.ok(Date.now() < deadline, 'the accepted export was never counted');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(m.value('infermeter_otlp_exports_total', { result: 'failure' }), 2);
    const about = (what: string) => logs.filter((l) => l.includes(what));
    assert.equal(about('OTLP export failed').length, 1, 'one warning for the failing spell, not one per export');
    assert.match(about('OTLP export failed')[0]!, /"level":"warn"/);
    assert.equal(about('OTLP export recovered').length, 1);
  });

  it('a receiver that answers a byte at a time: one export in flight at a time, each cut at its deadline and counted failed', async (t) => {
    const receiver = await startOtlpReceiver({ trickleMs: 5 });
    const sim = await startSimServer({ ttftMs: 5, interTokenMs: 1, models: [MODEL] });
    const logs: string[] = [];
    // The deadline (OTEL_EXPORTER_OTLP_TIMEOUT) shorter than the interval; the bytes come faster
    // than either, so only a deadline on the whole export ends one.
    const app = await startInfermeter(
      loadConfig({
        ...BASE_ENV,
        INFERMETER_UPSTREAM: sim.url,
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_METRIC_EXPORT_INTERVAL: '100',
        OTEL_EXPORTER_OTLP_TIMEOUT: '60',
      }),
      { log: createLogger('info', (line) => logs.push(line)) },
    );
    t.after(async () => {
      await app.close();
      await sim.close();
      await receiver.close();
    });
    assert.equal((await post(`${app.dataUrl}/v1/chat/completions`, { model: MODEL, stream: true, max_tokens: 2, messages: [] })).status, 200);
    // Until three exports have failed, or a second one was opened beside the first (the finding:
    // thirty of them, never counted).
    let m = await scrape(app);
    for (let polls = 0; (m.value('infermeter_otlp_exports_total', { result: 'failure' }) ?? 0) < 3 && receiver.mostOpen() <= 1; m = await scrape(app)) {
      assert.ok(++polls < 1000, `no failure counted (${receiver.begun()} exports begun)`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(receiver.mostOpen(), 1, 'one export open at a time');
    const failed = m.value('infermeter_otlp_exports_total', { result: 'failure' })!;
    assert.ok(failed >= 3 && receiver.begun() <= failed + 1, `${failed} failed, ${receiver.begun()} begun: each ended by its deadline`);
    assert.equal(m.value('infermeter_otlp_exports_total', { result: 'success' }), 0);
    assert.notEqual(m.value('infermeter_otlp_exports_total', { result: 'skipped' }), undefined, 'skipped intervals are counted');
    assert.match(logs.find((l) => l.includes('OTLP export failed')) ?? '', /no answer within 60 ms/);
  });

  it('exports from the primary with several workers', async (t) => {
    const { receiver, sim, own } = await setup(t);
    const env = {
      ...BASE_ENV,
      PATH: process.env.PATH ?? '',
      INFERMETER_UPSTREAM: sim.url,
      INFERMETER_LOG_LEVEL: 'warn',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_METRIC_EXPORT_INTERVAL: '200',
    };
    const app = own(await startClusterPrimary(loadConfig(env), env, { log: silentLogger, workers: 2 }));
    // One connection per request, so that the cluster spreads them over the workers.
    const send = (): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = request(
          `${app.dataUrl}/v1/chat/completions`,
          { method: 'POST', headers: { connection: 'close', 'content-type': 'application/json' } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify({ model: MODEL, stream: true, max_tokens: 2, messages: [] }));
      });
    assert.deepEqual(await Promise.all([send(), send(), send(), send()]), [200, 200, 200, 200]);
    const e = await receiver.waitFor((x) => total(x, 'gen_ai.server.request.duration') === 4);
    assert.equal(total(e, 'gen_ai.client.token.usage'), 8, 'input and output of each request');
    assert.equal(
      point(e, 'gen_ai.client.token.usage', {
        'gen_ai.provider.name': 'openai',
        'server.address': '127.0.0.1',
        'server.port': Number(new URL(sim.url).port),
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': MODEL,
        'gen_ai.response.model': MODEL,
        'gen_ai.token.type': 'output',
      }).sum,
      8,
    );
  });
});
