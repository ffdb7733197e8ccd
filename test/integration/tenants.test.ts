// Per-tenant metering (INFERMETER_TENANT) over real sockets: requests, outcomes and tokens
// attributed exactly in header and api-key mode (streams with and without usage, failures,
// cancels), the request forwarded unchanged, the raw key in no output at all, the cap folding
// into `other`, the alias file mapped, reloaded and a bad one refused, and workers summing
// exactly.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { startClusterPrimary } from '../../src/cluster/primary.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/log.ts';
import { keyTenant } from '../../src/tenants/tenant-of.ts';
import { parseExposition, type Exposition } from '../helpers/exposition.ts';
import { listen } from '../helpers/listen.ts';
import { startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { nextFinished, scrape, startProxy, clusterEnv } from '../helpers/proxy-harness.ts';
import { startReplayUpstream, type ReplayUpstream } from '../helpers/replay-upstream.ts';

const token = (t: string) => `data: {"choices":[{"index":0,"delta":{"content":"${t}"}}]}\n\n`;
const USAGE = 'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\n';

/** The upstream every test uses: the body says what it gets. */
async function upstreamFor(t: TestContext): Promise<ReplayUpstream> {
  const upstream = await startReplayUpstream();
  t.after(() => upstream.close());
  upstream.respond((req) => {
    const body = req.body.toString();
    if (body.includes('"fail"')) return { status: 500, headers: { 'content-type': 'application/json' }, body: [{ data: '{"error":{"message":"boom"}}' }] };
    if (body.includes('"hold"')) return { status: 200, headers: { 'content-type': 'text/event-stream' }, body: [{ data: token('HELD') }], end: 'hang' };
    if (body.includes('"nousage"'))
      return {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
        body: [
          { afterMs: 2, data: token('a') },
          { afterMs: 2, data: `${token('b')}data: [DONE]\n\n` },
        ],
      };
    if (body.includes('"stream":true'))
      return {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
        body: [{ afterMs: 2, data: token('a') }, { afterMs: 2, data: token('b') + token('c') }, { data: `${USAGE}data: [DONE]\n\n` }],
      };
    return { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{"usage":{"prompt_tokens":5,"completion_tokens":2}}' }] };
  });
  return upstream;
}

/** One request on a connection of its own; resolves with the status and body. */
function send(url: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/chat/completions`,
      { method: 'POST', agent: false, headers: { connection: 'close', 'content-type': 'application/json', ...headers } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A streamed request the client leaves once its first token arrived: cancelled while decoding. */
function leave(url: string, headers: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v1/chat/completions`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      res.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('HELD')) {
          req.destroy();
          resolve();
        }
      });
    });
    req.on('error', (error) => {
      if (!req.destroyed) reject(error);
    });
    req.end('{"model":"m","stream":true,"hold":1}');
  });
}

const STREAM = '{"model":"m","stream":true}';
const NO_USAGE = '{"model":"m","stream":true,"nousage":1}';
const PLAIN = '{"model":"m"}';
const FAIL = '{"model":"m","fail":1}';

/** Every per-tenant figure of one tenant and model. */
function tenantFigures(m: Exposition, tenant: string, model = 'm') {
  const l = { tenant, model_name: model };
  return {
    success: m.value('infermeter_tenant_requests_total', { ...l, outcome: 'success' }),
    failed: m.value('infermeter_tenant_requests_total', { ...l, outcome: 'failed' }),
    cancelled: m.value('infermeter_tenant_requests_total', { ...l, outcome: 'cancelled' }),
    prompt: m.value('infermeter_tenant_prompt_tokens_total', l),
    generation: m.value('infermeter_tenant_generation_tokens_total', l),
    ttft: m.value('infermeter_tenant_time_to_first_token_seconds_count', l),
    e2e: m.value('infermeter_tenant_e2e_request_latency_seconds_count', l),
  };
}

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'infermeter-tenant-'));
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
  return dir;
}

