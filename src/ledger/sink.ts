// Delivery, at least once: a sink reads the spool forward from its committed position
// (checkpoint.ts), sends each batch, and commits the position after the batch only once the sink
// acknowledged it; a failure is retried, the same batch from the same position, after a capped
// exponential backoff with jitter, while the spool goes on growing behind it. A restart resumes
// from the checkpoint, so a batch acknowledged but not yet committed is sent again: the sink
// de-duplicates by the record's id. Records the sink refuses for good are parked (appended to
// `parked.jsonl` beside the segments) and counted, so one bad record never blocks the rest.
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import { type Position, readCheckpoint, writeCheckpoint } from './checkpoint.ts';
import { countRecords, nextBatch, segmentNames, spoolSizes } from './spool-cursor.ts';

/** One sink's way of sending a batch. */
export interface Delivery {
  /** Sends `lines` (records); resolves with the indexes of those refused for good, or throws to have the batch sent again later. */
  send(lines: readonly string[]): Promise<number[]>;
  close(): Promise<void>;
}

interface SinkCounters {
  delivered(n: number): void;
  parked(n: number): void;
  /** Sending (or committing) failed after the last success; called once until one succeeds again. */
  failed(error: Error): void;
  recovered(): void;
}

export interface SinkOptions {
  readonly dir: string;
  readonly delivery: Delivery;
  readonly maxRecords: number;
  readonly maxBytes: number;
  readonly backoffMaxMs: number;
  readonly counters: SinkCounters;
  /** How often the spool is looked at when nothing woke the sink (a safety net: each write wakes it). */
  readonly pollMs?: number;
  readonly random?: () => number;
  readonly now?: () => number;
}

interface SinkBacklog {
  /** Records on disk the sink has not acknowledged (nor parked). */
  readonly records: number;
  /** Bytes of the spool from the committed position on. */
  readonly bytes: number;
  /** Age of the oldest record not delivered, by its `time` (0 when none waits). */
  readonly oldestSeconds: number;
}

export interface SinkLoop {
  /** The spool synced `n` more records. */
  spooled(n: number): void;
  /** Whether retention must keep `segment`: it holds records not committed yet. */
  keep(segment: string): boolean;
  backlog(): SinkBacklog;
  /** Resolves when the start (the backlog counted) is done and delivery began. */
  readonly started: Promise<void>;
  close(): Promise<void>;
}

export const PARKED = 'parked.jsonl';
const BACKOFF_BASE_MS = 100;

/** The wait before retry number `attempt` (1, 2, ...): doubling from 100 ms up to `capMs`, the upper half jittered. */
export function backoffMs(attempt: number, capMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(capMs, BACKOFF_BASE_MS * 2 ** Math.min(attempt - 1, 30));
  return ceiling / 2 + (random() * ceiling) / 2;
}

export function startSink(options: SinkOptions): SinkLoop {
  const { dir, delivery, counters } = options;
  const now = options.now ?? Date.now;
  const pollMs = options.pollMs ?? 1000;
  // Read before the spool's first write (it waits an interval): what it writes later comes through `spooled`.
  let committed: Position = readCheckpoint(dir);
  let sizes: Map<string, number>;
  try {
    sizes = spoolSizes(dir);
  } catch {
    sizes = new Map();
  }
  let records = 0;
  let bytes = 0;
  let oldestAt = 0;
  let closed = false;
  let failing = false;
  let wakeUp: (() => void) | undefined;
  let refreshing = false;
  let refreshAgain = false;

  /** A write since the loop last read the spool: an idle sink does not wait for the poll. */
  let written = false;

  const sleep = (ms: number, wakeable: boolean): Promise<void> =>
    new Promise((resolve) => {
      if (wakeable && written) return resolve();
      // A write wakes an idle sink; a backoff is only cut short by the close.
      const waker = (): void => {
        if (wakeable || closed) done();
      };
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        if (wakeUp === waker) wakeUp = undefined;
        resolve();
      }
      wakeUp = waker;
    });

  /** The backlog's bytes, from the directory as it is now (coalesced: at most one pass at a time). */
  const refresh = async (): Promise<void> => {
    if (refreshing) {
      refreshAgain = true;
      return;
    }
    refreshing = true;
    try {
      do {
        refreshAgain = false;
        const at = committed;
        let total = 0;
        for (const name of await segmentNames(dir)) {
          if (name < at.segment) continue;
          const size = (await fsp.stat(join(dir, name)).catch(() => undefined))?.size ?? 0;
          total += name === at.segment ? Math.max(0, size - at.offset) : size;
        }
        bytes = total;
      } while (refreshAgain);
    } catch {
      // An unreadable directory shows as a failed send.
    } finally {
      refreshing = false;
    }
  };

  const park = async (lines: readonly string[]): Promise<void> => {
    const file = await fsp.open(join(dir, PARKED), 'a');
    try {
      await file.writeFile(lines.map((l) => `${l}\n`).join(''));
      await file.datasync();
    } finally {
      await file.close();
    }
  };

  const recordTime = (line: string): number => {
    try {
      const t = Date.parse((JSON.parse(line) as { time?: string }).time ?? '');
      return Number.isFinite(t) ? t : now();
    } catch {
      return now();
    }
  };

  const run = async (): Promise<void> => {
    let attempt = 0;
    while (!closed) {
      try {
        written = false;
        const batch = await nextBatch(dir, committed, options.maxRecords, options.maxBytes);
        if (batch === undefined) {
          oldestAt = 0;
          await sleep(pollMs, true);
          continue;
        }
        if (batch.lines.length > 0) {
          oldestAt = recordTime(batch.lines[0]!);
          const refused = await delivery.send(batch.lines);
          if (refused.length > 0) await park(refused.map((i) => batch.lines[i]!));
          await writeCheckpoint(dir, batch.end);
          committed = batch.end;
          records -= batch.lines.length;
          counters.delivered(batch.lines.length - refused.length);
          if (refused.length > 0) counters.parked(refused.length);
        } else {
          await writeCheckpoint(dir, batch.end);
          committed = batch.end;
        }
        void refresh();
        attempt = 0;
        if (failing) {
          failing = false;
          counters.recovered();
        }
      } catch (error) {
        if (closed) break;
        if (!failing) {
          failing = true;
          counters.failed(error as Error);
        }
        await sleep(backoffMs(++attempt, options.backoffMaxMs, options.random), false);
      }
    }
  };

  let loop: Promise<void> = Promise.resolve();
  const started = (async () => {
    records += await countRecords(dir, committed, sizes).catch(() => 0);
    await refresh();
    loop = run();
  })();

  return {
    spooled(n) {
      records += n;
      written = true;
      void refresh();
      wakeUp?.();
    },
    keep: (segment) => segment >= committed.segment,
    backlog: () => ({ records, bytes, oldestSeconds: oldestAt === 0 ? 0 : Math.max(0, (now() - oldestAt) / 1000) }),
    started,
    async close() {
      closed = true;
      await started.catch(() => undefined);
      wakeUp?.();
      // Closing the delivery first ends a send in flight (it fails, and is sent again after a restart).
      await delivery.close();
      await loop;
    },
  };
}
