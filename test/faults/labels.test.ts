// model_name comes from clients: the number of distinct values is capped, later ones fold into
// "other" (counted), the upstream's listed models always get their own, and values are made safe.
import assert from 'node:assert/strict';
import http, { type ServerResponse } from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import { startClusterPrimary, type ClusterInfermeter } from '../../src/cluster/primary.ts';
import { loadConfig } from '../../src/config/config.ts';
import { silentLogger } from '../../src/log.ts';
import { createLabelGuard, sanitizeLabel } from '../../src/metrics/exposition/label-guard.ts';
import { parseExposition, type Exposition } from '../helpers/exposition.ts';
import { listen } from '../helpers/listen.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';

const token = (t: string) => `data: {"choices":[{"index":0,"delta":{"content":"${t}"}}]}\n\n`;

/**
 * An upstream that answers every request with usage at once, except the one whose body names
 * the model "bystander": a stream whose first token is sent and whose end waits for release().
 */
async function upstreamWithBystander(t: TestContext): Promise<{ url: string; bystanderStarted: Promise<void>; release(): void }> {
  let held: ServerResponse | undefined;
  let started!: () => void;
  const bystanderStarted = new Promise<void>((resolve) => (started = resolve));
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (body.includes('"bystander"')) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(token('a'));
        held = res;
        started();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"usage":{"prompt_tokens":1,"completion_tokens":1}}');
    });
  });
  return {
    url: (await listen(t, server)).url,
    bystanderStarted,
    release: () => held!.end(`${token('b')}data: [DONE]\n\n`),
  };
}

/** infermeter with two workers on free ports in front of `upstream`, closed when the test ends. */
async function startWorkers(t: TestContext, upstream: string, extra: Record<string, string> = {}): Promise<ClusterInfermeter> {
  const env = {
    PATH: process.env.PATH ?? '',
    INFERMETER_UPSTREAM: upstream,
    INFERMETER_PORT: '0',
    INFERMETER_MANAGEMENT_PORT: '0',
    INFERMETER_METRICS_PORT: '0',
    INFERMETER_UPSTREAM_METRICS: 'off',
    INFERMETER_LOG_LEVEL: 'warn',
    ...extra,
  };
  const app = await startClusterPrimary(loadConfig(env), env, { log: silentLogger, workers: 2 });
  t.after(() => app.close());
  return app;
}

/** The bystander's stream: resolves with all it received once it ended, rejects if it was cut. */
function bystander(dataUrl: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${dataUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve(text));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end('{"model":"bystander","stream":true,"stream_options":{"include_usage":false}}');
  });
}