// Each test has its own infermeter and upstream (one cluster in the file): side by side.
describe('per-tenant metering', { concurrency: true }, () => {
  it('header mode attributes requests, outcomes and tokens exactly, forwarding the header unchanged', async (t) => {
    const upstream = await upstreamFor(t);
    const dir = tempDir(t);
    const log = join(dir, 'access.log');
    const app = await startProxy(t, upstream.url, { INFERMETER_TENANT: 'header:X-Tenant-Id', INFERMETER_ACCESS_LOG: log });
    const a = { 'X-Tenant-Id': 'team-a' };
    const b = { 'x-tenant-id': 'team-b' };
    const long = { 'x-tenant-id': 'L'.repeat(200) };
    const finished = nextFinished(app, 8);
    await send(app.dataUrl, STREAM, a); // success, usage 7/3
    await send(app.dataUrl, PLAIN, a); // success, usage 5/2
    await send(app.dataUrl, FAIL, a); // failed
    await send(app.dataUrl, NO_USAGE, b); // success, no usage: 0/0
    await leave(app.dataUrl, b); // cancelled after one token
    await send(app.dataUrl, STREAM); // no header: none
    await send(app.dataUrl, PLAIN, { 'x-tenant-id': '  ' }); // blank: none
    await send(app.dataUrl, PLAIN, long); // sanitised like model_name: 128 characters
    await finished;
    const m = await scrape(app);
    assert.deepEqual(tenantFigures(m, 'team-a'), { success: 2, failed: 1, cancelled: 0, prompt: 12, generation: 5, ttft: 1, e2e: 2 });
    assert.deepEqual(tenantFigures(m, 'team-b'), { success: 1, failed: 0, cancelled: 1, prompt: 0, generation: 1, ttft: 2, e2e: 1 });
    assert.deepEqual(tenantFigures(m, 'none'), { success: 2, failed: 0, cancelled: 0, prompt: 12, generation: 5, ttft: 1, e2e: 2 });
    assert.deepEqual(tenantFigures(m, 'L'.repeat(128)), { success: 1, failed: 0, cancelled: 0, prompt: 5, generation: 2, ttft: undefined, e2e: 1 });
    // The tenants' figures add up to the model's.
    assert.equal(m.sum('infermeter_tenant_requests_total'), m.value('request_received_total', { model_name: 'm' }));
    assert.equal(m.sum('infermeter_tenant_prompt_tokens_total'), m.value('prompt_tokens_total', { model_name: 'm' }));
    assert.equal(m.sum('infermeter_tenant_generation_tokens_total'), m.value('generation_tokens_total', { model_name: 'm' }));
    assert.equal(m.value('infermeter_tenant_label_overflow_total'), 0);
    // team-b's stream without usage: 0 above (the spec's fallback), its 2 token events beside it;
    // no such series for a pair that had none.
    assert.equal(m.value('infermeter_tenant_streams_without_usage_total', { tenant: 'team-b', model_name: 'm' }), 1);
    assert.equal(m.value('infermeter_tenant_streams_without_usage_token_events_total', { tenant: 'team-b', model_name: 'm' }), 2);
    assert.equal(m.value('infermeter_tenant_streams_without_usage_total', { tenant: 'team-a', model_name: 'm' }), undefined);
    assert.equal(m.sum('infermeter_tenant_streams_without_usage_total'), m.value('infermeter_streams_without_usage_total', { model_name: 'm' }));
    // Forwarded as sent: name spelling and value.
    const raw = upstream.requests[0]!.rawHeaders;
    assert.equal(raw[raw.indexOf('X-Tenant-Id') + 1], 'team-a', `raw headers upstream: ${raw.join(' ')}`);
    await app.close();
    const lines = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { tenant?: string; outcome: string });
    assert.deepEqual(lines.map((l) => l.tenant).sort(), ['L'.repeat(128), 'none', 'none', 'team-a', 'team-a', 'team-a', 'team-b', 'team-b'].sort());
  });

  it('api-key mode meters the SHA-256 of the key and never shows the key anywhere', async (t) => {
    const KEYS = ['sk-live-SECRETKEY-bearer-0001', 'azure-SECRETKEY-0002', 'anthropic-SECRETKEY-0003'];
    const tenants = KEYS.map((k) => `key-${createHash('sha256').update(k).digest('hex').slice(0, 12)}`);
    const upstream = await upstreamFor(t);
    const receiver = await startOtlpReceiver();
    t.after(() => receiver.close());
    const dir = tempDir(t);
    const accessLog = join(dir, 'access.log');
    const aliases = join(dir, 'aliases.json');
    writeFileSync(aliases, JSON.stringify({ [tenants[1]!]: 'azure-team' }));
    const logs: string[] = [];
    const app = await startProxy(
      t,
      upstream.url,
      {
        INFERMETER_TENANT: 'api-key',
        INFERMETER_TENANT_ALIASES: aliases,
        INFERMETER_ACCESS_LOG: accessLog,
        INFERMETER_DIALECTS: 'mindie,otel',
        INFERMETER_LOG_LEVEL: 'debug',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_METRIC_EXPORT_INTERVAL: '60000',
      },
      { log: createLogger('debug', (l) => logs.push(l)) },
    );
    const bearer = { authorization: `Bearer ${KEYS[0]}` };
    const azure = { 'api-key': KEYS[1]! };
    const anthropic = { 'x-api-key': KEYS[2]! };
    const finished = nextFinished(app, 7);
    await send(app.dataUrl, STREAM, bearer);
    await send(app.dataUrl, FAIL, bearer);
    await leave(app.dataUrl, bearer);
    await send(app.dataUrl, PLAIN, azure);
    await send(app.dataUrl, NO_USAGE, anthropic);
    await send(app.dataUrl, PLAIN, { authorization: 'Basic Zm9vOmJhcg==' }); // no API key: none
    await send(app.dataUrl, '{"model":"m","stream":true, "bad json', bearer);
    await finished;
    // infermeter's own error answer and its log, from one in front of an upstream that resets
    // every connection. (Not a port closed after use: another test's server took such a port
    // once, and answered 404.)
    const resetting = await listen(
      t,
      createServer((socket) => socket.resetAndDestroy()),
    );
    const gone = await startProxy(t, resetting.url, { INFERMETER_TENANT: 'api-key' }, { log: createLogger('debug', (l) => logs.push(l)) });
    const own = await send(gone.dataUrl, STREAM, bearer);
    assert.equal(own.status, 502);
    const m = await scrape(app);
    assert.deepEqual(tenantFigures(m, tenants[0]!), { success: 1, failed: 1, cancelled: 1, prompt: 7, generation: 4, ttft: 2, e2e: 1 });
    assert.deepEqual(tenantFigures(m, 'azure-team'), { success: 1, failed: 0, cancelled: 0, prompt: 5, generation: 2, ttft: undefined, e2e: 1 });
    assert.deepEqual(tenantFigures(m, tenants[2]!), { success: 1, failed: 0, cancelled: 0, prompt: 0, generation: 0, ttft: 1, e2e: 1 });
    assert.equal(m.value('infermeter_tenant_requests_total', { tenant: 'none', model_name: 'm', outcome: 'success' }), 1);
    assert.equal(
      m.value('infermeter_tenant_requests_total', { tenant: tenants[0]!, model_name: 'unknown', outcome: 'success' }),
      1,
      "a body without a model is still its tenant's",
    );
    // The key still reaches the upstream exactly as sent.
    assert.equal(upstream.requests[0]!.headers.authorization, `Bearer ${KEYS[0]}`);
    assert.equal(upstream.requests[3]!.headers['api-key'], KEYS[1]);
    assert.equal(upstream.requests[4]!.headers['x-api-key'], KEYS[2]);
    // Every output, and none holds a key (or a part of one).
    const outputs: Record<string, string> = {
      metrics: m.text,
      metricsJson: await (await fetch(`${app.managementUrl}/metrics-json`)).text(),
      dashboard: await (await fetch(`${app.managementUrl}/dashboard/data`)).text(),
      answer: own.text,
      goneMetrics: (await scrape(gone)).text,
    };
    // The dashboard's tenant table: the requests finished in its window, by tenant.
    const table = (JSON.parse(outputs.dashboard!) as { tenants: Array<{ tenant: string; requests: number; failed: number }> }).tenants;
    assert.deepEqual(
      table.map((r) => [r.tenant, r.requests, r.failed]).sort(),
      [
        [tenants[0]!, 4, 1],
        ['azure-team', 1, 0],
        [tenants[2]!, 1, 0],
        ['none', 1, 0],
      ].sort(),
    );
    await app.close(); // the last OTLP export, the access log flushed
    const exported = await receiver.waitFor((e) => e.metrics.some((x) => x.points.some((p) => p.attributes['infermeter.tenant'] === 'azure-team')));
    outputs.otlp = JSON.stringify(receiver.exports);
    outputs.accessLog = readFileSync(accessLog, 'utf8');
    outputs.logs = logs.join('');
    for (const [where, text] of Object.entries(outputs)) {
      assert.ok(text.length > 0, `${where} was read`);
      assert.doesNotMatch(text, /SECRETKEY/, `no API key in ${where}`);
    }
    assert.match(outputs.accessLog, new RegExp(`"tenant":"${tenants[0]}"`));
    assert.match(outputs.metrics!, /gen_ai_client_token_usage_count\{[^}]*infermeter_tenant="azure-team"/);
    assert.ok(
      exported.metrics.some((x) => x.points.some((p) => p.attributes['infermeter.tenant'] === tenants[0])),
      'the OTLP export carries the hashed tenant',
    );
  });

  it('folds tenants past INFERMETER_MAX_TENANTS into other, counted; aliased ones and none always kept', async (t) => {
    const upstream = await upstreamFor(t);
    const aliases = join(tempDir(t), 'aliases.json');
    writeFileSync(aliases, JSON.stringify({ 'acme-raw': 'Acme' }));
    const app = await startProxy(t, upstream.url, { INFERMETER_TENANT: 'header:x-tenant-id', INFERMETER_MAX_TENANTS: '2', INFERMETER_TENANT_ALIASES: aliases });
    const finished = nextFinished(app, 7);
    for (const tenant of ['t1', 't2', 't3', 't4', 't1', 'acme-raw']) await send(app.dataUrl, PLAIN, { 'x-tenant-id': tenant });
    await send(app.dataUrl, PLAIN);
    await finished;
    const m = await scrape(app);
    const requests = (tenant: string) => m.value('infermeter_tenant_requests_total', { tenant, model_name: 'm', outcome: 'success' });
    assert.deepEqual(
      { t1: requests('t1'), t2: requests('t2'), other: requests('other'), Acme: requests('Acme'), none: requests('none'), t3: requests('t3') },
      { t1: 2, t2: 1, other: 2, Acme: 1, none: 1, t3: undefined },
    );
    assert.equal(m.value('infermeter_tenant_label_overflow_total'), 2);
    assert.equal(m.value('infermeter_tenant_prompt_tokens_total', { tenant: 'other', model_name: 'm' }), 10);
  });

  it('maps through the alias file, reloads it on SIGHUP and on change, and keeps the old mapping when it turns bad', async (t) => {
    const upstream = await upstreamFor(t);
    const aliases = join(tempDir(t), 'aliases.json');
    writeFileSync(aliases, JSON.stringify({ t1: 'Team One' }));
    const logs: string[] = [];
    const reloads: Array<() => void> = [];
    const log = createLogger('info', (l) => {
      logs.push(l);
      if (l.includes('INFERMETER_TENANT_ALIASES')) reloads.shift()?.();
    });
    const app = await startProxy(t, upstream.url, { INFERMETER_TENANT: 'header:x-tenant-id', INFERMETER_TENANT_ALIASES: aliases }, { log });
    const tenantOfNext = async (): Promise<string | undefined> => {
      const finished = nextFinished(app, 1);
      await send(app.dataUrl, PLAIN, { 'x-tenant-id': 't1' });
      return (await finished)[0]!.tenant;
    };
    assert.equal(await tenantOfNext(), 'Team One');
    writeFileSync(aliases, JSON.stringify({ t1: 'Team Uno' }));
    app.reloadTenantAliases(); // what SIGHUP calls
    assert.equal(await tenantOfNext(), 'Team Uno');
    writeFileSync(aliases, '{"t1": ');
    app.reloadTenantAliases();
    assert.match(logs.at(-1)!, /"level":"warn".*not reloaded.*not valid JSON/);
    assert.equal(await tenantOfNext(), 'Team Uno', 'a bad file keeps the mapping in use');
    // A change of the file is seen by itself (polled).
    const changed = new Promise<void>((resolve) => reloads.push(resolve));
    writeFileSync(aliases, JSON.stringify({ t1: 'Team Eins', t2: 'Team Zwei' }));
    await changed;
    assert.match(logs.at(-1)!, /"level":"info".*reloaded/);
    assert.equal(await tenantOfNext(), 'Team Eins');
    assert.doesNotMatch(logs.join(''), /Team|\bt1\b/, "the file's content is never logged");
    const m = await scrape(app);
    assert.deepEqual(
      ['Team One', 'Team Uno', 'Team Eins'].map((tenant) => m.value('infermeter_tenant_requests_total', { tenant, model_name: 'm', outcome: 'success' })),
      [1, 2, 1],
    );
  });

  it('sums exactly across workers', async (t) => {
    const upstream = await upstreamFor(t);
    // Port 0: the workers restarted below are not sent to.
    const env = clusterEnv(upstream.url, {
      INFERMETER_TENANT: 'api-key',
      INFERMETER_MAX_TENANTS: '2',
    });
    const app = await startClusterPrimary(loadConfig(env), env, { log: createLogger('warn', () => undefined), workers: 2 });
    t.after(() => app.close());
    const keys = ['k-one', 'k-two', 'k-three'];
    const jobs: Array<Promise<unknown>> = [];
    for (let i = 0; i < 18; i++) {
      const key = keys[i % 3]!;
      jobs.push(send(app.dataUrl, i % 2 === 0 ? STREAM : PLAIN, { authorization: `Bearer ${key}` }));
    }
    await Promise.all(jobs);
    // The failures after the successes: a tenant's failure before its first 2xx is `unauthenticated`'s.
    for (let i = 0; i < 3; i++) jobs.push(send(app.dataUrl, FAIL, { authorization: `Bearer ${keys[i]}` }));
    await Promise.all(jobs);
    assert.ok(new Set(upstream.requests.map((r) => r.remotePort)).size >= 2, 'the requests came through more than one worker');
    const m = parseExposition(await (await fetch(app.metricsUrl!)).text());
    const kept = m.series('infermeter_tenant_requests_total').map((s) => s.labels.tenant!);
    assert.equal(new Set(kept).size, 4, `two tenants, other and unauthenticated: ${[...new Set(kept)].join(', ')}`);
    // Each key sent 6 requests (3 streams 7/3, 3 plain 5/2) and one failure; one of them is
    // `other`, whose failure (not a 2xx, no place) is `unauthenticated`'s.
    for (const tenant of new Set(kept)) {
      if (tenant === 'unauthenticated') continue;
      const failed = tenant === 'other' ? 0 : 1;
      assert.deepEqual(tenantFigures(m, tenant), { success: 6, failed, cancelled: 0, prompt: 36, generation: 15, ttft: 3, e2e: 6 }, tenant);
    }
    assert.equal(m.value('infermeter_tenant_requests_total', { tenant: 'unauthenticated', model_name: 'm', outcome: 'failed' }), 1);
    assert.equal(m.value('infermeter_tenant_label_overflow_total'), 6);
    assert.equal(m.sum('infermeter_tenant_requests_total'), 21);

    // A worker that dies with a request in flight: the lost request is still its tenant's.
    const held = keyTenant('k-one');
    const label = kept.includes(held) ? held : 'other';
    let firstToken!: () => void;
    const sawFirstToken = new Promise<void>((resolve) => (firstToken = resolve));
    const gone = new Promise<void>((resolve) => {
      const req = request(
        `${app.dataUrl}/v1/chat/completions`,
        { method: 'POST', headers: { connection: 'close', 'content-type': 'application/json', authorization: 'Bearer k-one' } },
        (res) => {
          res.once('data', firstToken);
          res.on('error', () => undefined);
          res.on('close', resolve);
        },
      );
      req.on('error', () => resolve());
      req.end('{"model":"m","stream":true,"hold":1}');
    });
    await sawFirstToken;
    await (await fetch(app.metricsUrl!)).text(); // the primary has heard of it (a scrape flushes the workers)
    for (const pid of app.workerPids()) process.kill(pid, 'SIGKILL');
    await gone;
    await app.workersStarted(4);
    const after = parseExposition(await (await fetch(app.metricsUrl!)).text());
    assert.equal(after.value('infermeter_worker_lost_requests_total'), 1);
    const failedBefore = label === 'other' ? 0 : 1;
    assert.deepEqual(tenantFigures(after, label), { success: 6, failed: failedBefore + 1, cancelled: 0, prompt: 36, generation: 15, ttft: 4, e2e: 6 }, label);
  });
});
