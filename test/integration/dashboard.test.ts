// GET /dashboard: the page and its assets from infermeter's own origin (content types, cache
// headers, CSP), the data endpoint behind the token, the figures in workers mode, and the page
// itself in a real browser (Debian's chromium, driven by playwright-core): charts and figures
// for two models that update as traffic flows, nothing fetched from another origin, no console
// error, and the token asked for and kept out of URLs. The browser part is skipped where
// chromium is missing, except under CI, where that fails (.ci/run installs it).
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it, type TestContext } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { Infermeter } from '../../src/app.ts';
import { startClusterPrimary } from '../../src/cluster/primary.ts';
import { loadConfig } from '../../src/config/config.ts';
import { silentLogger } from '../../src/log.ts';
import type { DashboardData } from '../../src/management/dashboard-feed.ts';
import { createSimHandler } from '../../src/sim/model-server.ts';
import { figures, recordMeasured, span } from '../helpers/measured.ts';
import { nextFinished, startProxy } from '../helpers/proxy-harness.ts';
import { freePort, listen } from '../helpers/listen.ts';
import { post } from '../helpers/post.ts';

// The callbacks given to page.evaluate and page.waitForFunction run in the page; the project's
// TypeScript has no DOM library, so the page's globals are declared loosely here.
// biome-ignore lint/suspicious/noExplicitAny: the page's globals, untyped without the DOM library
type Dom = any;
declare const document: Dom;
declare const sessionStorage: Dom;

const TOKEN = 'dashboard-token-0123456789abcdef';
const MODELS = ['sim-llama-8b', 'sim-qwen-7b'];
const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/lib/chromium/chromium', '/usr/bin/chromium-browser'].find(
  (p): p is string => p !== undefined && p !== '' && existsSync(p),
);
// In CI a missing chromium is a failure, not a skip: .ci/run installs it.
const skipBrowser = CHROMIUM !== undefined || process.env.CI ? false : 'chromium not installed (Debian package chromium; .ci/run installs it)';
const SCREENSHOT = fileURLToPath(new URL('../../docs/dashboard.png', import.meta.url));

/** The simulated server, answering 500 to requests that carry x-fail (a failure the proxy counts). */
async function startSim(t: TestContext): Promise<string> {
  const sim = createSimHandler({ models: MODELS, ttftMs: () => 40 + Math.random() * 120, interTokenMs: () => 4 + Math.random() * 8, defaultTokens: 24 });
  const server = http.createServer((req, res) => {
    if (req.headers['x-fail'] === undefined) return sim(req, res);
    req.resume();
    req.on('end', () => setTimeout(() => res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"simulated failure"}}'), 100));
  });
  return (await listen(t, server)).url;
}

