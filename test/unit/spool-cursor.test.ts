// The sink's reading of the spool (src/ledger/spool-cursor.ts): a batch holds at most its
// bytes (one record at least, however long), from the position on; records are counted within
// the sizes read at start, not what was appended since; every file it opens is closed.
import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { countRecords, nextBatch, spoolSizes } from '../../src/ledger/spool-cursor.ts';
import { segmentName } from '../../src/ledger/spool.ts';

function spoolDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'spool-cursor-'));
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
  return dir;
}

const record = (i: number): string => `{"n":${String(i).padStart(4, '0')}}\n`; // 11 bytes

describe('the spool cursor', () => {
  it('reads a batch of at most its bytes, record by whole record, from the position on', async (t) => {
    const dir = spoolDir(t);
    const name = segmentName(Date.UTC(2026, 11, 6), 0);
    writeFileSync(join(dir, name), Array.from({ length: 20 }, (_, i) => record(i)).join(''));
    // 40 bytes: three 11-byte records, not the fourth it began to read.
    const first = await nextBatch(dir, { segment: name, offset: 0 }, 1000, 40);
    assert.deepEqual(
      first?.lines,
      [0, 1, 2].map((i) => record(i).trimEnd()),
    );
    assert.deepEqual(first?.end, { segment: name, offset: 33 });
    const second = await nextBatch(dir, first!.end, 2, 1 << 20);
    assert.deepEqual(
      second?.lines,
      [3, 4].map((i) => record(i).trimEnd()),
      'at most its records',
    );
    assert.deepEqual(second?.end, { segment: name, offset: 55 });
  });

  it('reads a record longer than its bytes whole', async (t) => {
    const dir = spoolDir(t);
    const name = segmentName(Date.UTC(2026, 11, 6), 0);
    const long = `{"x":"${'y'.repeat(100)}"}\n`;
    writeFileSync(join(dir, name), long + record(1));
    const batch = await nextBatch(dir, { segment: name, offset: 0 }, 1000, 40);
    assert.equal(batch?.lines[0], long.trimEnd());
  });

  it('counts the records within the sizes read at start, not those appended since', async (t) => {
    const dir = spoolDir(t);
    const a = segmentName(Date.UTC(2026, 11, 6), 0);
    const b = segmentName(Date.UTC(2026, 11, 6), 1);
    writeFileSync(join(dir, a), record(0) + record(1) + record(2));
    writeFileSync(join(dir, b), record(3));
    const sizes = spoolSizes(dir);
    appendFileSync(join(dir, b), record(4) + record(5));
    assert.equal(await countRecords(dir, { segment: a, offset: 11 }, sizes), 3, 'two of a from the position, one of b');
  });

  it('closes every file it opens', { skip: process.platform !== 'linux' && 'reads /proc/self/fd' }, async (t) => {
    const dir = spoolDir(t);
    const name = segmentName(Date.UTC(2026, 11, 6), 0);
    writeFileSync(join(dir, name), record(0) + record(1));
    const open = () => readdirSync('/proc/self/fd').length;
    const before = open();
    for (let i = 0; i < 50; i++) {
      await nextBatch(dir, { segment: name, offset: 0 }, 1000, 1 << 20);
      await countRecords(dir, { segment: name, offset: 0 }, spoolSizes(dir));
    }
    // A FileHandle left open stays open until it is collected: 100 of them would show.
    assert.ok(open() - before < 10, `${open() - before} more descriptors open after 100 reads`);
  });
});
