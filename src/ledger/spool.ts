// The spool: usage records appended as JSON lines to segment files in INFERMETER_USAGE_DIR, off
// the data path. A record is batched in memory (bounded: past the bound it is lost, counted) and
// the batch written and fdatasync'd once per interval, so a response never waits for a disk and
// a record is on disk at most one interval (plus that write's own time) after its request
// ended. A failed write (disk full, unwritable) loses that batch, counted, logged once until a
// write succeeds again, and the next batch goes to a new segment, so that a torn line is the
// last of its file. Segments rotate by size and age; their names sort in the order they were
// begun; retention removes the oldest closed ones past a size or an age, never one a sink has
// not committed (`keep`).
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';

/** The file-system calls the spool makes; tests inject failures. */
export interface SpoolFs {
  mkdir(dir: string): Promise<void>;
  open(path: string): Promise<SpoolFile>;
  readdir(dir: string): Promise<string[]>;
  stat(path: string): Promise<{ size: number; mtimeMs: number }>;
  unlink(path: string): Promise<void>;
}

interface SpoolFile {
  /** Writes all of `text`, or throws with `bytesWritten`: how much of it was written before the failure. */
  write(text: string): Promise<void>;
  datasync(): Promise<void>;
  close(): Promise<void>;
}

const nodeSpoolFs: SpoolFs = {
  mkdir: async (dir) => void (await fsp.mkdir(dir, { recursive: true })),
  async open(path) {
    const handle = await fsp.open(path, 'a');
    return {
      async write(text) {
        // A write may be short (a file-size limit, a disk filling up): the rest is written
        // again, so that what the next write says (EFBIG, ENOSPC) is the failure reported.
        const bytes = Buffer.from(text);
        let at = 0;
        try {
          while (at < bytes.length) {
            const { bytesWritten } = await handle.write(bytes, at, bytes.length - at);
            if (bytesWritten === 0) throw Object.assign(new Error('write wrote nothing'), { code: 'EIO' });
            at += bytesWritten;
          }
        } catch (error) {
          throw Object.assign(error as Error, { bytesWritten: at });
        }
      },
      datasync: () => handle.datasync(),
      close: () => handle.close(),
    };
  },
  readdir: (dir) => fsp.readdir(dir),
  stat: (path) => fsp.stat(path),
  unlink: (path) => fsp.unlink(path),
};

export interface SpoolCounters {
  /** `n` records are on disk (written and synced). */
  spooled(n: number): void;
  /** `n` records were lost: the memory bound, or a failed write. */
  lost(n: number): void;
  /** A write failed after the last success (called once until one succeeds again). */
  failed(error: NodeJS.ErrnoException): void;
  /** A write succeeded after a failure. */
  recovered(): void;
}

export interface SpoolOptions {
  readonly dir: string;
  readonly fsyncMs: number;
  readonly segmentBytes: number;
  readonly segmentMs: number;
  readonly retentionBytes: number;
  readonly retentionMs: number;
  /** Bytes that may wait in memory for the writer; past this a record is lost (counted). */
  readonly maxPendingBytes: number;
  readonly counters: SpoolCounters;
  /** Wall-clock milliseconds (segment names and ages). */
  readonly now?: () => number;
  readonly fs?: SpoolFs;
  /** Whether a closed segment must be kept: a sink has not committed it yet. Default: none must. */
  readonly keep?: (segment: string) => boolean;
}

interface SpoolBacklog {
  /** Records waiting in memory for the writer. */
  readonly pendingRecords: number;
  /** Seconds the oldest of them has waited (0 when none). */
  readonly oldestPendingSeconds: number;
  /** The segments in the directory and their bytes (as of the last rotation or retention pass). */
  readonly segments: number;
  readonly bytes: number;
}

export interface Spool {
  append(line: string): void;
  backlog(): SpoolBacklog;
  /** Writes what waits, syncs and closes the segment. */
  close(): Promise<void>;
}

export const SEGMENT = /^usage-\d{8}T\d{9}Z-\d{6}\.jsonl$/;

