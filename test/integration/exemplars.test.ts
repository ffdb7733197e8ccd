// Exemplars: an OpenMetrics scrape (Accept: application/openmetrics-text) carries, on the TTFT,
// TPOT and e2e buckets of every dialect (and the time to first output), the id of a request
// that landed there: the client's x-request-id when it is a sane token, else infermeter's own;
// it ends with `# EOF`; a real Prometheus with exemplar storage stores them and returns them
// from /api/v1/query_exemplars. A plain scrape carries none and is byte for byte what it is
// without them.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import type { Infermeter } from '../../src/app.ts';
import { startClusterPrimary } from '../../src/cluster/primary.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics/metrics.ts';
import { wantsOpenMetrics } from '../../src/metrics/exposition/openmetrics.ts';
import { createRequestTimer } from '../../src/measure/request-timer.ts';
import { PROCESS_FAMILY_LINES } from '../helpers/exposition.ts';
import { nextFinished, startProxy } from '../helpers/proxy-harness.ts';
import { prometheusSkip, startPrometheus } from '../helpers/prometheus.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';
import { noContainer } from '../helpers/no-container.ts';

const OM_ACCEPT = 'application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1';
const token = (t: string) => `data: {"choices":[{"index":0,"delta":{"content":"${t}"}}]}\n\n`;
const USAGE = 'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\n';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

async function proxyFor(t: TestContext, env: Record<string, string> = {}): Promise<Infermeter> {
  const upstream = await startReplayUpstream();
  t.after(() => upstream.close());
  upstream.respond(() => ({
    status: 200,
    headers: { 'content-type': 'text/event-stream' },
    body: [{ afterMs: 2, data: token('a') }, { afterMs: 2, data: token('b') + token('c') }, { data: `${USAGE}data: [DONE]\n\n` }],
  }));
  return startProxy(t, upstream.url, { INFERMETER_DIALECTS: 'mindie,aom,vllm,otel', INFERMETER_TENANT: 'header:x-team', ...env });
}

async function send(app: Infermeter, requestId?: string): Promise<void> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-team': 'blue' };
  if (requestId !== undefined) headers['x-request-id'] = requestId;
  const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', headers, body: '{"model":"m","stream":true}' });
  await res.arrayBuffer();
}

async function scrapeText(app: Infermeter, accept?: string): Promise<{ type: string; text: string }> {
  const res = await fetch(app.metricsUrl!, accept === undefined ? {} : { headers: { accept } });
  assert.equal(res.status, 200);
  return { type: res.headers.get('content-type') ?? '', text: await res.text() };
}