/** Posts raw body bytes to /v1/completions over `agent`; resolves when the answer has ended. */
function post(dataUrl: string, agent: http.Agent, body: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${dataUrl}/v1/completions`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Bodies naming one model in ways that differ only where UTF-8 cannot tell them apart. */
const ILL_FORMED_NAMES: readonly Buffer[] = [
  Buffer.from('{"model":"m-\\ud800"}'), // a lone high surrogate, escaped
  Buffer.from('{"model":"m-\\udfff"}'), // a lone low surrogate
  Buffer.from('{"model":"m-\\ufffd"}'), // U+FFFD, escaped
  Buffer.from('{"model":"m-\uFFFD"}'), // U+FFFD as UTF-8
  Buffer.concat([Buffer.from('{"model":"m-'), Buffer.from([0xff]), Buffer.from('"}')]), // a byte that is not UTF-8
];

function assertOneSeries(m: Exposition, n: number): void {
  assert.deepEqual(m.duplicates(), [], 'no series twice on /metrics');
  const series = m.series('request_received_total').filter((s) => s.labels.model_name!.startsWith('m-'));
  assert.deepEqual(series, [{ labels: { model_name: 'm-\uFFFD' }, value: n }], JSON.stringify(series));
}

describe('bounded labels', () => {
  it('keeps at most INFERMETER_MAX_MODELS distinct models; the rest count under "other"', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) =>
      req.url === '/v1/models'
        ? { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{"data":[{"id":"served-model"}]}' }] }
        : { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{}' }] },
    );
    const app = await startProxy(t, upstream.url, { INFERMETER_MAX_MODELS: '5' });
    const send = async (model: string) => (await fetch(`${app.dataUrl}/v1/completions`, { method: 'POST', body: JSON.stringify({ model }) })).arrayBuffer();
    let finished = nextFinished(app, 12);
    for (let i = 0; i < 12; i++) await send(`attacker-${i}`);
    await finished;
    // The cap made infermeter ask the upstream which models it serves.
    await app.metrics.modelsListed();
    assert.equal(upstream.requests.filter((r) => r.url === '/v1/models').length, 1, 'asked once');
    finished = nextFinished(app, 2);
    await send('served-model');
    await send('attacker-99');
    await finished;
    const m = await scrape(app);
    const models = m
      .series('request_received_total')
      .map((s) => s.labels.model_name)
      .sort();
    assert.deepEqual(models, ['attacker-0', 'attacker-1', 'attacker-2', 'attacker-3', 'attacker-4', 'other', 'served-model']);
    assert.equal(m.value('request_received_total', { model_name: 'other' }), 8);
    assert.equal(m.value('infermeter_model_label_overflow_total'), 8);
    assert.equal(m.value('infermeter_model_labels'), 8, '5 kept, the listed one, unknown and other');
  });

  it('counts model names that differ only in lone surrogates or U+FFFD as one series, with a bystander stream in flight', async (t) => {
    const upstream = await upstreamWithBystander(t);
    const app = await startProxy(t, upstream.url);
    const stream = bystander(app.dataUrl);
    await upstream.bystanderStarted;
    const agent = new http.Agent({ keepAlive: true });
    t.after(() => agent.destroy());
    const finished = nextFinished(app, ILL_FORMED_NAMES.length);
    for (const body of ILL_FORMED_NAMES) assert.equal(await post(app.dataUrl, agent, body), 200);
    await finished;
    assertOneSeries(await scrape(app), ILL_FORMED_NAMES.length);
    upstream.release();
    assert.equal(await stream, `${token('a')}${token('b')}data: [DONE]\n\n`, 'the bystander stream finished whole');
  });

  it("with workers, hundreds of distinct names keep the primary's tables at the label cap; a bystander stream completes", async (t) => {
    const upstream = await upstreamWithBystander(t);
    const app = await startWorkers(t, upstream.url, { INFERMETER_MAX_MODELS: '5' });
    const stream = bystander(app.dataUrl);
    await upstream.bystanderStarted;
    // Long names, each new: what made the primary's table grow by one entry per name.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    t.after(() => agent.destroy());
    // 100 times the cap, in rounds of 8: a table that grew by a name per request would hold them all.
    const names = 512;
    const pad = 'n'.repeat(400);
    for (let i = 0; i < names; i += 8) {
      await Promise.all(Array.from({ length: 8 }, (_, j) => post(app.dataUrl, agent, Buffer.from(JSON.stringify({ model: `${pad}-${i + j}` })))));
    }
    const m = parseExposition(await (await fetch(app.metricsUrl!)).text());
    const models = m.series('request_received_total').map((s) => s.labels.model_name);
    assert.ok(models.length <= 5 + 2, `at most the cap, unknown and other: ${models.length}`);
    assert.equal(m.sum('request_received_total'), names + 1, 'every request counted');
    assert.ok(app.trackedModels() <= 5 + 2, `the primary's in-flight tables hold ${app.trackedModels()} entries for ${names} names`);
    assert.deepEqual(m.duplicates(), [], 'no series twice on /metrics');

    upstream.release();
    assert.equal(await stream, `${token('a')}${token('b')}data: [DONE]\n\n`, 'the bystander stream finished whole');
    const after = parseExposition(await (await fetch(app.metricsUrl!)).text());
    assert.equal(after.sum('num_requests_running'), 0, 'nothing left running');
    assert.equal(after.sum('num_requests_waiting'), 0, 'nothing left waiting');
  });

  it('with workers, names differing only where UTF-8 cannot tell them apart are one series', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const app = await startWorkers(t, upstream.url);
    const agent = new http.Agent({ keepAlive: false });
    for (const body of ILL_FORMED_NAMES) assert.equal(await post(app.dataUrl, agent, body), 200);
    assertOneSeries(parseExposition(await (await fetch(app.metricsUrl!)).text()), ILL_FORMED_NAMES.length);
  });

  it('makes values safe: well-formed, control characters replaced, length capped', () => {
    assert.equal(sanitizeLabel('m-\ud800'), 'm-\ufffd');
    assert.equal(sanitizeLabel('\udfffm\ud800'), '\ufffdm\ufffd');
    assert.equal(sanitizeLabel('m-\ud83d\ude80'), 'm-\u{1F680}', 'a pair is kept');
    assert.equal(sanitizeLabel(`${'x'.repeat(127)}\ud800`), `${'x'.repeat(127)}\ufffd`);
    assert.equal(sanitizeLabel('a\nb\u0000c\u007f'), 'a_b_c_');
    assert.equal(sanitizeLabel('x'.repeat(500)).length, 128);
    assert.equal(sanitizeLabel(`${'x'.repeat(127)}\u{1F680}`).length, 127, 'no half surrogate pair');
    const guard = createLabelGuard(1, () => {});
    assert.equal(guard.model('a'), 'a');
    assert.equal(guard.model('b'), 'other');
    assert.equal(guard.model('a'), 'a', 'the same answer every time');
    assert.equal(guard.model('unknown'), 'unknown', 'reserved values are always kept');
    assert.equal(guard.model('a\ud800'), 'other', 'a new name, once well-formed');
    const two = createLabelGuard(1, () => {});
    assert.equal(two.model('b\udc00'), 'b\ufffd');
    assert.equal(two.model('b\ufffd'), 'b\ufffd', 'the same label, not another one');
    assert.equal(two.distinct, 3);
  });
});