/** Clients sending streamed requests to both models (every 12th one failing) until the test ends. */
function startTraffic(t: TestContext, dataUrl: string, clients = 3): void {
  let stopped = false;
  const loops = Array.from({ length: clients }, async (_, c) => {
    for (let n = c; !stopped; n += clients) {
      try {
        const res = await fetch(`${dataUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(n % 12 === 11 ? { 'x-fail': '1' } : {}) },
          body: JSON.stringify({
            model: MODELS[n % 2],
            stream: true,
            max_tokens: 8 + (n % 24),
            messages: [{ role: 'user', content: 'Tell me about metering proxies.' }],
          }),
        });
        await res.arrayBuffer();
      } catch {
        // The proxy is closing: this client stops (retrying would spin on refused connections,
        // at full CPU, if the proxy's teardown ran before this one).
        return;
      }
    }
  });
  t.after(async () => {
    stopped = true;
    await Promise.all(loops);
  });
}

async function dashboardData(managementUrl: string, since?: number, headers: Record<string, string> = {}): Promise<DashboardData> {
  const res = await fetch(`${managementUrl}/dashboard/data${since === undefined ? '' : `?since=${since}`}`, { headers });
  assert.equal(res.status, 200);
  return (await res.json()) as DashboardData;
}

describe('GET /dashboard', () => {
  it('serves the page and its assets from its own origin, with their content types and cache headers', async (t) => {
    const app = await startProxy(t, await startSim(t));
    const res = await fetch(`${app.managementUrl}/dashboard`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.equal(res.headers.get('cache-control'), 'no-cache');
    assert.match(
      res.headers.get('content-security-policy')!,
      /default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'/,
    );
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    const html = await res.text();
    assert.match(html, /data-auth="none"/);
    const etag = res.headers.get('etag')!;
    assert.equal((await fetch(`${app.managementUrl}/dashboard`, { headers: { 'if-none-match': etag } })).status, 304);

    const refs = [...html.matchAll(/(?:src|href)="([^"]*)"/g)].map((m) => m[1]!);
    assert.deepEqual(
      refs.filter((r) => !r.startsWith('dashboard/assets/') && r !== 'data:,'),
      [],
      'every asset is our own, by a relative URL',
    );
    const types = new Map<string, string>();
    for (const ref of refs.filter((r) => r.startsWith('dashboard/'))) {
      const asset = await fetch(`${app.managementUrl}/${ref}`);
      assert.equal(asset.status, 200, ref);
      assert.equal(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable', 'hashed names: cached for good');
      types.set(ref.replace(/^dashboard\/assets\/|\.[0-9a-f]{12}/g, ''), asset.headers.get('content-type')!);
      assert.ok((await asset.arrayBuffer()).byteLength > 1000, ref);
    }
    assert.deepEqual(Object.fromEntries(types), {
      'uPlot.min.css': 'text/css; charset=utf-8',
      'dashboard.css': 'text/css; charset=utf-8',
      'uPlot.iife.min.js': 'text/javascript; charset=utf-8',
      'dashboard-charts.js': 'text/javascript; charset=utf-8',
      'dashboard.js': 'text/javascript; charset=utf-8',
    });
    assert.equal((await fetch(`${app.managementUrl}/dashboard/assets/nothing.js`)).status, 404);
    const slash = await fetch(`${app.managementUrl}/dashboard/`, { redirect: 'manual' });
    assert.deepEqual([slash.status, slash.headers.get('location')], [308, '../dashboard']);

    const data = await fetch(`${app.managementUrl}/dashboard/data?since=oops`);
    assert.equal(data.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(data.headers.get('cache-control'), 'no-store');
    assert.equal(((await data.json()) as DashboardData).full, true);
  });

  it('with a metrics token: the page is served without it, its data only with it (one listener or two)', async (t) => {
    const upstream = await startSim(t);
    const port = String(await freePort());
    for (const env of [
      { INFERMETER_METRICS_TOKEN: TOKEN },
      { INFERMETER_METRICS_TOKEN: TOKEN, INFERMETER_MANAGEMENT_PORT: port, INFERMETER_METRICS_PORT: port },
    ]) {
      const app = await startProxy(t, upstream, env);
      const page = await fetch(`${app.managementUrl}/dashboard`);
      assert.equal(page.status, 200);
      const html = await page.text();
      assert.match(html, /data-auth="bearer"/, 'the page asks for the token first');
      assert.equal((await fetch(`${app.managementUrl}/${/src="(dashboard\/assets\/dashboard\.[^"]+)"/.exec(html)![1]}`)).status, 200);
      // A wrong token of the right length too: the comparison is of the whole token, not its length.
      for (const authorization of [undefined, 'Bearer wrong-token-000000000000', `Bearer ${TOKEN.slice(0, -1)}X`, `Basic ${TOKEN}`]) {
        const res = await fetch(`${app.managementUrl}/dashboard/data`, authorization === undefined ? {} : { headers: { authorization } });
        assert.equal(res.status, 401, String(authorization));
        assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="infermeter"');
        assert.doesNotMatch(await res.text(), /seq|models/);
      }
      assert.equal((await fetch(`${app.managementUrl}/dashboard/data?token=${TOKEN}`)).status, 401, 'never a token in the URL');
      assert.equal((await dashboardData(app.managementUrl, undefined, { authorization: `Bearer ${TOKEN}` })).full, true);
      assert.equal((await fetch(app.metricsUrl!)).status, 401, '/metrics still wants it');
    }
  });

  it('covers every worker in workers mode (each snapshot after the workers flushed)', async (t) => {
    const upstream = await startSim(t);
    const env = {
      PATH: process.env.PATH ?? '',
      INFERMETER_UPSTREAM: upstream,
      INFERMETER_PORT: String(await freePort()),
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_UPSTREAM_METRICS: 'off',
      INFERMETER_LOG_LEVEL: 'warn',
    };
    const app = await startClusterPrimary(loadConfig(env), env, { log: silentLogger, workers: 2 });
    t.after(() => app.close());
    await dashboardData(app.managementUrl); // someone watches: snapshots flush the workers first
    const jobs: Array<Promise<string>> = [];
    for (let i = 0; i < 12; i++) {
      jobs.push(
        fetch(`${app.dataUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(i % 4 === 3 ? { 'x-fail': '1' } : {}) },
          // Prompts of different lengths: the simulated server counts about one token per 4 characters.
          body: JSON.stringify({
            model: MODELS[i % 2],
            stream: true,
            stream_options: { include_usage: true },
            max_tokens: 5,
            messages: [{ role: 'user', content: 'tokens '.repeat(4 * i + 1) }],
          }),
        }).then((r) => r.text()),
      );
    }
    // The prompt tokens each model's answers reported to the client, in their usage chunks.
    const reported: Record<string, number> = Object.fromEntries(MODELS.map((m) => [m, 0]));
    for (const [i, text] of (await Promise.all(jobs)).entries()) {
      const usage = text
        .split('\n')
        .filter((l) => l.startsWith('data: {') && l.includes('"usage":{'))
        .map((l) => (JSON.parse(l.slice(6)) as { usage: { prompt_tokens: number } }).usage);
      assert.equal(usage.length, i % 4 === 3 ? 0 : 1, `request ${i}: ${text.slice(0, 200)}`);
      for (const u of usage) reported[MODELS[i % 2]!]! += u.prompt_tokens;
    }
    assert.ok(
      new Set(Object.values(reported)).size === MODELS.length && Object.values(reported).every((n) => n > 12),
      `prompt tokens ${JSON.stringify(reported)}`,
    );
    // The next snapshot after the requests finished holds them all.
    const first = (await dashboardData(app.managementUrl)).seq;
    let data: DashboardData;
    const deadline = Date.now() + 15_000;
    do {
      await new Promise((resolve) => setTimeout(resolve, 200));
      data = await dashboardData(app.managementUrl);
      assert.ok(Date.now() < deadline, `the snapshots stopped at seq ${data.seq} (waiting for ${first + 2})`);
    } while (data.seq < first + 2);
    const totals = Object.fromEntries(data.models.map((m) => [m.model, m.totals]));
    // i % 4 === 3 fails: i = 3, 7, 11, all for the second model.
    assert.deepEqual(totals, {
      [MODELS[0]!]: { received: 6, success: 6, failed: 0, cancelled: 0, promptTokens: reported[MODELS[0]!], generationTokens: 30, clientErrors: 0, streams: 6 },
      [MODELS[1]!]: { received: 6, success: 3, failed: 3, cancelled: 0, promptTokens: reported[MODELS[1]!], generationTokens: 15, clientErrors: 0, streams: 3 },
    });
    assert.ok(
      data.models.every((m) => m.series.tpotP50.some((v) => v !== null)),
      "quantiles from the workers' samples",
    );
  });
});

// One browser for the file; each test its own infermeter and traffic. Most of a test's time is
// waiting for the page's next snapshots (one a second): two tests at a time. A page, each in a
// browser context of its own, is kept for the next test once one ends: its first page cost
// chromium about a second of CPU, a page opened again in it a fifth of that. Each test's
// infermeter is another origin (its own port), so no storage or cache is shared between tests.
describe('the dashboard in a browser', { skip: skipBrowser, concurrency: 2 }, () => {
  let browser: Browser;
  const idle: Page[] = [];
  before(async () => {
    assert.ok(CHROMIUM, 'chromium must be installed (Debian package chromium)');
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: process.getuid?.() === 0 ? ['--no-sandbox'] : [] });
  });
  after(() => browser?.close());

  /** The dashboard (at `hash`) in a page that records every request it makes and every console error. */
  async function open(t: TestContext, app: Infermeter, hash = ''): Promise<{ page: Page; requests: string[]; errors: string[] }> {
    const page = idle.pop() ?? (await (await browser.newContext({ viewport: { width: 1440, height: 1050 } })).newPage());
    const requests: string[] = [];
    const errors: string[] = [];
    const onRequest = (r: { url(): string }) => requests.push(r.url());
    const onConsole = (m: { type(): string; text(): string }) => {
      if (m.type() === 'error') errors.push(m.text());
    };
    const onPageError = (e: Error) => errors.push(e.message);
    page.on('request', onRequest);
    page.on('console', onConsole);
    page.on('pageerror', onPageError);
    t.after(async () => {
      page.off('request', onRequest);
      page.off('console', onConsole);
      page.off('pageerror', onPageError);
      // On a blank page for the next test: no longer polling this test's infermeter (closed by
      // then: its hook was registered first).
      await page.goto('about:blank');
      idle.push(page);
    });
    await page.goto(`${app.managementUrl}/dashboard${hash}`);
    return { page, requests, errors };
  }

  const cell = (page: Page, model: string, field: string): Promise<string> =>
    page.locator(`#models tr[data-model="${model}"] td[data-field="${field}"]`).innerText();

  it('charts and figures for two models update as traffic flows, from its own origin only', async (t) => {
    const upstream = await startSim(t);
    const app = await startProxy(t, upstream, { INFERMETER_UPSTREAM_METRICS: `${upstream}/metrics`, INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '1' });
    const measured = recordMeasured(app);
    startTraffic(t, app.dataUrl);
    const { page, requests, errors } = await open(t, app);

    // Both models' rows and the six charts (uPlot canvases).
    await page.waitForFunction((models) => models.every((m) => document.querySelector(`#models tr[data-model="${m}"]`)), MODELS, { timeout: 10_000 });
    assert.equal(await page.locator('.chart canvas').count(), 6);
    assert.deepEqual(await page.locator('.chart').evaluateAll((els) => els.map((e) => (e as Dom).dataset.chart)), [
      'requests',
      'ttft',
      'tpot',
      'tokens',
      'inflight',
      'kv',
    ]);

    // Figures: TTFT quantiles, tokens per second, failures and the engine's KV cache show numbers.
    await page.waitForFunction(
      (model) => {
        const text = (f: string) => document.querySelector(`#models tr[data-model="${model}"] td[data-field="${f}"]`)?.textContent ?? '–';
        return ['ttftP50', 'ttftP99', 'tpotP90', 'generationTokens', 'finished', 'kvCache'].every((f) => /\d/.test(text(f))) && Number(text('failed')) > 0;
      },
      MODELS[1],
      { timeout: 15_000 },
    );
    const ttft = Number((await cell(page, MODELS[0]!, 'ttftP50')).replace(/,/g, ''));
    // A quantile of the window never reads outside the smallest and largest TTFT measured (the
    // page rounds to whole ms); the simulated server waits at least 40 ms, a timer fires at most
    // 1 ms early. How slow this machine is moves the figure, not the bounds.
    const [fastest, slowest] = span(
      figures(
        measured.samples.filter((s) => s.model === MODELS[0]),
        (s) => s.ttft,
      ).map((v) => v * 1000),
    );
    assert.ok(fastest >= 39, `fastest TTFT ${fastest} ms`);
    assert.ok(ttft >= fastest - 0.5 && ttft <= slowest + 0.5, `TTFT p50 ${ttft} ms, measured TTFTs from ${fastest} to ${slowest} ms`);
    assert.match(await cell(page, MODELS[0]!, 'kvCache'), /^\d+\.\d %$/);

    // ... and they update: more requests counted, a newer snapshot, a redrawn chart.
    const received = await cell(page, MODELS[0]!, 'received');
    const seq = Number(await page.locator('#status').getAttribute('data-seq'));
    const pixels = await page.locator('[data-chart="ttft"] canvas').evaluate((c) => (c as Dom).toDataURL());
    await page.waitForFunction(
      ([model, before, seqBefore, pixelsBefore]) =>
        document.querySelector(`#models tr[data-model="${model}"] td[data-field="received"]`)?.textContent !== before &&
        Number(document.getElementById('status')?.dataset.seq) >= Number(seqBefore) + 2 &&
        (document.querySelector('[data-chart="ttft"] canvas') as Dom).toDataURL() !== pixelsBefore,
      [MODELS[0]!, received, String(seq), pixels] as const,
      { timeout: 10_000 },
    );

    // Choosing the other model redraws the charts for it.
    await page.selectOption('#model', MODELS[1]!);
    await page.waitForFunction((model) => [...document.querySelectorAll('.chart')].every((c) => (c as Dom).dataset.model === model), MODELS[1]);
    assert.equal(await page.locator(`#models tr[data-model="${MODELS[1]}"]`).getAttribute('class'), 'selected');

    if (process.env.UPDATE_SCREENSHOT === '1') {
      // A fuller picture for docs/dashboard.png: a minute of traffic.
      await page.waitForFunction(() => Number(document.querySelector('.chart')?.getAttribute('data-points')) >= 60, undefined, { timeout: 90_000 });
    }
    await page.screenshot({
      path: process.env.UPDATE_SCREENSHOT === '1' ? SCREENSHOT : join(mkdtempSync(join(tmpdir(), 'infermeter-dashboard-')), 'dashboard.png'),
      fullPage: true,
    });

    const origin = new URL(app.managementUrl).origin;
    assert.deepEqual(
      requests.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith('data:')),
      [],
      'no request to another origin',
    );
    assert.ok(requests.some((u) => u.startsWith(`${origin}/dashboard/data`)));
    assert.deepEqual(errors, [], 'no console error');
  });

  it('opens on the busiest model unless #model=<name> names one; legends carry their units; a fresh page spans a minute', async (t) => {
    const upstream = await startSim(t);
    const app = await startProxy(t, upstream, { INFERMETER_UPSTREAM_METRICS: `${upstream}/metrics`, INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '1' });
    const send = async (model: string): Promise<void> => {
      await post(`${app.dataUrl}/v1/chat/completions`, { model, max_tokens: 2, stream: true });
    };
    // First in name order, but one 404 only; the busiest is the last in name order.
    await send('a-mistyped-model');
    for (let i = 0; i < 3; i++) await send(MODELS[1]!);
    await send(MODELS[0]!);
    // The page decides on its first data: wait for a snapshot taken after every request (the
    // feed takes one a second), or it may open on a snapshot from between them.
    for (let tries = 0; tries < 100; tries++) {
      const busiest = (await dashboardData(app.managementUrl)).models.find((m) => m.model === MODELS[1]);
      if (busiest?.totals.received === 3) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const { page, errors } = await open(t, app);
    await page.waitForFunction((n) => document.querySelectorAll('#models tbody tr').length === n, 3, { timeout: 10_000 });
    assert.equal(await page.locator('#model').inputValue(), MODELS[1]);
    await page.waitForFunction((model) => [...document.querySelectorAll('.chart')].every((c) => (c as Dom).dataset.model === model), MODELS[1]);
    // The legends' newest values: TTFT in ms, the KV cache in % (the simulated engine's /metrics is read).
    await page.waitForFunction(
      () => /\d ms$/.test(document.querySelector('[data-chart="ttft"] .u-series:nth-child(2) .u-value')?.textContent ?? ''),
      undefined,
      { timeout: 10_000 },
    );
    await page.waitForFunction(() => /\d %$/.test(document.querySelector('[data-chart="kv"] .u-series:nth-child(2) .u-value')?.textContent ?? ''), undefined, {
      timeout: 10_000,
    });
    // The time axis spans at least a minute on a fresh page (seconds of data).
    const spans = await page.locator('.chart').evaluateAll((els) => els.map((e) => Number((e as Dom).dataset.xspan)));
    assert.ok(
      spans.every((s) => s >= 60),
      `x spans ${spans.join(', ')} s`,
    );

    const { page: other } = await open(t, app, '#model=a-mistyped-model');
    // Charts there at all: before the first render there are none, and every() of none is true.
    await other.waitForFunction(
      () => {
        const charts = [...document.querySelectorAll('.chart')];
        return charts.length > 0 && charts.every((c) => (c as Dom).dataset.model === 'a-mistyped-model');
      },
      undefined,
      { timeout: 10_000 },
    );
    assert.equal(await other.locator('#model').inputValue(), 'a-mistyped-model');
    assert.deepEqual(errors, []);
  });

  it("shows the clients' 4xx apart from failures and not in red, and says why a chart is empty (issue 52)", async (t) => {
    const upstream = await startSim(t);
    const app = await startProxy(t, upstream, { INFERMETER_SLO: 'ttft:4000 tpot:50' });
    const send = async (model: string, stream: boolean, fail = false): Promise<void> => {
      await post(`${app.dataUrl}/v1/chat/completions`, { model, max_tokens: 4, stream }, fail ? { 'x-fail': '1' } : {});
    };
    // Rates are from the first snapshot on: the traffic comes after it. The page is open before
    // it: its shares are over the last 10 s, which a page opened after the traffic on a busy
    // machine could miss.
    for (let tries = 0; tries < 100 && (await dashboardData(app.managementUrl)).seq < 1; tries++) await new Promise((resolve) => setTimeout(resolve, 50));
    const { page, errors } = await open(t, app);
    const finished = nextFinished(app, 8);
    // A mistyped model (404s only), a model asked only without streaming, and one with a 500.
    await Promise.all([send('a-mistyped-model', true), send('a-mistyped-model', false), send(MODELS[0]!, false), send(MODELS[0]!, false)]);
    await Promise.all([send(MODELS[1]!, true), send(MODELS[1]!, true), send(MODELS[1]!, true), send(MODELS[1]!, true, true)]);
    await finished;
    const row = (model: string, field: string) => `#models tr[data-model="${model}"] td[data-field="${field}"]`;
    // A snapshot with all of the traffic: one taken after the last request finished. The page,
    // open since before it, may show one taken between requests first (the 404s, or the 500 of
    // the second batch before its streams ended).
    const last = (await dashboardData(app.managementUrl)).seq;
    await page.waitForFunction((seq) => Number(document.querySelector('#status')?.getAttribute('data-seq') ?? -1) > seq, last, { timeout: 10_000 });
    // The clients' 404s: 100 % 4xx, marked but not red; 0 % failed.
    assert.equal(await page.locator(row('a-mistyped-model', 'clientErrorShare')).innerText(), '100.0 %');
    assert.equal(await page.locator(row('a-mistyped-model', 'failedShare')).innerText(), '0.0 %');
    assert.deepEqual(await page.locator(row('a-mistyped-model', 'clientErrorShare')).evaluate((c) => [...(c as Dom).classList]), ['client']);
    assert.deepEqual(
      await page.locator('#models td.bad').evaluateAll((cells) => cells.map((c) => (c as Dom).dataset.field + ' ' + (c as Dom).parentElement.dataset.model)),
      [`failedShare ${MODELS[1]}`, `attainment ${MODELS[1]}`], // its 500: a failure, which goodput counts too
    );
    assert.equal(await page.locator(row(MODELS[1]!, 'failedShare')).innerText(), '25.0 %');
    // The non-streamed model: its SLO met (TTFT is its whole answer, well within 4 s), and its
    // TTFT and TPOT charts say why they are empty; the KV chart too (the engine's metrics are not read).
    assert.equal(await page.locator(row(MODELS[0]!, 'attainment')).innerText(), '100.0 %');
    await page.selectOption('#model', MODELS[0]!);
    await page.waitForFunction((model) => [...document.querySelectorAll('.chart')].every((c) => (c as Dom).dataset.model === model), MODELS[0]);
    const why = await page
      .locator('.chart')
      .evaluateAll((els) =>
        els.map((e) => [(e as Dom).dataset.chart, (e as Dom).querySelector('.why-empty').hidden ? '' : (e as Dom).querySelector('.why-empty').textContent]),
      );
    assert.deepEqual(Object.fromEntries(why), {
      requests: '',
      ttft: 'no streamed requests: TTFT and TPOT are measured on streamed answers only',
      tpot: 'no streamed requests: TTFT and TPOT are measured on streamed answers only',
      tokens: '',
      inflight: '',
      kv: "no figure: the engine's metrics are not read (INFERMETER_UPSTREAM_METRICS) or do not report it",
    });
    await page.selectOption('#model', MODELS[1]!);
    await page.waitForFunction(() => document.querySelector('[data-chart="ttft"] .why-empty')?.hidden === true);
    if (process.env.DASHBOARD_SHOT !== undefined) await page.screenshot({ path: process.env.DASHBOARD_SHOT, fullPage: true });
    assert.deepEqual(errors, []);
  });

  it("shows the tenant table with per-tenant metering, a tenant's name as text only", async (t) => {
    const upstream = await startSim(t);
    const app = await startProxy(t, upstream, { INFERMETER_TENANT: 'header:x-tenant-id' });
    const HOSTILE = '<img src=x onerror="window.pwned=1">team';
    const finished = nextFinished(app, 5);
    const send = async (tenant: string, fail = false): Promise<void> => {
      const res = await fetch(`${app.dataUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-tenant-id': tenant, ...(fail ? { 'x-fail': '1' } : {}) },
        body: JSON.stringify({ model: MODELS[0], stream: true, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] }),
      });
      await res.arrayBuffer();
    };
    await send('search-team');
    await send('search-team');
    await send('search-team', true);
    await send(HOSTILE);
    await send(HOSTILE);
    const samples = await finished;
    const { page, errors } = await open(t, app);
    await page.locator('#tenants').waitFor({ state: 'visible', timeout: 10_000 });
    const rows = await page
      .locator('#tenant-table tbody tr')
      .evaluateAll((trs) => trs.map((tr) => [...(tr as Dom).querySelectorAll('td')].map((td) => (td as Dom).textContent)));
    const tokens = (tenant: string) => samples.filter((s) => s.tenant === tenant).reduce((n, s) => n + (s.completionTokens ?? 0), 0);
    assert.deepEqual(
      rows.map((r) => [r[0], r[1], r[2], r[4]]),
      [
        ['search-team', '3', '33.3 %', String(tokens('search-team'))],
        [HOSTILE, '2', '0.0 %', String(tokens(HOSTILE))],
      ],
    );
    assert.match(rows[0]![5]!, /^\d/, `TTFT p50 ${rows[0]![5]}`);
    assert.equal(await page.evaluate(() => (globalThis as { pwned?: number }).pwned), undefined, 'the name was never markup');
    assert.equal(await page.locator('#tenant-table img').count(), 0);
    assert.deepEqual(errors, []);
  });

  it("shows goodput's attainment per model and per tenant with INFERMETER_SLO, and no such column without", async (t) => {
    const upstream = await startSim(t);
    // The sim's TTFT is 40 to 160 ms and its gaps 4 to 12 ms: every completed stream is good.
    const app = await startProxy(t, upstream, { INFERMETER_TENANT: 'header:x-tenant-id', INFERMETER_SLO: 'ttft:1000 tpot:100' });
    const finished = nextFinished(app, 5);
    const send = async (tenant: string, fail = false): Promise<void> => {
      const res = await fetch(`${app.dataUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-tenant-id': tenant, ...(fail ? { 'x-fail': '1' } : {}) },
        body: JSON.stringify({ model: MODELS[0], stream: true, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] }),
      });
      await res.arrayBuffer();
    };
    await Promise.all([send('search-team'), send('search-team'), send('ops'), send('ops')]);
    // After its successes: a tenant's failure before its first 2xx is `unauthenticated`'s (issue 49).
    await send('search-team', true);
    await finished;
    const { page, errors } = await open(t, app);
    await page.locator('#tenants').waitFor({ state: 'visible', timeout: 10_000 });
    await page.waitForFunction(
      (model) => document.querySelector(`#models tr[data-model="${model}"] td[data-field="attainment"]`)?.textContent === '80.0 %',
      MODELS[0],
      { timeout: 10_000 },
    );
    assert.equal(await page.locator('#models th.slo').isVisible(), true);
    const rows = await page
      .locator('#tenant-table tbody tr')
      .evaluateAll((trs) => trs.map((tr) => [...(tr as Dom).querySelectorAll('td')].map((td) => (td as Dom).textContent)));
    assert.deepEqual(
      rows.map((r) => [r[0], r[7]]),
      [
        ['search-team', '66.7 %'],
        ['ops', '100.0 %'],
      ],
    );
    assert.match(await page.locator('#slo').innerText(), /default: ttft:1000 tpot:100/);
    assert.match(
      (await page.locator(`#models tr[data-model="${MODELS[0]}"] td[data-field="attainment"]`).getAttribute('title')) ?? '',
      /^4 good, 0 missed, 1 failed, 0 cancelled/,
    );
    assert.deepEqual(errors, []);

    const plain = await startProxy(t, upstream);
    const other = await open(t, plain);
    await other.page.locator('#live').waitFor({ state: 'visible', timeout: 10_000 });
    assert.equal(await other.page.locator('#models th.slo').isVisible(), false, 'no SLO: no goodput column');
    assert.equal(await other.page.locator('#slo').isVisible(), false);
  });

  it('with a metrics token: asks for it, refuses a wrong one, works with the right one, and keeps it out of URLs', async (t) => {
    const upstream = await startSim(t);
    const app = await startProxy(t, upstream, { INFERMETER_METRICS_TOKEN: TOKEN });
    startTraffic(t, app.dataUrl, 2);
    assert.equal((await fetch(`${app.managementUrl}/dashboard/data`)).status, 401);
    const { page, requests, errors } = await open(t, app);

    await page.locator('#login').waitFor({ state: 'visible' });
    assert.equal(await page.locator('#live').isVisible(), false);
    await page.fill('#token', 'wrong-token-0000000000000000');
    await page.click('#login button[type=submit]');
    await page.waitForFunction(() => document.getElementById('login-error')?.textContent === 'The token was refused.');
    await page.fill('#token', TOKEN);
    await page.click('#login button[type=submit]');
    await page.waitForFunction((models) => models.every((m) => document.querySelector(`#models tr[data-model="${m}"]`)), MODELS, { timeout: 10_000 });
    assert.equal(await page.locator('.chart canvas').count(), 6);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('infermeter.dashboard.token')), TOKEN, 'kept for this tab');
    const seq = Number(await page.locator('#status').getAttribute('data-seq'));
    await page.waitForFunction((before) => Number(document.getElementById('status')?.dataset.seq) > before, seq);

    assert.deepEqual(
      requests.filter((u) => u.includes(TOKEN)),
      [],
      'the token is in no URL',
    );
    // The wrong token's 401 is the only thing the console may report.
    assert.deepEqual(
      errors.filter((e) => !/status of 401/.test(e)),
      [],
    );
    assert.ok(errors.length <= 1, errors.join('\n'));

    await page.click('#forget');
    await page.locator('#login').waitFor({ state: 'visible' });
    assert.equal(await page.evaluate(() => sessionStorage.getItem('infermeter.dashboard.token')), null);
  });
});
