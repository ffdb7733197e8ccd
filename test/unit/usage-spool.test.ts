// The spool on a file system of the test's own: records batched and written once per interval,
// synced after each write; a failed write loses its batch (counted), is reported once, and the
// next batch begins a new segment; rotation by size and age with names in begin order;
// retention by size and age that spares the open segment and what a sink still needs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSpool, SEGMENT, segmentName, type SpoolCounters, type SpoolFs } from '../../src/ledger/spool.ts';

interface MemFile {
  text: string;
  mtimeMs: number;
  synced: number;
}

/** A file system in memory; `fail` makes writes throw the given code. */
function memFs(now: () => number) {
  const files = new Map<string, MemFile>();
  const calls: string[] = [];
  const state = { fail: undefined as string | undefined };
  const fs: SpoolFs = {
    mkdir: async () => undefined,
    async open(path) {
      calls.push(`open ${path}`);
      let f = files.get(path);
      if (f === undefined) files.set(path, (f = { text: '', mtimeMs: now(), synced: 0 }));
      const file = f;
      return {
        async write(text) {
          calls.push('write');
          if (state.fail !== undefined) {
            file.text += text.slice(0, 5); // a torn write
            throw Object.assign(new Error(`${state.fail}: no space left`), { code: state.fail });
          }
          file.text += text;
          file.mtimeMs = now();
        },
        async datasync() {
          calls.push('sync');
          file.synced = file.text.length;
        },
        close: async () => void calls.push('close'),
      };
    },
    readdir: async () => [...files.keys()].map((p) => p.slice(p.lastIndexOf('/') + 1)),
    async stat(path) {
      const f = files.get(path);
      if (f === undefined) throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
      return { size: f.text.length, mtimeMs: f.mtimeMs };
    },
    unlink: async (path) => void files.delete(path),
  };
  return { fs, files, calls, state };
}

function counters() {
  const c = { spooled: 0, lost: 0, failed: [] as string[], recovered: 0, waiters: [] as Array<{ n: number; resolve: () => void }> };
  const settle = () => {
    for (const w of c.waiters.splice(0)) c.spooled + c.lost >= w.n ? w.resolve() : c.waiters.push(w);
  };
  const hooks: SpoolCounters = {
    spooled: (n) => {
      c.spooled += n;
      settle();
    },
    lost: (n) => {
      c.lost += n;
      settle();
    },
    failed: (e) => c.failed.push(e.code ?? ''),
    recovered: () => c.recovered++,
  };
  /** Resolves once `n` records were spooled or lost in all. */
  const settled = (n: number) =>
    new Promise<void>((resolve) => {
      c.waiters.push({ n, resolve });
      settle();
    });
  return { c, hooks, settled };
}

const BASE = { dir: '/spool', fsyncMs: 2, segmentBytes: 1 << 20, segmentMs: 3_600_000, retentionBytes: 1 << 30, retentionMs: 1e12, maxPendingBytes: 1 << 20 };

