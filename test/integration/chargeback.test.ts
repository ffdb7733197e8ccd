// Chargeback, live: a prices file of both kinds (a per-token price for llama-*, a per_hour pool
// for every model), two tenants and two models, scripted on an injected clock against an
// upstream that answers when the test says so, with the usage the test chose. Every cost
// counter is compared with the figure computed by hand below, to the nano-unit; idle plus the
// tenants' shares equal the pool's cost; a price change by reload applies from that moment with
// its version; a bad file keeps the prices and names the key. These are the figures of
// docs/chargeback.md's worked example.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runUsage } from '../../src/cli/usage-command.ts';
import { createLogger } from '../../src/log.ts';
import type { DashboardData } from '../../src/management/dashboard-feed.ts';
import type { RequestInfo, RequestSample } from '../../src/measure/sample.ts';
import { clusterEnv, nextFinished, startProxy } from '../helpers/proxy-harness.ts';
import { freePort } from '../helpers/listen.ts';
import { startClusterPrimary } from '../../src/cluster/primary.ts';
import { loadConfig } from '../../src/config/config.ts';

const PRICES = `currency: USD
version: "2026-12"
models:
  - match: "llama-*"
    per_million_tokens: { prompt: 0.20, cached_prompt: 0.000003, completion: 0.60, reasoning: 0.90 }
  - match: "*"
    per_hour: 12.50
`;
// From t = 90 s: completion dearer (reasoning left out: priced as completion), the pool doubled.
const PRICES_B = `currency: USD
version: "2026-12b"
models:
  - match: "llama-*"
    per_million_tokens: { prompt: 0.20, cached_prompt: 0.000003, completion: 1.20 }
  - match: "*"
    per_hour: 25.00
`;

interface Usage {
  readonly prompt: number;
  readonly cached: number;
  readonly completion: number;
  readonly reasoning: number;
}

/** An upstream that holds each request until `answer(id)`, then answers with the usage its x-usage header chose. */
async function heldUpstream(): Promise<{ url: string; answer(id: string): void; close(): Promise<void> }> {
  const held = new Map<string, { res: ServerResponse; usage: Usage; model: string }>();
  const waiting = new Map<string, () => void>();
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const id = String(req.headers['x-id']);
      held.set(id, { res, usage: JSON.parse(String(req.headers['x-usage'])) as Usage, model: (JSON.parse(body) as { model: string }).model });
      waiting.get(id)?.();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    answer(id) {
      const go = (): void => {
        const h = held.get(id)!;
        const u = h.usage;
        h.res.writeHead(200, { 'content-type': 'application/json' });
        h.res.end(
          JSON.stringify({
            id,
            object: 'chat.completion',
            model: h.model,
            choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
            usage: {
              prompt_tokens: u.prompt,
              completion_tokens: u.completion,
              total_tokens: u.prompt + u.completion,
              prompt_tokens_details: { cached_tokens: u.cached },
              completion_tokens_details: { reasoning_tokens: u.reasoning },
            },
          }),
        );
      };
      if (held.has(id)) go();
      else waiting.set(id, go);
    },
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

function send(url: string, id: string, tenant: string, model: string, usage: Usage): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/chat/completions`,
      {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'x-tenant': tenant, 'x-id': id, 'x-usage': JSON.stringify(usage) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve());
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }));
  });
}

/** The cost series of an exposition, written exactly (as text: no float in between). */
function series(text: string, family: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${family}{`)) continue;
    const space = line.lastIndexOf(' ');
    out.set(line.slice(family.length, space), line.slice(space + 1));
  }
  return out;
}

