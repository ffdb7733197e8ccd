// The usage ledger's sinks end to end, infermeter in process before a simulated engine: with an
// HTTP sink (a stand-in of OpenMeter's ingest API) in a run without faults, the delivered
// records' token sums per (tenant, model) equal /metrics' token counters exactly; with the sink
// answering 503 for a while under load, and with a real NATS JetStream server stopped and started
// again under load, every request has exactly one record at the sink after de-duplication by id,
// the backlog returns to 0 and nothing is lost.
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { startInfermeter } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { streamName } from '../../src/ledger/nats-sink.ts';
import type { UsageEvent } from '../../src/ledger/usage-event.ts';
import { silentLogger } from '../../src/log.ts';
import { startSimServer } from '../../src/sim/model-server.ts';
import { startNatsServer, skipWithoutNats } from '../helpers/nats-server.ts';
import { startOpenMeter } from '../helpers/openmeter.ts';

const TENANTS = ['t1', 't2'];
const MODELS = ['m1', 'm2'];

async function start(t: TestContext, sink: string, env: Record<string, string> = {}) {
  const sim = await startSimServer({ models: MODELS, ttftMs: 1, interTokenMs: 1, defaultTokens: 4 });
  t.after(() => sim.close());
  const dir = mkdtempSync(join(tmpdir(), 'infermeter-sinks-'));
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
  const app = await startInfermeter(
    loadConfig({
      INFERMETER_UPSTREAM: sim.url,
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_UPSTREAM_METRICS: 'off',
      INFERMETER_TENANT: 'header:x-tenant',
      INFERMETER_USAGE_DIR: dir,
      INFERMETER_USAGE_FSYNC_MS: '10',
      INFERMETER_USAGE_SINK: sink,
      INFERMETER_USAGE_SINK_BATCH: '50',
      INFERMETER_USAGE_SINK_BACKOFF_MAX_MS: '200',
      ...env,
    }),
    { log: silentLogger },
  );
  t.after(() => app.close());
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  t.after(() => agent.destroy());
  const scrape = async (): Promise<string> => (await fetch(app.metricsUrl!)).text();
  const value = (exposition: string, series: string): number => {
    const line = exposition.split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? Number.NaN : Number(line.slice(series.length + 1));
  };
  /** One request (streamed or not, by its number), its id the client's X-Request-Id; resolves when answered. */
  const send = (i: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const stream = i % 3 !== 0;
      const req = http.request(
        `${app.dataUrl}/v1/chat/completions`,
        {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'x-request-id': `r-${i}`, 'x-tenant': TENANTS[i % 2]! },
        },
        (res) => {
          res.resume();
          res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
        },
      );
      req.on('error', reject);
      req.end(
        JSON.stringify({
          model: MODELS[Math.floor(i / 2) % 2],
          stream,
          max_tokens: 1 + (i % 7),
          messages: [{ role: 'user', content: 'x'.repeat(4 * (i % 11)) }],
        }),
      );
    });
  /** Requests from `from` on, 8 at a time, while `more()` says so (bounded); resolves with the count sent. */
  const load = async (from: number, more: (sent: number) => boolean): Promise<number> => {
    let next = from;
    const lane = async (): Promise<void> => {
      while (next - from < 20_000 && more(next - from)) await send(next++);
    };
    await Promise.all(Array.from({ length: 8 }, lane));
    return next - from;
  };
  /** Scrapes (bounded) until `done` holds of the exposition; returns it. */
  const until = async (what: string, done: (exposition: string) => boolean): Promise<string> => {
    let text = await scrape();
    for (let i = 0; i < 3000 && !done(text); i++) {
      await new Promise((r) => setTimeout(r, 20));
      text = await scrape();
    }
    assert.ok(
      done(text),
      `${what}:\n${text
        .split('\n')
        .filter((l) => l.startsWith('infermeter_usage'))
        .join('\n')}`,
    );
    return text;
  };
  const records = (e: string, state: string) => value(e, `infermeter_usage_records_total{state="${state}"}`);
  /** Scrapes until all `n` records are delivered and the backlog is 0; returns that exposition. */
  const delivered = (n: number): Promise<string> =>
    until(
      'all delivered, backlog 0',
      (x) =>
        records(x, 'delivered') === n &&
        value(x, 'infermeter_usage_backlog_records') === 0 &&
        value(x, 'infermeter_usage_backlog_bytes') === 0 &&
        value(x, 'infermeter_usage_backlog_oldest_seconds') === 0,
    );
  return { app, dir, scrape, value, load, until, records, delivered };
}

/** Each request r-0 .. r-(n-1) has exactly one record among `events` (after de-duplication by id), and no other is there. */
function exactlyOnce(events: readonly UsageEvent[], n: number): void {
  const byId = new Map(events.map((e) => [e.id, e]));
  const requests = [...byId.values()].map((e) => e.data.request_id).sort();
  assert.equal(requests.length, n, 'one record per request after de-duplication by id');
  assert.equal(new Set(requests).size, n, 'no request twice');
  for (let i = 0; i < n; i++) assert.ok(requests.includes(`r-${i}`), `r-${i} delivered`);
}

