// The spool under the faults it promises to survive, in a child process as an operator runs it:
// `kill -9` under a load of streams (one process, and the primary of two workers), after which
// every request the client saw finish before records were seen on disk is there exactly once and
// each writer's sequence has no gap; and a spool on a file-size limit (RLIMIT_FSIZE, prlimit),
// where every client request is answered as usual and the loss is counted and logged once.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { UsageEvent } from '../../src/ledger/usage-event.ts';
import { startSimServer } from '../../src/sim/model-server.ts';
import { childEnv } from '../helpers/child-process.ts';
import { startOpenMeter } from '../helpers/openmeter.ts';

const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));

/** The CLI in a child (under `wrapper` when given), killed in teardown; resolves with its start line. */
async function startChild(
  t: TestContext,
  env: Record<string, string>,
  wrapper: string[] = [],
): Promise<{ child: ReturnType<typeof spawn>; started: Record<string, string>; stderr: () => string }> {
  const [command, ...args] = [...wrapper, process.execPath, CLI];
  const child = spawn(command!, args, {
    env: childEnv({
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_UPSTREAM_METRICS: 'off',
      ...env,
    }),
  });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stderr = '';
  const started = await new Promise<Record<string, string>>((resolve, reject) => {
    child.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString();
      const line = stderr.split('\n').find((l) => l.includes('"infermeter started"'));
      if (line !== undefined) resolve(JSON.parse(line) as Record<string, string>);
    });
    child.once('exit', () => reject(new Error(`exited before starting: ${stderr}`)));
  });
  return { child, started, stderr: () => stderr };
}

/** One streamed chat request with its own id; resolves true when the client saw its end. */
function stream(dataUrl: string, id: string, agent: http.Agent): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.request(
      `${dataUrl}/v1/chat/completions`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-request-id': id } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode === 200));
        res.on('error', () => resolve(false));
      },
    );
    req.on('error', () => resolve(false));
    // A connection the cluster was handing to a worker as it was killed is never answered: not a
    // request the client saw finish, so given up (a guard against a hang, not a measure).
    req.setTimeout(10_000, () => req.destroy());
    req.end(JSON.stringify({ model: 'sim-llama-8b', stream: true, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }));
  });
}

/** Waits (bounded) until each of `ids` has its record in a segment of `dir`; the streams go on meanwhile. */
async function onDisk(dir: string, ids: Iterable<string>): Promise<void> {
  const wanted = [...ids];
  let written = new Set<string>();
  for (let i = 0; i < 1000 && wanted.some((id) => !written.has(id)); i++) {
    await new Promise((r) => setTimeout(r, 20));
    written = new Set(readRecords(dir).events.map((e) => e.data.request_id));
  }
}

/** Every record of the spool's segments; a torn last line is counted, not parsed. */
function readRecords(dir: string): { events: UsageEvent[]; torn: number } {
  const events: UsageEvent[] = [];
  let torn = 0;
  for (const name of readdirSync(dir)
    .filter((n) => n.endsWith('.jsonl'))
    .sort()) {
    for (const line of readFileSync(join(dir, name), 'utf8').split('\n')) {
      if (line === '') continue;
      try {
        events.push(JSON.parse(line) as UsageEvent);
      } catch {
        torn++;
      }
    }
  }
  return { events, torn };
}

/** Eight kept-alive lanes streaming one request after another, each with a new id (`prefix-n`), until stopped. */
function load(t: TestContext, dataUrl: string, prefix: string): { sent: Set<string>; finished: Set<string>; stop(): Promise<void> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  t.after(() => agent.destroy());
  const sent = new Set<string>();
  const finished = new Set<string>();
  let running = true;
  let n = 0;
  const lane = async (): Promise<void> => {
    while (running && n < 100_000) {
      const id = `${prefix}-${n++}`;
      sent.add(id);
      if (await stream(dataUrl, id, agent)) finished.add(id);
    }
  };
  const lanes = Array.from({ length: 8 }, lane);
  return {
    sent,
    finished,
    stop: async () => {
      running = false;
      await Promise.all(lanes);
    },
  };
}

const prlimit = spawnSync('prlimit', ['--version']).status === 0;