/** A segment's name: its start time (UTC, to the millisecond) and a counter, so name order is begin order. */
export function segmentName(at: number, counter: number): string {
  const iso = new Date(at).toISOString(); // 2026-12-06T04:54:05.123Z
  const stamp = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}T${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}${iso.slice(20, 23)}Z`;
  return `usage-${stamp}-${String(counter % 1_000_000).padStart(6, '0')}.jsonl`;
}

/** How many whole lines (each ending in LF) the first `bytes` bytes of `text`'s UTF-8 hold. */
function wholeLines(text: string, bytes: number): number {
  const head = Buffer.from(text).subarray(0, bytes);
  let n = 0;
  for (let i = head.indexOf(10); i !== -1; i = head.indexOf(10, i + 1)) n++;
  return n;
}

export function createSpool(options: SpoolOptions): Spool {
  const fs = options.fs ?? nodeSpoolFs;
  const now = options.now ?? Date.now;
  const { counters } = options;
  let pending: string[] = [];
  let pendingBytes = 0;
  let oldestAt = 0;
  let file: SpoolFile | undefined;
  let fileName = '';
  let fileBytes = 0;
  let fileOpenedAt = 0;
  let counter = 0;
  let lastAt = 0;
  let failing = false;
  let closed = false;
  let writing: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let segments = 0;
  let dirBytes = 0;

  const openSegment = async (): Promise<void> => {
    await closeSegment();
    // Never two segments in one millisecond: the names of this process and of a later start sort in order.
    lastAt = Math.max(now(), lastAt + 1);
    const name = segmentName(lastAt, counter++);
    file = await fs.open(join(options.dir, name));
    fileName = name;
    fileBytes = 0;
    fileOpenedAt = now();
    await sweep();
  };

  const closeSegment = async (): Promise<void> => {
    const f = file;
    file = undefined;
    if (f !== undefined) await f.close().catch(() => undefined);
  };

  /** Retention: the oldest closed segments past the size or age, unless a sink still needs them. */
  const sweep = async (): Promise<void> => {
    try {
      const names = (await fs.readdir(options.dir)).filter((n) => SEGMENT.test(n)).sort();
      const stats = await Promise.all(names.map((n) => fs.stat(join(options.dir, n)).catch(() => undefined)));
      let total = stats.reduce((sum, s) => sum + (s?.size ?? 0), 0);
      let count = names.length;
      const t = now();
      for (let i = 0; i < names.length; i++) {
        const name = names[i]!;
        const stat = stats[i];
        if (name === fileName || stat === undefined) break; // never the open one, nor any after it
        if (options.keep?.(name) === true) break;
        if (total <= options.retentionBytes && t - stat.mtimeMs <= options.retentionMs) break;
        await fs.unlink(join(options.dir, name));
        total -= stat.size;
        count--;
      }
      segments = count;
      dirBytes = total;
    } catch {
      // An unreadable directory shows at the next write.
    }
  };

  // The segments a previous start left are counted (and retained) from the start; a directory
  // that fails shows at the first write.
  const ready = fs
    .mkdir(options.dir)
    .catch(() => undefined)
    .then(sweep);

  const writeBatch = async (): Promise<void> => {
    await ready;
    const lines = pending;
    const text = lines.join('');
    pending = [];
    pendingBytes = 0;
    try {
      const t = now();
      if (file === undefined || (fileBytes > 0 && (fileBytes + text.length > options.segmentBytes || t - fileOpenedAt >= options.segmentMs)))
        await openSegment();
      await file!.write(text);
      fileBytes += Buffer.byteLength(text);
      dirBytes += Buffer.byteLength(text);
      await file!.datasync();
      counters.spooled(lines.length);
      if (failing) {
        failing = false;
        counters.recovered();
      }
    } catch (error) {
      // The whole lines a failed write got out are on disk: synced, they count as spooled.
      const written = (error as { bytesWritten?: number }).bytesWritten ?? 0;
      const whole = written === 0 ? 0 : wholeLines(text, written);
      const synced =
        whole > 0 &&
        (await file?.datasync().then(
          () => true,
          () => false,
        )) === true;
      if (synced) counters.spooled(whole);
      counters.lost(lines.length - (synced ? whole : 0));
      if (!failing) {
        failing = true;
        counters.failed(error as NodeJS.ErrnoException);
      }
      // What the failed write left may end in a torn line: the next batch begins a new segment.
      await closeSegment();
    }
  };

  const cycle = (): void => {
    timer = undefined;
    if (writing !== undefined || pending.length === 0) return;
    writing = writeBatch().finally(() => {
      writing = undefined;
      // What came meanwhile is due one interval after the oldest of it arrived.
      if (pending.length > 0) schedule(Math.max(0, oldestAt + options.fsyncMs - now()));
    });
  };

  const schedule = (delay: number): void => {
    if (timer !== undefined || closed) return;
    timer = setTimeout(cycle, delay);
    timer.unref();
  };

  return {
    append(line) {
      if (closed || pendingBytes + line.length > options.maxPendingBytes) {
        counters.lost(1);
        return;
      }
      if (pending.length === 0) oldestAt = now();
      pending.push(line);
      pendingBytes += line.length;
      // A write in progress schedules the next when it ends.
      if (writing === undefined) schedule(options.fsyncMs);
    },
    backlog: () => ({
      pendingRecords: pending.length,
      oldestPendingSeconds: pending.length === 0 ? 0 : Math.max(0, (now() - oldestAt) / 1000),
      segments,
      bytes: dirBytes,
    }),
    async close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      await writing;
      if (pending.length > 0) await writeBatch();
      await closeSegment();
    },
  };
}
