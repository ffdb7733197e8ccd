// Reading the engine's own /metrics: the MindIE engine families follow a live engine whose
// values change, disappear when their source does, and the scrape's health is visible; the
// relay re-serves the engine's exposition safely.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http, { type ServerResponse } from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import type { Infermeter } from '../../src/app.ts';
import { staleBoundMs } from '../../src/engine/engine-scraper.ts';
import { createLogger } from '../../src/log.ts';
import { NODE_CLIENT_LINT } from '../helpers/exposition.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream, type ReplayUpstream } from '../helpers/replay-upstream.ts';
import { listen } from '../helpers/listen.ts';

const fixture = (name: string) => readFileSync(new URL(`../../fixtures/engine-metrics/${name}`, import.meta.url), 'utf8');
const VLLM = fixture('vllm-v1.prom');
const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const m = { model_name: MODEL };

interface Engine {
  upstream: ReplayUpstream;
  app: Infermeter;
  /** What the engine's /metrics answers next; `hang`: no answer (all its HTTP threads taken). */
  serve(status: number, body: string, end?: 'hang'): void;
  scrapeOnce(): Promise<void>;
  logs: Array<Record<string, unknown>>;
  clock: { now: number };
}

async function engine(t: TestContext, env: Record<string, string> = {}): Promise<Engine> {
  const upstream = await startReplayUpstream();
  t.after(() => upstream.close());
  let metrics: { status: number; body: string; end?: 'hang' | undefined } = { status: 200, body: VLLM };
  upstream.respond((req) => {
    if (req.url === '/metrics' && metrics.end === 'hang') return { status: 200, body: [], end: 'hang' };
    if (req.url === '/metrics') return { status: metrics.status, headers: { 'content-type': 'text/plain; version=0.0.4' }, body: [{ data: metrics.body }] };
    if (req.url === '/v1/models')
      return { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: JSON.stringify({ data: [{ id: MODEL }] }) }] };
    return { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{}' }] };
  });
  const logs: Array<Record<string, unknown>> = [];
  const clock = { now: 0 };
  const app = await startProxy(
    t,
    upstream.url,
    { INFERMETER_UPSTREAM_METRICS: `${upstream.url}/metrics`, INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '3600', ...env },
    { log: createLogger('info', (line) => logs.push(JSON.parse(line) as Record<string, unknown>)), clock: () => clock.now },
  );
  return {
    upstream,
    app,
    logs,
    clock,
    serve: (status, body, end) => (metrics = { status, body, end }),
    scrapeOnce: () => app.metrics.engineScraper!.scrapeOnce(),
  };
}

async function metricsJson(app: Infermeter): Promise<Record<string, string>> {
  const body = (await (await fetch(`${app.managementUrl}/metrics-json`)).json()) as { result: Array<{ metric: Array<{ __name__: string }>; value: string }> };
  return Object.fromEntries(body.result.map((r) => [r.metric[0]!.__name__, r.value]));
}

/**
 * A single-model engine in llama.cpp's shape: /v1/models lists tiny.gguf, /metrics says what the
 * test sets, and each chat request is held open, answered with its head and one token when
 * `decoding` (else nothing yet: held before any token, as in llama.cpp's HTTP layer).
 */
