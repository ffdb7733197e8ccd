// The usage sink's delivery loop against a local stand-in of OpenMeter's ingest API: every record
// once after de-duplication, the checkpoint committed only after an acknowledgement and resumed
// from after a restart, a refused record parked and the rest delivered, retries through a sink
// that answers 503 with a capped, jittered backoff, torn tails skipped, and retention that never
// deletes a segment the sink has not committed.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { readCheckpoint } from '../../src/ledger/checkpoint.ts';
import { httpDelivery } from '../../src/ledger/http-sink.ts';
import { backoffMs, PARKED, startSink, type SinkLoop } from '../../src/ledger/sink.ts';
import { createSpool, segmentName } from '../../src/ledger/spool.ts';
import { startOpenMeter, type OpenMeterStandIn } from '../helpers/openmeter.ts';

const record = (i: number, model = 'm') =>
  JSON.stringify({
    specversion: '1.0',
    id: `e-${i}`,
    source: 'infermeter://test',
    type: 'io.infermeter.inference.usage',
    time: new Date(Date.UTC(2026, 11, 6, 0, 0, 0, i)).toISOString(),
    data: { request_id: `r-${i}`, model, seq: i, process_start_id: 'p' },
  });

/** Sinks to close before their directory is removed (a running sink writes its checkpoint there). */
const sinksOf = new Map<string, SinkLoop[]>();

function spoolDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'infermeter-sink-'));
  sinksOf.set(dir, []);
  t.after(async () => {
    await Promise.all(sinksOf.get(dir)!.map((s) => s.close()));
    sinksOf.delete(dir);
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** A segment of `records` (its name from `n`, so segments sort in the order made), with an optional torn tail. */
function segment(dir: string, n: number, records: string[], tail = ''): string {
  const name = segmentName(Date.UTC(2026, 11, 6) + n, n);
  writeFileSync(join(dir, name), records.map((r) => `${r}\n`).join('') + tail);
  return name;
}

function counting() {
  const c = { delivered: 0, parked: 0, failed: 0, recovered: 0 };
  return {
    c,
    counters: {
      delivered: (n: number) => (c.delivered += n),
      parked: (n: number) => (c.parked += n),
      failed: () => c.failed++,
      recovered: () => c.recovered++,
    },
  };
}

function sinkTo(dir: string, om: OpenMeterStandIn, counters: ReturnType<typeof counting>['counters'], maxRecords = 10): SinkLoop {
  const sink = startSink({
    dir,
    delivery: httpDelivery({ url: om.url, timeoutMs: 5000, token: 'tok' }),
    maxRecords,
    maxBytes: 1024 * 1024,
    backoffMaxMs: 200,
    pollMs: 20,
    counters,
  });
  sinksOf.get(dir)!.push(sink);
  return sink;
}

async function until(what: string, done: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(done(), what);
}

describe('usage sink', () => {
  it('backs off doubling from 100 ms to the cap, the upper half jittered', () => {
    assert.equal(
      backoffMs(1, 30_000, () => 0),
      50,
    );
    assert.equal(
      backoffMs(1, 30_000, () => 1),
      100,
    );
    assert.equal(
      backoffMs(4, 30_000, () => 1),
      800,
    );
    assert.equal(
      backoffMs(40, 30_000, () => 1),
      30_000,
    );
    assert.equal(
      backoffMs(40, 30_000, () => 0),
      15_000,
    );
  });

  it('delivers every record once, commits after the acknowledgement, resumes from the checkpoint after a restart', async (t) => {
    const om = await startOpenMeter(t);
    const dir = spoolDir(t);
    const first = segment(
      dir,
      0,
      Array.from({ length: 25 }, (_, i) => record(i + 1)),
      '{"torn',
    );
    const second = segment(
      dir,
      1,
      Array.from({ length: 5 }, (_, i) => record(i + 26)),
    );
    const { c, counters } = counting();
    const sink = sinkTo(dir, om, counters);
    await sink.started;
    await until('30 delivered', () => c.delivered === 30);
    assert.deepEqual(
      om.events.map((e) => e.id),
      Array.from({ length: 30 }, (_, i) => `e-${i + 1}`),
      'in order, the torn tail of the finished segment skipped',
    );
    assert.equal(om.received, 30, 'none sent twice');
    assert.deepEqual([...om.authorizations], ['Bearer tok']);
    assert.deepEqual(readCheckpoint(dir), { segment: second, offset: readFileSync(join(dir, second)).length });
    // The backlog's bytes and age follow the next look at the spool, which finds nothing more.
    await until('the backlog 0', () => sink.backlog().bytes === 0 && sink.backlog().oldestSeconds === 0);
    assert.deepEqual(sink.backlog(), { records: 0, bytes: 0, oldestSeconds: 0 });
    assert.equal(sink.keep(first), false, 'a committed segment may go');
    assert.equal(sink.keep(second), true);
    await sink.close();

    // More records, then a new start: only those are sent.
    writeFileSync(join(dir, second), [26, 27, 28, 29, 30, 31, 32].map((i) => `${record(i)}\n`).join(''));
    const again = counting();
    const restarted = sinkTo(dir, om, again.counters);
    await restarted.started;
    await until('the 2 new ones delivered', () => again.c.delivered === 2);
    assert.equal(om.received, 32, 'nothing committed was sent again');
    assert.equal(restarted.backlog().records, 0, 'the backlog counted at the start (2) and delivered');
    assert.equal(om.events.length, 32);
  });

  it('reads an unreadable checkpoint as none: everything is sent again (at least once), never skipped', async (t) => {
    const om = await startOpenMeter(t);
    const dir = spoolDir(t);
    segment(dir, 0, [record(1), record(2), record(3)]);
    writeFileSync(join(dir, 'sink.checkpoint'), '{"segment":"usage-2');
    writeFileSync(join(dir, 'sink.checkpoint.tmp'), '{"segment":"zzz","offset":0}\n');
    const { c, counters } = counting();
    const sink = sinkTo(dir, om, counters);
    await sink.started;
    await until('3 delivered', () => c.delivered === 3);
    assert.deepEqual(
      om.events.map((e) => e.id),
      ['e-1', 'e-2', 'e-3'],
    );
    assert.equal(
      JSON.parse(readFileSync(join(dir, 'sink.checkpoint'), 'utf8')).offset,
      readFileSync(join(dir, readdirSync(dir).find((n) => n.startsWith('usage-'))!)).length,
    );
  });

  it('parks a refused record and delivers the rest of its batch', async (t) => {
    const om = await startOpenMeter(t);
    const dir = spoolDir(t);
    segment(dir, 0, [record(1), record(2), record(3, 'refuse-me'), record(4), record(5), 'not json', record(6)]);
    const { c, counters } = counting();
    const sink = sinkTo(dir, om, counters);
    await sink.started;
    await until('all handled', () => c.delivered + c.parked === 7);
    assert.deepEqual([c.delivered, c.parked], [5, 2]);
    assert.deepEqual(
      om.events.map((e) => e.id),
      ['e-1', 'e-2', 'e-4', 'e-5', 'e-6'],
    );
    const parked = readFileSync(join(dir, PARKED), 'utf8').trim().split('\n');
    assert.deepEqual(parked, [record(3, 'refuse-me'), 'not json']);
    assert.equal(sink.backlog().records, 0);
  });

  it('retries a sink that answers 503 (or 401) without parking, and delivers everything once it is back', async (t) => {
    const om = await startOpenMeter(t);
    om.down = 503;
    const dir = spoolDir(t);
    segment(
      dir,
      0,
      Array.from({ length: 12 }, (_, i) => record(i + 1)),
    );
    const { c, counters } = counting();
    const sink = sinkTo(dir, om, counters, 5);
    await sink.started;
    await until('retried a few times', () => (om.statuses.get(503) ?? 0) >= 3);
    om.down = 401;
    await until('a 401 too', () => (om.statuses.get(401) ?? 0) >= 2);
    assert.equal(c.failed, 1, 'logged once');
    assert.equal(c.delivered + c.parked, 0);
    assert.equal(sink.backlog().records, 12);
    assert.ok(sink.backlog().bytes > 0);
    assert.ok(sink.backlog().oldestSeconds > 0);
    assert.equal(readCheckpoint(dir).offset, 0, 'nothing committed past the first record');
    om.down = undefined;
    await until('all delivered', () => c.delivered === 12);
    assert.equal(c.recovered, 1);
    assert.equal(c.parked, 0);
    assert.equal(om.events.length, 12);
    // The backlog's bytes and age follow the next look at the spool, which finds nothing more.
    await until('the backlog 0', () => sink.backlog().bytes === 0 && sink.backlog().oldestSeconds === 0);
    assert.deepEqual(sink.backlog(), { records: 0, bytes: 0, oldestSeconds: 0 });
  });

  it('keeps every segment the sink has not committed past the retention bound while the sink is down', async (t) => {
    const om = await startOpenMeter(t);
    om.down = 503;
    const dir = spoolDir(t);
    const { c, counters } = counting();
    const sink = sinkTo(dir, om, counters, 1000);
    let spooled = 0;
    const spool = createSpool({
      dir,
      fsyncMs: 1,
      segmentBytes: 4096,
      segmentMs: 3_600_000,
      retentionBytes: 8192,
      retentionMs: 3_600_000,
      maxPendingBytes: 1024 * 1024,
      keep: sink.keep,
      counters: {
        spooled: (n) => {
          spooled += n;
          sink.spooled(n);
        },
        lost: () => assert.fail('lost'),
        failed: () => undefined,
        recovered: () => undefined,
      },
    });
    // About 10 segments of 4 KiB: more than the retention's 8 KiB.
    for (let i = 1; i <= 150; i++) {
      spool.append(`${record(i)}\n`);
      if (i % 15 === 0) await until('written', () => spooled === i);
    }
    const segments = () => readdirSync(dir).filter((n) => n.startsWith('usage-')).length;
    assert.ok(segments() >= 8, `${segments()} segments kept though past the retention bytes`);
    assert.equal(sink.backlog().records, 150);
    om.down = undefined;
    await until('all delivered', () => c.delivered === 150);
    assert.equal(om.events.length, 150);
    // The next rotation's retention pass now deletes what was delivered.
    for (let i = 151; i <= 200; i++) spool.append(`${record(i)}\n`);
    await until('written', () => spooled === 200);
    assert.ok(segments() <= 4, `${segments()} segments: the delivered ones deleted`);
    await spool.close();
  });

  it('reads INFERMETER_USAGE_SINK and its token file at start; a bad one stops the start naming the variable', (t) => {
    const dir = spoolDir(t);
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, '  s3cret\n');
    const base = { INFERMETER_UPSTREAM: 'http://127.0.0.1:8000', INFERMETER_USAGE_DIR: dir };
    const sink = (env: Record<string, string>) => loadConfig({ ...base, ...env }).usage?.sink;
    assert.equal(sink({}), undefined, 'no sink: the spool is the ledger');
    assert.deepEqual(sink({ INFERMETER_USAGE_SINK: 'https://openmeter.example/api/v1/events', INFERMETER_USAGE_SINK_TOKEN_FILE: tokenFile }), {
      kind: 'http',
      url: 'https://openmeter.example/api/v1/events',
      token: 's3cret',
      batchRecords: 500,
      timeoutMs: 10_000,
      backoffMaxMs: 30_000,
    });
    assert.deepEqual(sink({ INFERMETER_USAGE_SINK: 'nats://127.0.0.1/usage.records', INFERMETER_USAGE_SINK_BATCH: '50' }), {
      kind: 'nats',
      server: '127.0.0.1:4222',
      subject: 'usage.records',
      token: undefined,
      batchRecords: 50,
      timeoutMs: 10_000,
      backoffMaxMs: 30_000,
    });
    const refused = (env: Record<string, string>, variable: string) =>
      assert.throws(
        () => loadConfig(env),
        (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.variable === variable),
        `${JSON.stringify(env)} refused naming ${variable}`,
      );
    refused({ ...base, INFERMETER_USAGE_SINK: 'kafka://broker/usage' }, 'INFERMETER_USAGE_SINK');
    refused({ ...base, INFERMETER_USAGE_SINK: 'nats://127.0.0.1:4222/usage.*' }, 'INFERMETER_USAGE_SINK');
    refused({ ...base, INFERMETER_USAGE_SINK: 'nats://127.0.0.1:4222/' }, 'INFERMETER_USAGE_SINK');
    refused({ ...base, INFERMETER_USAGE_SINK: 'https://user:pw@openmeter.example/api/v1/events' }, 'INFERMETER_USAGE_SINK');
    refused({ INFERMETER_UPSTREAM: 'http://127.0.0.1:8000', INFERMETER_USAGE_SINK: 'http://127.0.0.1:1/api/v1/events' }, 'INFERMETER_USAGE_SINK');
    refused(
      { ...base, INFERMETER_USAGE_SINK: 'http://127.0.0.1:1/e', INFERMETER_USAGE_SINK_TOKEN_FILE: join(dir, 'missing') },
      'INFERMETER_USAGE_SINK_TOKEN_FILE',
    );
    refused({ ...base, INFERMETER_USAGE_SINK: 'http://127.0.0.1:1/e', INFERMETER_USAGE_SINK_TOKEN_FILE: dir }, 'INFERMETER_USAGE_SINK_TOKEN_FILE');
    refused({ ...base, INFERMETER_USAGE_SINK: 'http://127.0.0.1:1/e', INFERMETER_USAGE_SINK_BATCH: '0' }, 'INFERMETER_USAGE_SINK_BATCH');
  });
});
