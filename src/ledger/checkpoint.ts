// A sink's committed offset in the spool: the segment and the byte where its next unread record
// begins. Written only after the sink acknowledged what lies before it, atomically (a temporary
// file written, fsync'd, renamed over the old one, the directory fsync'd), so that a crash leaves
// the old offset or the new one, never a torn file: at worst a batch is sent again, which the
// sink de-duplicates by id.
import { readFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';

export interface Position {
  /** A segment's name; '' before the first. */
  readonly segment: string;
  readonly offset: number;
}

const CHECKPOINT = 'sink.checkpoint';
const START: Position = { segment: '', offset: 0 };

/** The committed position in `dir`, or the start when none was committed (or the file is unreadable). Read once, at start. */
export function readCheckpoint(dir: string): Position {
  try {
    const p = JSON.parse(readFileSync(join(dir, CHECKPOINT), 'utf8')) as Partial<Position>;
    return typeof p.segment === 'string' && Number.isSafeInteger(p.offset) && p.offset! >= 0 ? { segment: p.segment, offset: p.offset! } : START;
  } catch {
    return START;
  }
}

export async function writeCheckpoint(dir: string, position: Position): Promise<void> {
  const path = join(dir, CHECKPOINT);
  const temp = `${path}.tmp`;
  const file = await fsp.open(temp, 'w');
  try {
    await file.writeFile(`${JSON.stringify(position)}\n`);
    await file.sync();
  } finally {
    await file.close();
  }
  await fsp.rename(temp, path);
  // The rename itself made durable; a directory that cannot be opened (some file systems) is not fatal.
  const d = await fsp.open(dir, 'r').catch(() => undefined);
  await d?.sync().catch(() => undefined);
  await d?.close();
}