describe('usage spool', () => {
  it('writes a turn of records in one write, then syncs it, before counting them spooled', async () => {
    let t = Date.UTC(2026, 11, 6);
    const mem = memFs(() => t);
    const { c, hooks, settled } = counters();
    const spool = createSpool({ ...BASE, fs: mem.fs, counters: hooks, now: () => t });
    for (let i = 0; i < 100; i++) spool.append(`{"n":${i}}\n`);
    assert.equal(mem.calls.length, 0, 'nothing written on the append itself');
    assert.equal(spool.backlog().pendingRecords, 100);
    await settled(100);
    assert.deepEqual(
      mem.calls.filter((x) => x !== 'close' && !x.startsWith('open')),
      ['write', 'sync'],
    );
    assert.equal(c.spooled, 100);
    const [file] = [...mem.files.values()];
    assert.equal(file!.synced, file!.text.length, 'synced up to the last record');
    assert.equal(file!.text.split('\n').length - 1, 100);
    assert.equal(spool.backlog().pendingRecords, 0);
    t += 1;
    await spool.close();
  });

  it('loses a failed batch (counted, reported once), goes on, and begins a new segment after the failure', async () => {
    let t = Date.UTC(2026, 11, 6);
    const mem = memFs(() => t);
    const { c, hooks, settled } = counters();
    const spool = createSpool({ ...BASE, fs: mem.fs, counters: hooks, now: () => t });
    spool.append('{"a":1}\n');
    await settled(1);
    mem.state.fail = 'ENOSPC';
    for (let i = 0; i < 3; i++) spool.append('{"b":1}\n');
    await settled(4);
    spool.append('{"c":1}\n');
    await settled(5);
    assert.equal(c.lost, 4);
    assert.deepEqual(c.failed, ['ENOSPC'], 'reported once while failing');
    mem.state.fail = undefined;
    t += 5;
    spool.append('{"d":1}\n');
    await settled(6);
    assert.equal(c.spooled, 2);
    assert.equal(c.recovered, 1);
    const names = [...mem.files.keys()].sort();
    assert.ok(names.length >= 2, 'the write after a failure is in a new segment');
    assert.equal(mem.files.get(names.at(-1)!)!.text, '{"d":1}\n', 'the new segment holds whole lines only');
    await spool.close();
  });

  it('refuses records past its memory bound (counted lost), never holding more', async () => {
    const mem = memFs(() => 0);
    const { c, hooks, settled } = counters();
    const spool = createSpool({ ...BASE, maxPendingBytes: 100, fs: mem.fs, counters: hooks, now: () => Date.UTC(2026, 0, 1) });
    for (let i = 0; i < 10; i++) spool.append(`${'x'.repeat(39)}\n`); // 40 bytes each: two fit
    assert.equal(c.lost, 8);
    await settled(10);
    assert.equal(c.spooled, 2);
    // A batch written gives its bytes back: the bound is on what waits, not on all ever appended.
    spool.append(`${'x'.repeat(59)}\n`);
    spool.append(`${'x'.repeat(39)}\n`); // 100 bytes: the whole bound, all of it free again
    await settled(12);
    assert.deepEqual([c.spooled, c.lost], [4, 8], 'room again once the batch was written');
    await spool.close();
  });

  it('reports its backlog: what waits in memory, and for how long the oldest of it has', async () => {
    const t0 = Date.UTC(2026, 11, 6);
    let t = t0;
    const mem = memFs(() => t);
    const { hooks, settled } = counters();
    const spool = createSpool({ ...BASE, fsyncMs: 60_000, fs: mem.fs, counters: hooks, now: () => t });
    assert.deepEqual([spool.backlog().pendingRecords, spool.backlog().oldestPendingSeconds], [0, 0]);
    spool.append('{"a":1}\n');
    t += 250;
    assert.deepEqual([spool.backlog().pendingRecords, spool.backlog().oldestPendingSeconds], [1, 0.25]);
    t += 1250;
    spool.append('{"b":1}\n');
    t += 500;
    assert.deepEqual([spool.backlog().pendingRecords, spool.backlog().oldestPendingSeconds], [2, 2], 'the oldest waited 2 s');
    await spool.close();
    await settled(2);
    t += 10_000;
    assert.deepEqual([spool.backlog().pendingRecords, spool.backlog().oldestPendingSeconds], [0, 0], 'nothing waits: no age');
  });

  it('counts the whole lines a failed write got out spooled only once they are synced', async () => {
    for (const syncs of [true, false]) {
      const t = Date.UTC(2026, 11, 6);
      const mem = memFs(() => t);
      const { c, hooks, settled } = counters();
      const fs: SpoolFs = {
        ...mem.fs,
        async open(path) {
          const file = await mem.fs.open(path);
          return {
            ...file,
            // Two of three lines out, then the disk is full.
            write: async (text) => {
              throw Object.assign(new Error('ENOSPC'), { code: 'ENOSPC', bytesWritten: text.indexOf('\n', text.indexOf('\n') + 1) + 1 });
            },
            datasync: async () => {
              if (!syncs) throw Object.assign(new Error('EIO'), { code: 'EIO' });
            },
          };
        },
      };
      const spool = createSpool({ ...BASE, fs, counters: hooks, now: () => t });
      for (const l of ['{"a":1}\n', '{"b":1}\n', '{"c":1}\n']) spool.append(l);
      await settled(3);
      assert.deepEqual([c.spooled, c.lost], syncs ? [2, 1] : [0, 3], syncs ? 'synced: the two whole lines are spooled' : 'the sync failed: none is');
      await spool.close();
    }
  });

  it('writes nothing before its directory was made', async () => {
    const t = Date.UTC(2026, 11, 6);
    const mem = memFs(() => t);
    const { c, hooks, settled } = counters();
    let made: () => void = () => undefined;
    let dirMade = false;
    const gate = new Promise<void>((resolve) => {
      made = resolve;
    });
    const fs: SpoolFs = {
      ...mem.fs,
      mkdir: async () => {
        await gate;
        dirMade = true;
      },
      open: async (path) => {
        if (!dirMade) throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
        return mem.fs.open(path);
      },
    };
    const spool = createSpool({ ...BASE, fsyncMs: 0, fs, counters: hooks, now: () => t });
    spool.append('{"a":1}\n');
    // Its interval passes (a macrotask) with the directory still being made.
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    made();
    await settled(1);
    assert.deepEqual([c.spooled, c.lost], [1, 0]);
    await spool.close();
  });

  it('rotates by size and by age into segments whose names sort in the order they began', async () => {
    let t = Date.UTC(2026, 11, 6, 23, 59, 59, 999);
    const mem = memFs(() => t);
    const { hooks, settled } = counters();
    const spool = createSpool({ ...BASE, segmentBytes: 4096, segmentMs: 60_000, fs: mem.fs, counters: hooks, now: () => t });
    const line = `${'y'.repeat(999)}\n`;
    let n = 0;
    for (let round = 0; round < 6; round++) {
      for (let i = 0; i < 3; i++) spool.append(line);
      n += 3;
      await settled(n);
    }
    // 18 KB in batches of 3 KB under a 4 KB limit: one batch per segment.
    assert.equal(mem.files.size, 6);
    t += 60_000;
    spool.append('{"late":1}\n');
    await settled(n + 1);
    assert.equal(mem.files.size, 7, 'a segment past its age is closed at the next write');
    const names = [...mem.files.keys()].map((p) => p.slice(p.lastIndexOf('/') + 1));
    assert.ok(names.every((x) => SEGMENT.test(x)));
    assert.deepEqual([...names].sort(), names, 'name order is begin order (across midnight too)');
    assert.ok(segmentName(Date.UTC(2026, 11, 7), 0) > segmentName(Date.UTC(2026, 11, 6, 23, 59, 59, 999), 999_999));
    await spool.close();
  });

  it('deletes the oldest closed segments past the retention size or age, but never the open one nor one a sink needs', async () => {
    let t = Date.UTC(2026, 11, 6);
    const mem = memFs(() => t);
    const { hooks, settled } = counters();
    let kept: string | undefined;
    const spool = createSpool({
      ...BASE,
      segmentBytes: 1000,
      retentionBytes: 2500,
      retentionMs: 3_600_000,
      fs: mem.fs,
      counters: hooks,
      now: () => t,
      keep: (segment) => kept !== undefined && segment >= kept,
    });
    const line = `${'z'.repeat(899)}\n`;
    for (let i = 1; i <= 5; i++) {
      t += 1000;
      spool.append(line);
      await settled(i);
    }
    // 5 segments of 900 B: retention keeps at most 2500 B, the open one included.
    assert.equal(mem.files.size, 3);
    assert.ok(spool.backlog().bytes <= 2500 + 900);
    // A sink that has not committed the oldest: nothing is deleted past it, however old.
    kept = [...mem.files.keys()].map((p) => p.slice(p.lastIndexOf('/') + 1)).sort()[0];
    t += 7_200_000;
    spool.append(line);
    await settled(6);
    assert.equal(mem.files.size, 4, 'over the size and the age, but the sink still needs them');
    kept = undefined;
    t += 1000;
    spool.append(line);
    await settled(7);
    // The segments past the age go; the last closed one (1 s old, within both bounds) and the open one stay.
    assert.equal(mem.files.size, 2, 'once committed, the old ones go');
    await spool.close();
  });
});