async function llamacppLike(t: TestContext): Promise<{
  url: string;
  set(processing: number, deferred: number): void;
  decoding: boolean;
  arrived(n: number): Promise<void>;
  /** Ends every held response. */
  release(): void;
}> {
  let processing = 0;
  let deferred = 0;
  const held: ServerResponse[] = [];
  const waiters: Array<() => void> = [];
  const self = {
    url: '',
    set: (p: number, d: number) => {
      processing = p;
      deferred = d;
    },
    decoding: true,
    arrived: async (n: number): Promise<void> => {
      while (held.length < n) await new Promise<void>((resolve) => waiters.push(resolve));
    },
    release: (): void => {
      for (const res of held.splice(0)) {
        if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end('data: [DONE]\n\n');
      }
    },
  };
  const server = http.createServer((req, res) => {
    req.resume();
    if (req.url === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(
        fixture('llamacpp.prom')
          .replace(/^llamacpp:requests_processing .*$/m, `llamacpp:requests_processing ${processing}`)
          .replace(/^llamacpp:requests_deferred .*$/m, `llamacpp:requests_deferred ${deferred}`),
      );
    } else if (req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'tiny.gguf', object: 'model' }] }));
    } else {
      const decoding = self.decoding;
      req.on('end', () => {
        if (decoding) {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'x' }, finish_reason: null }], object: 'chat.completion.chunk' })}\n\n`);
        }
        held.push(res);
        for (const w of waiters.splice(0)) w();
      });
    }
  });
  t.after(() => self.release());
  self.url = (await listen(t, server)).url;
  return self;
}

/** Resolves when the next request's first output passed the proxy. */
function nextFirstOutput(app: Infermeter): Promise<void> {
  return new Promise((resolve) => {
    let done = false;
    app.metrics.addObserver({
      firstOutput() {
        if (!done) resolve();
        done = true;
      },
    });
  });
}

describe('engine metrics', () => {
  it("attribute a single-model engine's running and waiting so that a request counts once, and waiting is never below the proxy's", async (t) => {
    const engine = await llamacppLike(t);
    const app = await startProxy(t, engine.url, {
      INFERMETER_UPSTREAM_METRICS: `${engine.url}/metrics`,
      INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '3600',
      INFERMETER_DIALECTS: 'mindie,vllm',
    });
    const clients: Array<Promise<Response>> = [];
    const ask = (): void => {
      clients.push(
        fetch(`${app.dataUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [] }),
        }),
      );
    };
    const look = async () => {
      await app.metrics.engineScraper!.scrapeOnce();
      const x = await scrape(app);
      const json = (await (await fetch(`${app.managementUrl}/metrics-json`)).json()) as {
        result: Array<{ metric: Array<{ __name__: string }>; value: string }>;
      };
      const entry = (name: string) => Number(json.result.find((r) => r.metric[0]!.__name__ === name)?.value);
      return {
        x,
        sums: {
          running: x.sum('num_requests_running'),
          waiting: x.sum('num_requests_waiting'),
          vllmRunning: x.sum('vllm:num_requests_running'),
          vllmWaiting: x.sum('vllm:num_requests_waiting'),
          jsonRunning: entry('processingInferRequestNum'),
          jsonWaiting: entry('waitingInferRequestNum'),
        },
      };
    };

    // 1. One request decoding; the engine runs it (and names its model tiny.gguf, not gpt-4o-mini).
    const first = nextFirstOutput(app);
    ask();
    await engine.arrived(1);
    await first;
    engine.set(1, 0);
    let { x, sums } = await look();
    assert.deepEqual(sums, { running: 1, waiting: 0, vllmRunning: 1, vllmWaiting: 0, jsonRunning: 1, jsonWaiting: 0 }, 'one request, counted once');
    assert.equal(x.value('num_requests_running', { model_name: 'tiny.gguf' }), 1, "under the engine's model");
    assert.equal(x.value('num_requests_running', { model_name: 'gpt-4o-mini' }), 0);

    // 2. Three more held before any token: llama.cpp's deferred count does not see them.
    engine.decoding = false;
    for (let i = 0; i < 3; i++) ask();
    await engine.arrived(4);
    ({ sums } = await look());
    assert.deepEqual(
      sums,
      { running: 1, waiting: 3, vllmRunning: 1, vllmWaiting: 3, jsonRunning: 1, jsonWaiting: 3 },
      "waiting: what the proxy sees, not the engine's 0",
    );

    // 3. The engine takes one into prefill and defers one: four requests, each counted once.
    engine.set(2, 1);
    ({ sums } = await look());
    assert.deepEqual(sums, { running: 2, waiting: 2, vllmRunning: 2, vllmWaiting: 2, jsonRunning: 2, jsonWaiting: 2 });

    // 4. All four end before the engine is read again: its last figures (2 + 1, read while the
    // proxy had 4 in flight) count none of them any more.
    const ended = nextFinished(app, 4);
    engine.release();
    for (const c of clients) await (await c).text();
    await ended;
    x = await scrape(app);
    assert.deepEqual([x.sum('num_requests_running'), x.sum('num_requests_waiting'), x.sum('vllm:num_requests_running')], [0, 0, 0]);
  });

  it('fill the MindIE families from a live engine, follow its changes and drop what vanished', async (t) => {
    const e = await engine(t);
    await e.scrapeOnce();
    let x = await scrape(e.app);
    assert.equal(x.value('infermeter_upstream_metrics_up'), 1);
    assert.equal(x.value('infermeter_upstream_engine_info', { engine: 'vllm' }), 1);
    assert.equal(x.value('num_requests_running', m), 5, "the engine's value");
    assert.equal(x.value('num_requests_waiting', m), 1);
    assert.equal(x.value('num_preemptions_total', m), 7);
    assert.equal(x.value('npu_cache_usage_perc', m), 0.5);
    assert.equal(x.value('npu_prefix_cache_hit_rate', m), 0.4);
    assert.deepEqual(x.series('num_requests_swapped'), [], 'v1 has no swapped requests: left out');
    assert.deepEqual(await metricsJson(e.app), { TTFT: '0', TBT: '0', waitingInferRequestNum: '1', processingInferRequestNum: '5', remainBlocks: '1000' });

    // The engine's values change, and its KV-cache gauge disappears.
    e.serve(
      200,
      VLLM.replace('engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0', 'engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.0').replace(
        /^vllm:kv_cache_usage_perc\{.*$/gm,
        '',
      ),
    );
    await e.scrapeOnce();
    x = await scrape(e.app);
    assert.equal(x.value('num_requests_running', m), 9);
    assert.deepEqual(x.series('npu_cache_usage_perc'), [], 'a gauge whose source vanished is dropped, not frozen');
    assert.equal((await metricsJson(e.app)).remainBlocks, undefined, 'no usage, no free blocks: never made up');
  });

  it("drop every engine value when the engine cannot be read, fall back to the proxy's counts, and log once", async (t) => {
    const e = await engine(t);
    await (await fetch(`${e.app.dataUrl}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model: MODEL }) })).arrayBuffer();
    await e.scrapeOnce();
    assert.equal((await scrape(e.app)).value('num_requests_running', m), 5);
    e.serve(500, 'engine down');
    await e.scrapeOnce();
    await e.scrapeOnce();
    const x = await scrape(e.app);
    assert.equal(x.value('num_requests_running', m), 0, "the proxy's own in-flight count");
    assert.deepEqual(x.series('num_preemptions_total'), []);
    assert.equal(x.value('infermeter_upstream_metrics_up'), 0);
    assert.equal(x.value('infermeter_upstream_metrics_stale'), 0, 'an engine that answers an error is not kept, stale or not');
    assert.equal(x.value('infermeter_upstream_metrics_scrape_failures_total', { reason: 'status' }), 2);
    assert.deepEqual(x.series('infermeter_upstream_engine_info'), []);
    const warnings = e.logs.filter((l) => l.level === 'warn');
    assert.equal(warnings.length, 1, 'logged once, not per scrape');
    assert.equal(warnings[0]!.reason, 'status');
    e.serve(200, VLLM);
    // The success's time lies between these two readings of the clock, however slow the machine.
    const before = Date.now() / 1000;
    await e.scrapeOnce();
    assert.equal((await scrape(e.app)).value('infermeter_upstream_metrics_up'), 1);
    assert.equal(e.logs.filter((l) => l.msg === 'upstream metrics readable again').length, 1);
    const last = (await scrape(e.app)).value('infermeter_upstream_metrics_last_success_timestamp_seconds')!;
    const after = Date.now() / 1000;
    assert.ok(last >= before && last <= after, `last success at ${last}, between ${before} and ${after}`);
  });

  it("keep an engine's last figures, marked stale, while its scrapes time out (every HTTP thread taken), and drop them after three rounds", async (t) => {
    const e = await engine(t, { INFERMETER_UPSTREAM_METRICS_TIMEOUT_MS: '200' });
    await e.scrapeOnce();
    let x = await scrape(e.app);
    assert.equal(x.value('num_requests_running', m), 5);
    assert.equal(x.value('infermeter_upstream_metrics_stale'), 0);
    e.serve(200, VLLM, 'hang');
    await e.scrapeOnce();
    e.clock.now += staleBoundMs(3_600_000, 200); // the bound's edge: still kept
    await e.scrapeOnce();
    x = await scrape(e.app);
    assert.equal(x.value('infermeter_upstream_metrics_scrape_failures_total', { reason: 'timeout' }), 2);
    assert.equal(x.value('infermeter_upstream_metrics_up'), 0, 'the last scrape failed, and says so');
    assert.equal(x.value('infermeter_upstream_metrics_stale'), 1);
    assert.equal(x.value('num_requests_running', m), 5, "the last good scrape's figure, not the proxy's 0");
    assert.equal(x.value('infermeter_upstream_engine_info', { engine: 'vllm' }), 1);
    e.clock.now += 1; // past it
    await e.scrapeOnce();
    x = await scrape(e.app);
    assert.equal(x.value('infermeter_upstream_metrics_stale'), 0);
    assert.deepEqual(x.series('num_requests_running'), [], 'dropped (and the proxy saw no request)');
    assert.deepEqual(x.series('infermeter_upstream_engine_info'), []);
    e.serve(200, VLLM);
    await e.scrapeOnce();
    x = await scrape(e.app);
    assert.equal(x.value('num_requests_running', m), 5);
    assert.equal(x.value('infermeter_upstream_metrics_up'), 1);
  });

  it('time out on an engine that does not answer', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond(() => ({ status: 200, body: [], end: 'hang' }));
    const app = await startProxy(t, upstream.url, {
      INFERMETER_UPSTREAM_METRICS: `${upstream.url}/metrics`,
      INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '3600',
      INFERMETER_UPSTREAM_METRICS_TIMEOUT_MS: '200',
    });
    await app.metrics.engineScraper!.scrapeOnce(); // runs after the round started at start, which times out too
    assert.equal((await scrape(app)).value('infermeter_upstream_metrics_scrape_failures_total', { reason: 'timeout' }), 2);
  });
});

describe('engine metrics relay', () => {
  it("re-serves the engine exposition below infermeter's own, dropping clashing families", async (t) => {
    const e = await engine(t, { INFERMETER_RELAY_UPSTREAM_METRICS: '1', INFERMETER_RELAY_INTERVAL_SECONDS: '30' });
    e.serve(
      200,
      `${fixture('mindie.prom')}# HELP mindie_custom_queue_depth A custom metric.\n# TYPE mindie_custom_queue_depth gauge\nmindie_custom_queue_depth{pool="a"} 42\n`,
    );
    await e.scrapeOnce();
    const x = await scrape(e.app);
    assert.equal(x.value('mindie_custom_queue_depth', { pool: 'a' }), 42, 'relayed');
    assert.equal(x.text.match(/^# TYPE num_requests_running /gm)?.length, 1, "the engine's clashing family is not repeated");
    assert.equal(x.value('request_received_total', { model_name: 'llama3-70b' }), undefined, "the engine's request_received_total is dropped");
    assert.equal(x.value('num_requests_running', { model_name: 'llama3-70b' }), 12, 'its value still reaches the MindIE family through the mapping');
    assert.equal(x.value('infermeter_relay_families', { state: 'relayed' }), 1);
    assert.equal(x.value('infermeter_relay_families', { state: 'dropped' }), 8);
    if (spawnSync('promtool', ['--version']).status === 0 || process.env.CI) {
      const check = spawnSync('promtool', ['check', 'metrics'], { input: x.text, encoding: 'utf8' });
      const findings = `${check.stdout}${check.stderr}`
        .split('\n')
        .filter((l) => l.trim() !== '' && !/toks_per_s metric names should not contain abbreviated units/.test(l) && !NODE_CLIENT_LINT.includes(l.trim()));
      assert.deepEqual(findings, [], 'promtool stays clean with the relay on');
      assert.ok(check.status === 0 || check.status === 3);
    }
  });

  it('serves each series of the engine once: later duplicates are dropped, counted, and not counted twice in the engine figures', async (t) => {
    const e = await engine(t, { INFERMETER_RELAY_UPSTREAM_METRICS: '1', INFERMETER_RELAY_INTERVAL_SECONDS: '30' });
    e.serve(
      200,
      [
        fixture('mindie.prom').trimEnd(),
        '# TYPE engine_pool_depth gauge',
        'engine_pool_depth{pool="a",zone="z"} 1',
        'engine_pool_depth{zone="z",pool="a"} 2',
        'engine_pool_depth{pool="a",zone="z",shard=""} 3',
        'engine_pool_depth{pool="b",zone="z"} 4',
        '# TYPE engine_other gauge',
        'engine_other 5',
        // A second num_requests_running of the same model, further down: not 12 + 12.
        'num_requests_running{model_name="llama3-70b"} 12',
        '# TYPE engine_jobs_total gauge',
        'engine_jobs_total 6',
        '# TYPE engine_jobs counter',
        'engine_jobs_total 7',
        '',
      ].join('\n'),
    );
    await e.scrapeOnce();
    const x = await scrape(e.app);
    assert.deepEqual(x.duplicates(), [], 'no series twice on /metrics');
    assert.deepEqual(
      x.series('engine_pool_depth'),
      [
        { labels: { pool: 'a', zone: 'z' }, value: 1 },
        { labels: { pool: 'b', zone: 'z' }, value: 4 },
      ],
      'the first of each series',
    );
    assert.deepEqual(x.series('engine_jobs_total'), [{ labels: {}, value: 6 }]);
    assert.equal(x.value('engine_other'), 5);
    assert.equal(x.value('num_requests_running', { model_name: 'llama3-70b' }), 12, 'the engine figure is read once');
    assert.equal(x.value('infermeter_upstream_metrics_duplicate_series'), 4);
  });

  it('refuses an exposition over 240 KB and an unparseable one, counting each, and refreshes on its interval', async (t) => {
    const e = await engine(t, { INFERMETER_RELAY_UPSTREAM_METRICS: '1', INFERMETER_RELAY_INTERVAL_SECONDS: '30' });
    const padding = Array.from(
      { length: 3000 },
      (_, i) => `# HELP pad_${i} Padding to make the exposition large.\n# TYPE pad_${i} gauge\npad_${i}{shard="${i}"} ${i}\n`,
    ).join('');
    const big = VLLM + padding;
    assert.ok(Buffer.byteLength(big) > 300 * 1024);
    e.serve(200, big);
    await e.scrapeOnce();
    let x = await scrape(e.app);
    assert.equal(x.value('infermeter_relay_rounds_skipped_total', { reason: 'too_large' }), 1);
    assert.equal(x.value('pad_1', { shard: '1' }), undefined, 'nothing relayed');
    assert.equal(x.value('num_requests_running', m), 5, 'the engine mapping is unaffected');

    // Within the relay interval the next round does not relay, even with a good exposition ...
    e.serve(200, VLLM);
    e.clock.now = 10_000;
    await e.scrapeOnce();
    assert.equal((await scrape(e.app)).value('vllm:num_requests_running', { engine: '0', model_name: MODEL }), undefined);
    // ... after it, it does.
    e.clock.now = 31_000;
    await e.scrapeOnce();
    assert.equal((await scrape(e.app)).value('vllm:num_requests_running', { engine: '0', model_name: MODEL }), 3);

    e.serve(200, 'this is { not an exposition');
    e.clock.now = 62_000;
    await e.scrapeOnce();
    x = await scrape(e.app);
    assert.equal(x.value('infermeter_relay_rounds_skipped_total', { reason: 'unparseable' }), 1);
    assert.equal(x.value('vllm:num_requests_running', { engine: '0', model_name: MODEL }), undefined, 'a bad round relays nothing');
    assert.equal(x.value('request_received_total', m) ?? 0, 0, "infermeter's own metrics are unaffected");
    assert.match(x.text, /# TYPE request_received_total counter/);
  });
});