// Each test has its own infermeter, engine, folder and sink: side by side.
describe('usage sinks', { concurrency: true }, () => {
  it("HTTP (OpenMeter's ingest API), no faults: the delivered records' token sums per tenant and model equal the token counters", async (t) => {
    const om = await startOpenMeter(t);
    const { load, records, value, delivered } = await start(t, om.url);
    const n = await load(0, (sent) => sent < 240);
    const e = await delivered(n);
    assert.equal(records(e, 'spooled'), n);
    assert.equal(records(e, 'lost'), 0);
    assert.equal(records(e, 'parked'), 0);
    assert.equal(value(e, 'infermeter_usage_backlog_bytes'), 0);
    assert.equal(value(e, 'infermeter_usage_backlog_oldest_seconds'), 0);
    exactlyOnce(om.events, n);
    assert.equal(om.received, n, 'nothing sent twice without a fault');
    for (const tenant of TENANTS)
      for (const model of MODELS) {
        const mine = om.events.filter((ev) => ev.data.tenant === tenant && ev.data.model === model);
        assert.ok(mine.length > 0, `${tenant} ${model} has records`);
        const sum = (k: 'prompt_tokens' | 'completion_tokens') => mine.reduce((s, ev) => s + (ev.data[k] ?? 0), 0);
        assert.equal(
          sum('prompt_tokens'),
          value(e, `infermeter_tenant_prompt_tokens_total{tenant="${tenant}",model_name="${model}"}`),
          `${tenant} ${model} prompt`,
        );
        assert.equal(
          sum('completion_tokens'),
          value(e, `infermeter_tenant_generation_tokens_total{tenant="${tenant}",model_name="${model}"}`),
          `${tenant} ${model} completion`,
        );
      }
  });

  it('HTTP answering 503 for a while under load: afterwards every record arrives once after de-duplication, the backlog back to 0, none lost', async (t) => {
    const om = await startOpenMeter(t);
    const { load, until, records, value, scrape, delivered } = await start(t, om.url);
    let phase: 'up' | 'down' | 'back' = 'up';
    let spooledWhileDown = 0;
    let downAt = 0;
    const loaded = load(0, (sent) => phase !== 'back' || sent < downAt + 300);
    await until('some delivered', (x) => records(x, 'delivered') >= 50);
    om.down = 503;
    phase = 'down';
    const before = records(await scrape(), 'spooled');
    const down = await until('200 more spooled while the sink is down', (x) => records(x, 'spooled') >= before + 200);
    spooledWhileDown = records(down, 'spooled') - before;
    assert.ok(value(down, 'infermeter_usage_backlog_records') >= 150, 'a backlog grew');
    assert.ok(value(down, 'infermeter_usage_backlog_bytes') > 0);
    assert.ok((om.statuses.get(503) ?? 0) > 0);
    downAt = records(down, 'spooled');
    om.down = undefined;
    phase = 'back';
    const n = await loaded;
    const e = await delivered(n);
    assert.ok(spooledWhileDown >= 200);
    assert.equal(records(e, 'spooled'), n);
    assert.equal(records(e, 'lost'), 0);
    assert.equal(records(e, 'parked'), 0);
    assert.equal(value(e, 'infermeter_usage_backlog_bytes'), 0);
    exactlyOnce(om.events, n);
  });

  it('NATS JetStream stopped and started again under load: every record in the stream once after de-duplication, the backlog back to 0, none lost', {
    skip: skipWithoutNats(),
  }, async (t) => {
    const nats = await startNatsServer(t);
    const subject = 'usage.records';
    // A publish the stopped server never acknowledges fails after 1 s, and is sent again.
    const { load, until, records, value, scrape, delivered } = await start(t, `${nats.url}/${subject}`, { INFERMETER_USAGE_SINK_TIMEOUT_MS: '1000' });
    let stopped = false;
    let back = false;
    let sentAtBack = 0;
    const loaded = load(0, (sent) => {
      if (back && sentAtBack === 0) sentAtBack = sent;
      return !back || sent < sentAtBack + 200;
    });
    await until('some delivered', (x) => records(x, 'delivered') >= 50);
    await nats.stop();
    stopped = true;
    const before = records(await scrape(), 'spooled');
    const down = await until('200 more spooled while NATS is down', (x) => records(x, 'spooled') >= before + 200);
    assert.ok(value(down, 'infermeter_usage_backlog_records') > 0, 'a backlog grew');
    await nats.start();
    back = true;
    const n = await loaded;
    const e = await delivered(n);
    assert.ok(stopped);
    assert.equal(records(e, 'spooled'), n);
    assert.equal(records(e, 'lost'), 0);
    assert.equal(value(e, 'infermeter_usage_backlog_bytes'), 0);

    // What the stream holds, read back with the official client.
    const nc = await connect({ servers: nats.url });
    t.after(() => nc.close());
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(streamName(subject));
    assert.deepEqual(info.config.subjects, [subject]);
    assert.deepEqual(
      [info.config.duplicate_window, info.config.storage, info.config.num_replicas, info.config.retention],
      [3_600_000_000_000, 'file', 1, 'limits'],
      'the stream infermeter made: a one-hour duplicate window, file storage, one replica, limits retention',
    );
    const consumer = await jetstream(nc).consumers.get(streamName(subject));
    const events: UsageEvent[] = [];
    const messages = await consumer.fetch({ max_messages: info.state.messages, expires: 5000 });
    for await (const m of messages) {
      events.push(m.json<UsageEvent>());
      if (events.length === info.state.messages) break;
    }
    assert.equal(events.length, info.state.messages);
    exactlyOnce(events, n);
    assert.equal(info.state.messages, n, "the stream's duplicate window dropped every re-delivery (Nats-Msg-Id)");
  });
});
