// Reads a spool directory back: its segments in name order (the order they were begun), each
// line one record. A line that is not a usage record (a write torn by a full disk, the last line
// of a segment cut by a crash) is counted, not fatal: the rest of the ledger stays readable.
import { createReadStream } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { SEGMENT } from './spool.ts';
import type { UsageEvent } from './usage-event.ts';

export interface SpoolRead {
  readonly segments: number;
  /** Lines that were not a usage record. */
  readonly malformed: number;
}

/** Calls `each` for every record of the spool in `dir`, in the order written. */
export async function readSpool(dir: string, each: (event: UsageEvent) => void): Promise<SpoolRead> {
  const names = (await readdir(dir)).filter((n) => SEGMENT.test(n)).sort();
  let malformed = 0;
  for (const name of names) {
    const lines = createInterface({ input: createReadStream(join(dir, name)), crlfDelay: Infinity });
    for await (const line of lines) {
      if (line === '') continue;
      const event = parseRecord(line);
      if (event === undefined) malformed++;
      else each(event);
    }
  }
  return { segments: names.length, malformed };
}

function parseRecord(line: string): UsageEvent | undefined {
  try {
    const event = JSON.parse(line) as UsageEvent;
    const d = event?.data;
    return typeof event.id === 'string' && typeof event.time === 'string' && typeof d === 'object' && d !== null && typeof d.seq === 'number'
      ? event
      : undefined;
  } catch {
    return undefined;
  }
}
