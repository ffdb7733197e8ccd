// Reads the spool forward from a position for a sink: the next batch of whole records (each line
// ending in LF) of one segment. A segment's tail without LF is a line a failed write tore, or
// one being written: skipped once a later segment exists (the spool never appends to a segment
// after it began the next), waited for otherwise.
import { readdirSync, statSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { join } from 'node:path';
import type { Position } from './checkpoint.ts';
import { SEGMENT } from './spool.ts';

const PIECE = 1024 * 1024;
/** The longest line read whole; past it without a LF, the bytes are skipped (no record is this long). */
const MAX_LINE = 16 * 1024 * 1024;

export interface Batch {
  /** The records' lines, without their LF. */
  readonly lines: string[];
  /** Where the record after the batch begins: the position to commit once the batch is acknowledged. */
  readonly end: Position;
}

/** The spool's segments, oldest first. */
export async function segmentNames(dir: string): Promise<string[]> {
  return (await fsp.readdir(dir)).filter((n) => SEGMENT.test(n)).sort();
}

/**
 * The next batch from `at`: up to `maxRecords` records and about `maxBytes` bytes (always at least
 * one record); no lines but a new `end` when `at` lies past a finished segment's end, or in a
 * segment that is gone; undefined when nothing follows yet.
 */
export async function nextBatch(dir: string, at: Position, maxRecords: number, maxBytes: number): Promise<Batch | undefined> {
  const names = await segmentNames(dir);
  const i = names.findIndex((n) => n >= at.segment);
  if (i === -1) return undefined;
  const name = names[i]!;
  // Its segment gone (deleted by hand): the next one from its start.
  if (name !== at.segment) return { lines: [], end: { segment: name, offset: 0 } };
  const later = names[i + 1];
  const file = await fsp.open(join(dir, name), 'r');
  let read: Buffer;
  try {
    const size = (await file.stat()).size;
    const length = Math.max(0, Math.min(size - at.offset, maxBytes));
    read = Buffer.allocUnsafe(length);
    let got = 0;
    while (got < length) {
      const { bytesRead } = await file.read(read, got, length - got, at.offset + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    read = read.subarray(0, got);
    // A record longer than maxBytes: read on to its end, up to MAX_LINE; past that, garbage skipped.
    if (read.indexOf(10) === -1 && at.offset + got < size) {
      const whole = Buffer.allocUnsafe(Math.min(size - at.offset, MAX_LINE));
      const { bytesRead } = await file.read(whole, 0, whole.length, at.offset);
      read = whole.subarray(0, bytesRead);
      if (read.indexOf(10) === -1 && at.offset + bytesRead < size) return { lines: [], end: { segment: name, offset: at.offset + bytesRead } };
    }
  } finally {
    await file.close();
  }
  const lines: string[] = [];
  let from = 0;
  for (let lf = read.indexOf(10); lf !== -1 && lines.length < maxRecords; lf = read.indexOf(10, from)) {
    if (lf > from) lines.push(read.toString('utf8', from, lf));
    from = lf + 1;
  }
  if (lines.length > 0 || from > 0) return { lines, end: { segment: name, offset: at.offset + from } };
  // No whole line from here: the segment's end (or a torn tail) once a later one began.
  return later === undefined ? undefined : { lines: [], end: { segment: later, offset: 0 } };
}

/** The spool's segments and their sizes now: what `countRecords` counts (read at start, before the spool's first write). */
export function spoolSizes(dir: string): Map<string, number> {
  const sizes = new Map<string, number>();
  for (const name of readdirSync(dir).filter((n) => SEGMENT.test(n))) sizes.set(name, statSync(join(dir, name)).size);
  return sizes;
}

/** Records (whole lines) of the segments in `sizes`, within those sizes, from `at` on; read 1 MiB at a time. */
export async function countRecords(dir: string, at: Position, sizes: ReadonlyMap<string, number>): Promise<number> {
  let records = 0;
  const piece = Buffer.allocUnsafe(PIECE);
  for (const [name, size] of sizes) {
    if (name < at.segment) continue;
    const file = await fsp.open(join(dir, name), 'r').catch(() => undefined);
    if (file === undefined) continue;
    try {
      for (let pos = name === at.segment ? at.offset : 0; pos < size; ) {
        const { bytesRead } = await file.read(piece, 0, Math.min(PIECE, size - pos), pos);
        if (bytesRead === 0) break;
        for (let lf = piece.indexOf(10); lf !== -1 && lf < bytesRead; lf = piece.indexOf(10, lf + 1)) records++;
        pos += bytesRead;
      }
    } finally {
      await file.close();
    }
  }
  return records;
}