// Each test has its own infermeter, upstream and folder, and waits on its child more than it
// computes: they run side by side.
describe('the usage ledger under faults', { concurrency: true }, () => {
  describe('usage spool under kill -9', () => {
    for (const workers of ['1', '2']) {
      it(`keeps every record seen on disk before the kill, once, with no gap in any writer's sequence (INFERMETER_WORKERS=${workers})`, async (t) => {
        const sim = await startSimServer({ ttftMs: 2, interTokenMs: 2, defaultTokens: 8 });
        t.after(() => sim.close());
        const dir = mkdtempSync(join(tmpdir(), 'infermeter-spool-kill-'));
        t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
        const { child, started } = await startChild(t, {
          INFERMETER_UPSTREAM: sim.url,
          INFERMETER_USAGE_DIR: dir,
          INFERMETER_USAGE_FSYNC_MS: '20',
          INFERMETER_WORKERS: workers,
        });
        const { sent, finished, stop } = load(t, started.data!, 'r');
        // A load under way: 200 streams finished, more in flight.
        while (finished.size < 200) await new Promise((r) => setTimeout(r, 10));
        const before = new Set(finished);
        await onDisk(dir, before);
        child.kill('SIGKILL');
        await once(child, 'exit');
        await stop();

        const { events } = readRecords(dir);
        const ids = events.map((e) => e.data.request_id);
        for (const id of before) assert.equal(ids.filter((x) => x === id).length, 1, `${id}: finished before the kill, one record`);
        assert.equal(new Set(ids).size, ids.length, 'no request twice');
        assert.equal(new Set(events.map((e) => e.id)).size, events.length, 'no event id twice');
        assert.ok(ids.every((id) => sent.has(id)));
        // Per writer, the records on disk are 1..k: batches are written whole and in order.
        const writers = new Map<string, number[]>();
        for (const e of events) writers.set(e.data.process_start_id, [...(writers.get(e.data.process_start_id) ?? []), e.data.seq]);
        assert.ok(writers.size >= 1 && writers.size <= Number(workers));
        for (const [writer, seqs] of writers) {
          seqs.sort((a, b) => a - b);
          assert.deepEqual(
            seqs,
            Array.from({ length: seqs.length }, (_, i) => i + 1),
            `writer ${writer}: no gap`,
          );
        }
        t.diagnostic(`${finished.size} streams finished, ${events.length} records on disk after the kill, ${before.size} required`);
      });
    }
  });

  describe('usage sink under kill -9', () => {
    for (const workers of ['1', '2']) {
      it(`after a restart, delivers every record seen on disk before the kill exactly once after de-duplication (INFERMETER_WORKERS=${workers})`, async (t) => {
        const om = await startOpenMeter(t);
        const sim = await startSimServer({ ttftMs: 2, interTokenMs: 2, defaultTokens: 8 });
        t.after(() => sim.close());
        const dir = mkdtempSync(join(tmpdir(), 'infermeter-sink-kill-'));
        t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
        const env = {
          INFERMETER_UPSTREAM: sim.url,
          INFERMETER_USAGE_DIR: dir,
          INFERMETER_USAGE_FSYNC_MS: '20',
          INFERMETER_USAGE_SINK: om.url,
          INFERMETER_USAGE_SINK_BATCH: '20',
          INFERMETER_USAGE_SINK_BACKOFF_MAX_MS: '200',
          INFERMETER_WORKERS: workers,
        };
        const { child, started } = await startChild(t, env);
        const { finished, stop } = load(t, started.data!, 'k');
        // Under load, with the sink delivering: 200 streams finished, and each of them on disk.
        while (finished.size < 200 || om.events.length === 0) await new Promise((r) => setTimeout(r, 10));
        const before = new Set(finished);
        await onDisk(dir, before);
        child.kill('SIGKILL');
        await once(child, 'exit');
        await stop();
        const atKill = om.events.length;

        // The same instance started again: it resumes from its checkpoint.
        const again = await startChild(t, env);
        const { events: spooled } = readRecords(dir);
        const backlog = async (): Promise<number> => {
          const text = await (await fetch(again.started.metrics!)).text();
          return Number(/^infermeter_usage_backlog_records (\d+)/m.exec(text)?.[1] ?? NaN);
        };
        for (let i = 0; i < 1000 && (om.events.length < spooled.length || (await backlog()) !== 0); i++) await new Promise((r) => setTimeout(r, 20));
        assert.equal(await backlog(), 0, 'the backlog back to 0');
        const delivered = om.events.map((e) => e.data.request_id);
        for (const id of before) assert.equal(delivered.filter((x) => x === id).length, 1, `${id}: finished before the kill, one record at the sink`);
        assert.deepEqual(new Set(om.events.map((e) => e.id)), new Set(spooled.map((e) => e.id)), 'the sink has what the spool has');
        again.child.kill('SIGTERM');
        await once(again.child, 'exit');
        t.diagnostic(`${before.size} required, ${atKill} at the sink at the kill, ${om.events.length} after; ${om.received} received before de-duplication`);
      });
    }
  });

  describe('usage spool when a worker is killed', () => {
    it('keeps the records that reached the primary, and its successor writes under a start id of its own (INFERMETER_WORKERS=2)', async (t) => {
      const sim = await startSimServer({ ttftMs: 2, interTokenMs: 2, defaultTokens: 8 });
      t.after(() => sim.close());
      const dir = mkdtempSync(join(tmpdir(), 'infermeter-spool-worker-'));
      t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
      const { child, started, stderr } = await startChild(t, {
        INFERMETER_UPSTREAM: sim.url,
        INFERMETER_USAGE_DIR: dir,
        INFERMETER_USAGE_FSYNC_MS: '20',
        INFERMETER_WORKERS: '2',
      });
      const agent = new http.Agent({ keepAlive: false });
      const finished: Array<{ id: string; afterRestart: boolean }> = [];
      let restarted = false;
      let running = true;
      let n = 0;
      const lane = async (): Promise<void> => {
        while (running && n < 100_000) {
          const id = `w-${n++}`;
          const sentAfterRestart = restarted;
          if (await stream(started.data!, id, agent)) finished.push({ id, afterRestart: sentAfterRestart });
        }
      };
      const lanes = Array.from({ length: 6 }, lane);
      while (finished.length < 100) await new Promise((r) => setTimeout(r, 10));
      const before = finished.map((f) => f.id);
      await onDisk(dir, before);
      const workers = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/).map(Number);
      assert.equal(workers.length, 2);
      process.kill(workers[0]!, 'SIGKILL');
      for (let i = 0; i < 1000 && !stderr().includes('worker exited; starting another'); i++) await new Promise((r) => setTimeout(r, 10));
      restarted = true;
      const count = finished.length;
      while (finished.length < count + 100) await new Promise((r) => setTimeout(r, 10));
      running = false;
      await Promise.all(lanes);
      child.kill('SIGTERM'); // drains: every finished request's record is written
      const [code] = await once(child, 'exit');
      assert.equal(code, 0);

      const { events, torn } = readRecords(dir);
      assert.equal(torn, 0);
      const ids = events.map((e) => e.data.request_id);
      for (const id of before) assert.equal(ids.filter((x) => x === id).length, 1, `${id}: on disk before the kill, there once`);
      for (const f of finished.filter((x) => x.afterRestart)) assert.equal(ids.filter((x) => x === f.id).length, 1, `${f.id}: finished after the restart`);
      assert.equal(new Set(ids).size, ids.length, 'no request twice');
      const writers = new Map<string, number[]>();
      for (const e of events) writers.set(e.data.process_start_id, [...(writers.get(e.data.process_start_id) ?? []), e.data.seq]);
      assert.ok(writers.size >= 2 && writers.size <= 3, `${writers.size} writers`);
      for (const [writer, seqs] of writers) {
        seqs.sort((a, b) => a - b);
        // The killed worker's unsent batch (at most the bus's 50 ms) is its sequence's tail, never a hole.
        assert.deepEqual(
          seqs,
          Array.from({ length: seqs.length }, (_, i) => i + 1),
          `writer ${writer}: no gap`,
        );
      }
      t.diagnostic(`${finished.length} streams finished, ${events.length} records, ${writers.size} writers`);
    });
  });

  describe('usage spool on a full disk (RLIMIT_FSIZE)', { skip: prlimit ? false : 'prlimit (util-linux) not installed' }, () => {
    it('answers every client request as usual, counts the lost records and logs the failure once', async (t) => {
      const sim = await startSimServer({ ttftMs: 0, interTokenMs: 0, defaultTokens: 4 });
      t.after(() => sim.close());
      const dir = mkdtempSync(join(tmpdir(), 'infermeter-spool-full-'));
      t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
      // Every file the process writes stops at 16 KiB: a segment fills, its next write fails (EFBIG).
      const { child, started, stderr } = await startChild(t, { INFERMETER_UPSTREAM: sim.url, INFERMETER_USAGE_DIR: dir, INFERMETER_USAGE_FSYNC_MS: '5' }, [
        'prlimit',
        '--fsize=16384',
      ]);
      const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
      t.after(() => agent.destroy());
      const total = 300;
      let ok = 0;
      for (let i = 0; i < total; i += 4) {
        const results = await Promise.all(Array.from({ length: 4 }, (_, j) => stream(started.data!, `f-${i + j}`, agent)));
        ok += results.filter(Boolean).length;
      }
      assert.equal(ok, total, 'every request answered 200 and ended');
      // Until every record was either spooled or lost (bounded wait on the counters).
      const counts = async () => {
        const text = await (await fetch(started.metrics!)).text();
        const value = (state: string) => Number(new RegExp(`^infermeter_usage_records_total\\{state="${state}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
        return { spooled: value('spooled'), lost: value('lost') };
      };
      let c = await counts();
      for (let i = 0; i < 500 && c.spooled + c.lost < total; i++) {
        await new Promise((r) => setTimeout(r, 10));
        c = await counts();
      }
      assert.equal(c.spooled + c.lost, total);
      assert.ok(c.lost > 0, 'records were lost to the limit');
      assert.ok(c.spooled > 0, 'and later writes went to new segments');
      const failures = stderr()
        .split('\n')
        .filter((l) => l.includes('writing to the spool failed'));
      assert.ok(failures.length >= 1);
      assert.match(failures[0]!, /EFBIG/);
      assert.match(failures[0]!, /INFERMETER_USAGE_DIR/);
      const { events, torn } = readRecords(dir);
      t.diagnostic(
        `torn ${torn}; ${readdirSync(dir)
          .map((n) => n)
          .join(' ')}; ${JSON.stringify(c)}`,
      );
      assert.equal(events.length, c.spooled, 'every record counted spooled is in a segment');
      child.kill('SIGTERM');
      await once(child, 'exit');
    });
  });
});