describe('chargeback (INFERMETER_PRICES_FILE)', () => {
  it('per-token and per-hour costs equal the figures computed by hand, to the nano-unit, across a reload', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-prices-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const file = join(dir, 'prices.yaml');
    writeFileSync(file, PRICES);
    writeFileSync(join(dir, 'aliases.json'), JSON.stringify({ acme: 'acme', globex: 'globex' }));
    const upstream = await heldUpstream();
    t.after(() => upstream.close());
    const logLines: string[] = [];
    let now = 0;
    const s = (seconds: number): void => {
      now = seconds * 1000;
    };
    const app = await startProxy(
      t,
      upstream.url,
      {
        INFERMETER_PRICES_FILE: file,
        INFERMETER_TENANT: 'header:x-tenant',
        INFERMETER_TENANT_ALIASES: join(dir, 'aliases.json'),
        INFERMETER_USAGE_DIR: join(dir, 'usage'),
      },
      { clock: () => now, log: createLogger('info', (line) => void logLines.push(line)) },
    );
    const started = new Map<string, () => void>();
    const finished = new Map<string, (s: RequestSample) => void>();
    app.metrics.addObserver({
      started: (raw: RequestInfo) => started.get(`${raw.tenant}/${raw.model}`)?.(),
      finished: (sample: RequestSample, raw: RequestInfo) => finished.get(`${raw.tenant}/${raw.model}`)?.(sample),
    });
    const begin = async (id: string, tenant: string, model: string, usage: Usage): Promise<() => Promise<void>> => {
      const key = `${tenant}/${model}`;
      const isStarted = new Promise<void>((resolve) => started.set(key, resolve));
      const done = send(app.dataUrl, id, tenant, model, usage);
      await isStarted;
      return async () => {
        const isFinished = new Promise<void>((resolve) => finished.set(key, () => resolve()));
        upstream.answer(id);
        await Promise.all([done, isFinished]);
      };
    };
    const scrapeText = async (): Promise<string> => (await fetch(app.metricsUrl!)).text();

    // Interval [0 s, 60 s): A (acme, llama) 0-20 s, B (globex, qwen) 10-30 s, D (globex, llama) 40-50 s.
    s(0);
    const endA = await begin('A', 'acme', 'llama-8b', { prompt: 1000, cached: 400, completion: 500, reasoning: 100 });
    s(10);
    const endB = await begin('B', 'globex', 'qwen-7b', { prompt: 300, cached: 0, completion: 200, reasoning: 0 });
    s(20);
    await endA();
    s(30);
    await endB();
    s(40);
    const endD = await begin('D', 'globex', 'llama-8b', { prompt: 50, cached: 0, completion: 10, reasoning: 0 });
    s(50);
    await endD();
    s(60);
    const first = await scrapeText();
    // The pool: 12.50/h over 60 s = 208 333 333.33 -> 208 333 333 nano-units. Busy 40 s of 60:
    // 138 888 888 to the tenants, 69 444 445 idle. Request-seconds: acme/llama 20, globex/qwen 20,
    // globex/llama 10 (of 50): 55 555 555.2, 55 555 555.2, 27 777 777.6; the one nano-unit left
    // goes to the largest fraction (globex/llama).
    assert.equal(series(first, 'infermeter_pool_cost_nanos_total').get('{pool="*"}'), '208333333');
    const hour1 = series(first, 'infermeter_tenant_cost_nanos_total');
    assert.equal(hour1.get('{tenant="acme",model_name="llama-8b",kind="hour"}'), '55555555');
    assert.equal(hour1.get('{tenant="globex",model_name="qwen-7b",kind="hour"}'), '55555555');
    assert.equal(hour1.get('{tenant="globex",model_name="llama-8b",kind="hour"}'), '27777778');
    assert.equal(hour1.get('{tenant="idle",model_name="*",kind="hour"}'), '69444445');

    // t = 90 s: the new prices (version 2026-12b) by reload; the old pool settles [60 s, 90 s) idle.
    s(90);
    writeFileSync(file, PRICES_B);
    app.reloadPrices();
    const endC = await begin('C', 'acme', 'llama-8b', { prompt: 400, cached: 300, completion: 100, reasoning: 0 });
    s(120);
    await endC();
    // A bad file at t = 130 s keeps 2026-12b and names the key.
    s(130);
    writeFileSync(file, PRICES_B.replace('per_hour: 25.00', 'per_hour: 25,00'));
    app.reloadPrices();
    assert.ok(
      logLines.some((l) => l.includes('INFERMETER_PRICES_FILE not reloaded') && l.includes('models[1].per_hour is not a decimal number')),
      logLines.join(''),
    );
    s(150);
    const text = await scrapeText();
    const cost = series(text, 'infermeter_tenant_cost_nanos_total');
    const expected: Record<string, string> = {
      // Tokens: A (old prices) 600 uncached x 0.20 + C (new) 100 x 0.20 = 140 000; cached 400 and
      // 300 x 0.000003 = 0.0021 -> 2 (the sum floored once, not each request's 1.2 and 0.9);
      // completion 400 x 0.60 + 100 x 1.20 = 360 000; reasoning 100 x 0.90 = 90 000.
      '{tenant="acme",model_name="llama-8b",kind="prompt"}': '140000',
      '{tenant="acme",model_name="llama-8b",kind="cached_prompt"}': '2',
      '{tenant="acme",model_name="llama-8b",kind="completion"}': '360000',
      '{tenant="acme",model_name="llama-8b",kind="reasoning"}': '90000',
      '{tenant="globex",model_name="llama-8b",kind="prompt"}': '10000',
      '{tenant="globex",model_name="llama-8b",kind="cached_prompt"}': '0',
      '{tenant="globex",model_name="llama-8b",kind="completion"}': '6000',
      '{tenant="globex",model_name="llama-8b",kind="reasoning"}': '0',
      // Hours: [90 s, 150 s) at 25.00/h = 416 666 666; C held it 30 s alone: half, 208 333 333.
      '{tenant="acme",model_name="llama-8b",kind="hour"}': String(55_555_555 + 208_333_333),
      '{tenant="globex",model_name="qwen-7b",kind="hour"}': '55555555',
      '{tenant="globex",model_name="llama-8b",kind="hour"}': '27777778',
      // Idle: 69 444 445 + [60 s, 90 s) at 12.50/h (312 500 000 - 208 333 333) + the other half of [90 s, 150 s).
      '{tenant="idle",model_name="*",kind="hour"}': String(69_444_445 + 104_166_667 + 208_333_333),
    };
    assert.deepEqual(Object.fromEntries(cost), expected);
    const pool = BigInt(series(text, 'infermeter_pool_cost_nanos_total').get('{pool="*"}')!);
    assert.equal(pool, 208_333_333n + 104_166_667n + 416_666_666n);
    const hours = [...cost].filter(([k]) => k.includes('kind="hour"')).reduce((sum, [, v]) => sum + BigInt(v), 0n);
    assert.equal(hours, pool, 'idle + the tenants shares == the pool cost');
    assert.equal(series(text, 'infermeter_prices_info').get('{version="2026-12b",currency="USD"}'), '1');
    const perModel = series(text, 'infermeter_cost_nanos_total');
    assert.equal(perModel.get('{model_name="llama-8b",kind="hour"}'), String(263_888_888 + 27_777_778));
    assert.equal(perModel.get('{model_name="llama-8b",kind="prompt"}'), '150000');

    // Where people look: /metrics-json's total and idle share, the dashboard's cost per tenant (exact decimals).
    const json = (await (await fetch(`${app.managementUrl}/metrics-json`)).json()) as { result: { metric: { __name__: string }[]; value: string }[] };
    const figure = (name: string) => json.result.find((r) => r.metric[0]!.__name__ === name)?.value;
    assert.equal(figure('costNanos'), String(729_166_666 + 140_000 + 2 + 360_000 + 90_000 + 10_000 + 6_000));
    assert.equal(figure('idleCostNanos'), '381944445');
    const board = (await (await fetch(`${app.managementUrl}/dashboard/data`)).json()) as DashboardData;
    assert.deepEqual(board.cost, {
      currency: 'USD',
      // acme 140 000 + 2 + 360 000 + 90 000 + 263 888 888; globex 10 000 + 6 000 + 27 777 778 + 55 555 555.
      tenants: { acme: '0.26447889', globex: '0.083349333', idle: '0.381944445' },
    });

    // The usage records: each request's per-token cost at the prices of its end, and their version.
    await app.close();
    const records = readdirSync(join(dir, 'usage'))
      .flatMap((f) => readFileSync(join(dir, 'usage', f), 'utf8').split('\n'))
      .filter((l) => l !== '')
      .map((l) => (JSON.parse(l) as { data: { request_id: string; cost_nanos: number | null; price_version: string | null } }).data);
    const byModel = Object.fromEntries(records.map((r) => [`${r.price_version}:${r.cost_nanos}`, true]));
    // A: 120 000 + 1.2 + 240 000 + 90 000 -> 450 001; D: 16 000; B: no per-token price; C: 20 000 + 0.9 + 120 000 -> 140 000.
    assert.deepEqual(Object.keys(byModel).sort(), ['2026-12:16000', '2026-12:450001', '2026-12:null', '2026-12b:140000']);
    // `infermeter usage report`: a row per tenant, model and prices version, with the records' cost.
    const report = await runUsage(['report', '--dir', join(dir, 'usage'), '--format', 'csv']);
    assert.equal(
      report.out,
      [
        'tenant,model,requests,prompt_tokens,completion_tokens,reasoning_tokens,cached_prompt_tokens,price_version,cost_nanos',
        'acme,llama-8b,1,1000,500,100,400,2026-12,450001',
        'acme,llama-8b,1,400,100,0,300,2026-12b,140000',
        'globex,llama-8b,1,50,10,0,0,2026-12,16000',
        'globex,qwen-7b,1,300,200,0,0,2026-12,',
        '',
      ].join('\n'),
    );
  });

  it("with two workers: the primary prices every worker's requests and splits the pool, each worker prices its records, a reload reaches them", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-prices-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const file = join(dir, 'prices.yaml');
    writeFileSync(file, PRICES);
    const upstream = await heldUpstream();
    t.after(() => upstream.close());
    const env = clusterEnv(upstream.url, {
      INFERMETER_HOST: '127.0.0.1',
      INFERMETER_PORT: String(await freePort()),
      INFERMETER_LOG_LEVEL: 'warn',
      INFERMETER_PRICES_FILE: file,
      INFERMETER_TENANT: 'header:x-tenant',
      INFERMETER_USAGE_DIR: join(dir, 'usage'),
    });
    let now = 0;
    const app = await startClusterPrimary(loadConfig(env), env, { log: createLogger('error', () => undefined), workers: 2, clock: () => now });
    t.after(() => app.close());
    const usage: Usage = { prompt: 1000, cached: 400, completion: 500, reasoning: 100 };
    // The primary hears a request's end with the worker's next batch: the clock moves once it heard all four.
    const heard = nextFinished(app, 4);
    const shots = ['a1', 'a2', 'g1', 'g2'].map((id) => {
      const done = send(app.dataUrl, id, id.startsWith('a') ? 'acme' : 'globex', 'llama-8b', usage);
      upstream.answer(id);
      return done;
    });
    await Promise.all([...shots, heard]);
    // Nothing was in flight on the primary's clock (it stood still): the whole minute is idle.
    now = 60_000;
    const text = await (await fetch(app.metricsUrl!)).text();
    const cost = series(text, 'infermeter_tenant_cost_nanos_total');
    // Each request: 600 x 0.20 + 400 x 0.000003 + 400 x 0.60 + 100 x 0.90 = 450 001.2; two per tenant: 900 002.4 -> 900 002.
    for (const tenant of ['acme', 'globex']) {
      const total = ['prompt', 'cached_prompt', 'completion', 'reasoning'].reduce(
        (sum, kind) => sum + BigInt(cost.get(`{tenant="${tenant}",model_name="llama-8b",kind="${kind}"}`) ?? 'NaN'),
        0n,
      );
      assert.equal(total, 240_000n + 2n + 480_000n + 180_000n, tenant);
    }
    assert.equal(cost.get('{tenant="idle",model_name="*",kind="hour"}'), '208333333');
    assert.equal(series(text, 'infermeter_pool_cost_nanos_total').get('{pool="*"}'), '208333333');
    // A reload on the primary reaches the workers: the next records carry the new version.
    writeFileSync(file, PRICES_B);
    app.reloadPrices();
    assert.equal(series(await (await fetch(app.metricsUrl!)).text(), 'infermeter_prices_info').get('{version="2026-12b",currency="USD"}'), '1');
    // The workers read the file on the primary's word; each request after that is priced at 2026-12b (one per worker, round-robin or not: several).
    const later = ['a3', 'a4', 'a5', 'a6'].map((id) => {
      const done = send(app.dataUrl, id, 'acme', 'llama-8b', usage);
      upstream.answer(id);
      return done;
    });
    await Promise.all(later);
    await app.close();
    const records = readdirSync(join(dir, 'usage'))
      .flatMap((f) => readFileSync(join(dir, 'usage', f), 'utf8').split('\n'))
      .filter((l) => l !== '')
      .map((l) => (JSON.parse(l) as { data: { cost_nanos: number | null; price_version: string | null } }).data);
    // 2026-12: 450 001 each; 2026-12b: 120 000 + 1.2 + (400 + 100) x 1.20 = 720 001.2 -> 720 001.
    assert.deepEqual(records.map((r) => `${r.price_version}:${r.cost_nanos}`).sort(), [
      ...Array(4).fill('2026-12:450001'),
      ...Array(4).fill('2026-12b:720001'),
    ]);
  });
});