/** The request ids of the exemplars on a family's bucket lines. */
function exemplarIds(text: string, family: string): string[] {
  const ids: string[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${family}_bucket{`)) continue;
    const m = / # \{request_id="([^"]*)"\} (\S+) (\S+)$/.exec(line);
    if (m !== null) ids.push(m[1]!);
  }
  return ids;
}

// Each test has its own infermeter and upstream (one cluster, one Prometheus): side by side.
describe('exemplars', { concurrency: true }, () => {
  it('asks for OpenMetrics only when the scraper prefers it', () => {
    assert.equal(wantsOpenMetrics(OM_ACCEPT), true);
    assert.equal(wantsOpenMetrics('application/openmetrics-text'), true);
    assert.equal(wantsOpenMetrics(undefined), false);
    assert.equal(wantsOpenMetrics('*/*'), false);
    assert.equal(wantsOpenMetrics('text/plain;version=0.0.4'), false);
    assert.equal(wantsOpenMetrics('text/plain;q=1,application/openmetrics-text;q=0.5'), false);
    assert.equal(wantsOpenMetrics('application/openmetrics-text;q=0'), false);
    assert.equal(wantsOpenMetrics('application/openmetrics-text;version=2.0.0'), false, 'a version we do not write');
  });

  it("an OpenMetrics scrape carries the requests' ids on the TTFT, TPOT and e2e buckets of every dialect, and ends with # EOF", async (t) => {
    const app = await proxyFor(t);
    const finished = nextFinished(app, 3);
    await send(app, 'req-abc-123');
    await send(app, 'has space'); // not a sane token: infermeter's own id instead
    await send(app);
    const samples = await finished;
    const own = samples.slice(1).map((s) => s.requestId!);
    for (const id of own) assert.match(id, UUID);
    const { type, text } = await scrapeText(app, OM_ACCEPT);
    assert.equal(type, 'application/openmetrics-text; version=1.0.0; charset=utf-8');
    assert.ok(text.endsWith('\n# EOF\n'), 'ends with # EOF');
    assert.equal(text.split('\n').filter((l) => l === '# EOF').length, 1);
    const ids = new Set(['req-abc-123', ...own]);
    for (const family of [
      'time_to_first_token_seconds',
      'time_per_output_token_seconds',
      'e2e_request_latency_seconds',
      'vllm:time_to_first_token_seconds',
      'vllm:request_time_per_output_token_seconds',
      'vllm:e2e_request_latency_seconds',
      'infer_service_first_token_cost',
      'infer_service_per_token_cost',
      'infer_service_request_cost',
      'gen_ai_server_time_to_first_token_seconds',
      'gen_ai_server_time_per_output_token_seconds',
      'gen_ai_server_request_duration_seconds',
      'infermeter_time_to_first_output_seconds',
      'infermeter_tenant_time_to_first_token_seconds',
      'infermeter_tenant_e2e_request_latency_seconds',
    ]) {
      const found = exemplarIds(text, family);
      assert.ok(found.length >= 1, `${family}: an exemplar`);
      for (const id of found) assert.ok(ids.has(id), `${family}: ${id} is one of the requests' ids`);
    }
    // The last request in a bucket is its exemplar: all three TTFTs are in one bucket or more.
    const ttft = exemplarIds(text, 'time_to_first_token_seconds');
    assert.ok(ttft.includes(own[1]!) || ttft.length > 1, 'the last request is an exemplar of TTFT');
    // The exemplar's value is the request's own figure, within its bucket.
    for (const line of text.split('\n').filter((l) => l.startsWith('time_to_first_token_seconds_bucket{') && l.includes(' # '))) {
      const m = /le="([^"]+)"\} \d+ # \{request_id="([^"]*)"\} (\S+) (\S+)$/.exec(line)!;
      const sample = samples.find((s) => s.requestId === m[2])!;
      assert.equal(Number(m[3]), sample.ttft, line);
      assert.ok(sample.ttft! <= Number(m[1] === '+Inf' ? Infinity : m[1]), line);
      assert.ok(Math.abs(Number(m[4]) - Date.now() / 1000) < 60, `${line}: a wall-clock timestamp in seconds`);
    }
    // Counters are named without _total in OpenMetrics; their samples keep it.
    assert.ok(text.includes('# TYPE request_received counter\nrequest_received_total{model_name="m"} 3\n'), 'counter family in OpenMetrics form');
    assert.ok(!text.includes('# TYPE request_received_total counter'));
    // The plain scrape: no exemplar, no # EOF, Prometheus text.
    const plain = await scrapeText(app);
    assert.match(plain.type, /^text\/plain; version=0\.0\.4/);
    assert.ok(!plain.text.includes(' # {') && !plain.text.includes('# EOF'));
    assert.ok(plain.text.includes('# TYPE request_received_total counter\nrequest_received_total{model_name="m"} 3\n'));
  });

  it('a plain render is byte for byte the one of the same requests without ids', async () => {
    const render = async (withIds: boolean): Promise<{ plain: string; om: string }> => {
      let now = 1_000_000;
      const metrics = createMetrics({
        buckets: undefined,
        aom: { periodSeconds: 30, labels: { service_id: 's', instance_name: 'i', instance_id: 'i1', node_ip: '127.0.0.1', node_name: 'n' } },
        container: noContainer(() => now),
        clock: () => now,
        throughputWindowSeconds: 60,
        version: 'test',
        dialects: ['mindie', 'aom', 'vllm', 'otel'],
        tenants: { max: 10, aliases: { current: () => new Map(), onChange: () => undefined } },
      });
      for (let i = 0; i < 5; i++) {
        const timer = createRequestTimer('chat', () => now, metrics.sink, `t${i % 2}`, now, withIds ? `id-${i}` : undefined);
        timer.identify('m', true);
        timer.responseHeaders(200, true);
        now += 30 + i * 200;
        timer.responseBody();
        timer.tokenEvent(undefined, true);
        now += 50;
        timer.responseBody();
        timer.tokenEvent();
        now += 20;
        timer.responseBody();
        timer.tokenEvent();
        timer.usage({ promptTokens: 4, completionTokens: 3, cachedTokens: 2, reasoningTokens: 1 });
        timer.responseFinished();
        timer.close(true);
      }
      // The loop's delay is the process's own, measured in real time: not the requests'.
      const machine = /^infermeter_event_loop_delay_seconds.*\n/gm;
      const plain = (await metrics.render()).replace(machine, '').replace(PROCESS_FAMILY_LINES, '');
      const om = (await metrics.render(true)).replace(machine, '').replace(PROCESS_FAMILY_LINES, '');
      metrics.close();
      return { plain, om };
    };
    const withIds = await render(true);
    const without = await render(false);
    assert.equal(withIds.plain, without.plain, 'plain text: byte for byte');
    assert.ok(!withIds.plain.includes(' # {'));
    assert.ok(withIds.om.includes(' # {request_id="id-4"} '), 'the OpenMetrics render carries them');
    assert.ok(!without.om.includes(' # {'), 'no id, no exemplar');
    // Without exemplars, OpenMetrics differs from the plain text only where the format does.
    assert.equal(
      without.om
        .replace('# EOF\n', '')
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .join('\n'),
      without.plain
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .join('\n'),
      'the same samples, in the same order',
    );
  });

  it("with the access log on, a request without an id has the log line's generated id as its exemplar", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-exemplar-log-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const log = join(dir, 'access.log');
    const app = await proxyFor(t, { INFERMETER_ACCESS_LOG: log, INFERMETER_DIALECTS: 'mindie' });
    const finished = nextFinished(app, 1);
    await send(app);
    const [sample] = await finished;
    // The log is batched (every 100 ms): poll for the line, bounded.
    let line: { request_id?: string } | undefined;
    for (let i = 0; i < 100 && line === undefined; i++) {
      if (existsSync(log))
        line = readFileSync(log, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { request_id?: string })[0];
      if (line === undefined) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.ok(line?.request_id !== undefined, 'the access log wrote the request');
    assert.match(line.request_id, UUID);
    assert.equal(sample!.requestId, line.request_id, "the sample carries the log's id");
    const { text } = await scrapeText(app, OM_ACCEPT);
    assert.deepEqual([...new Set(exemplarIds(text, 'time_to_first_token_seconds'))], [line.request_id]);
    assert.deepEqual([...new Set(exemplarIds(text, 'e2e_request_latency_seconds'))], [line.request_id]);
  });

  it('carries the ids over the worker bus (INFERMETER_WORKERS=2): TTFT observed at the first token, e2e at the end', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond(() => ({
      status: 200,
      headers: { 'content-type': 'text/event-stream' },
      body: [
        { afterMs: 2, data: token('a') },
        { afterMs: 2, data: `${token('b')}${USAGE}data: [DONE]\n\n` },
      ],
    }));
    const env = {
      INFERMETER_UPSTREAM: upstream.url,
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_UPSTREAM_METRICS: 'off',
    };
    const app = await startClusterPrimary(loadConfig(env), env, { log: createLogger('warn', () => undefined), workers: 2 });
    t.after(() => app.close());
    const ids = Array.from({ length: 6 }, (_, i) => `worker-req-${i}`);
    await Promise.all(
      ids.map(async (id) => {
        const res = await fetch(`${app.dataUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'x-request-id': id, connection: 'close' },
          body: '{"model":"m","stream":true}',
        });
        await res.arrayBuffer();
      }),
    );
    assert.ok(new Set(upstream.requests.map((r) => r.remotePort)).size >= 2, 'the requests came through more than one worker');
    const text = await (await fetch(app.metricsUrl!, { headers: { accept: OM_ACCEPT } })).text();
    for (const family of [
      'time_to_first_token_seconds',
      'e2e_request_latency_seconds',
      'time_per_output_token_seconds',
      'infermeter_time_to_first_output_seconds',
    ]) {
      const found = exemplarIds(text, family);
      assert.ok(found.length >= 1 && found.every((id) => ids.includes(id)), `${family}: ${found.join(', ')}`);
    }
    // The first visible output crossed the bus once per request.
    assert.ok(text.includes('infermeter_time_to_first_output_seconds_count{model_name="m"} 6\n'), 'observed once per request, over the bus');
  });

  it('a real Prometheus with exemplar storage stores them and returns them from /api/v1/query_exemplars', { skip: prometheusSkip }, async (t) => {
    const app = await proxyFor(t);
    const prometheus = await startPrometheus(t, { targets: [app.metricsUrl!], features: ['exemplar-storage'] });
    const finished = nextFinished(app, 2);
    await send(app, 'trace-0001');
    await send(app, 'trace-0002');
    await finished;
    await prometheus.waitForTargetsUp(30_000);
    const start = Math.floor(Date.now() / 1000) - 300;
    const exemplarsOf = async (query: string) => {
      const data = (await prometheus.api(
        `/api/v1/query_exemplars?query=${encodeURIComponent(query)}&start=${start}&end=${Math.ceil(Date.now() / 1000) + 60}`,
      )) as Array<{
        seriesLabels: Record<string, string>;
        exemplars: Array<{ labels: Record<string, string>; value: string; timestamp: number }>;
      }>;
      return data.flatMap((s) => s.exemplars.map((e) => ({ series: s.seriesLabels, ...e })));
    };
    const deadline = Date.now() + 30_000;
    let found: Awaited<ReturnType<typeof exemplarsOf>> = [];
    while (Date.now() < deadline) {
      found = await exemplarsOf('time_to_first_token_seconds_bucket{model_name="m"}');
      if (found.some((e) => e.labels.request_id === 'trace-0002')) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.ok(
      found.some((e) => e.labels.request_id === 'trace-0002'),
      `stored and returned: ${JSON.stringify(found)}\n${prometheus.log()}`,
    );
    for (const e of found) {
      assert.equal(e.series.__name__, 'time_to_first_token_seconds_bucket');
      assert.ok(['trace-0001', 'trace-0002'].includes(e.labels.request_id!), JSON.stringify(e));
    }
    // Every dialect's OpenMetrics parsed: the target is healthy, and the same series as in text.
    const targets = (await prometheus.api('/api/v1/targets?state=active')) as { activeTargets: Array<{ health: string; lastError: string }> };
    assert.deepEqual(
      targets.activeTargets.map((x) => [x.health, x.lastError]),
      [['up', '']],
    );
    const received = await prometheus.vector('request_received_total{model_name="m"}');
    assert.deepEqual(
      received.map((s) => s.value),
      [2],
    );
    const e2e = await exemplarsOf('vllm:e2e_request_latency_seconds_bucket');
    assert.ok(e2e.length > 0, "the vllm dialect's exemplars too");
  });
});
