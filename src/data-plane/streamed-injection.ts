// A chat or completions body that is not held (past INFERMETER_MAX_INSPECT_BYTES, or past the
// budget for held bodies or its client's share of it: request-body.ts) goes upstream as it
// comes, read on the way whatever its size and encoding (body-reader.ts), and, once the
// upstream is known to take stream_options (usage-injection.ts's switch), with usage asked for
// at the end of its top-level object: `,"stream_options":{...}` inserted before the closing `}`,
// every byte before it as the client sent it. Python's json (pydantic reads what it gives),
// nlohmann::json and Go's encoding/json take the last of duplicate keys, so an appended member
// that merges the client's own `stream_options` wins over it (appendedUsage). Nothing is held
// but a character cut by a chunk boundary (UTF-16 and UTF-32 bodies are forwarded in whole
// characters, so that the insertion falls between two). With a Content-Length, the length is
// fixed when the head goes: the upstream is told RESERVE characters more (in the body's
// encoding, known from its first bytes by then), and what the insertion does not take of them
// is sent as white space after the object (JSON allows it there, in any encoding).
import type { BodyEncoding } from '../stream-tap/body-reader.ts';
import { createBodyReader } from '../stream-tap/body-reader.ts';
import { detectJsonEncoding } from '../stream-tap/json-encoding.ts';
import type { ScanResult } from '../stream-tap/request-body-scanner.ts';
import { appendedUsage } from './usage-injection.ts';

/** Characters a streamed body with a Content-Length is sent longer by. */
const RESERVE = 256;

export interface StreamedBodyOptions {
  /** At the object's end: whether to ask for usage now (the upstream takes the field; no answer began). */
  inject(): boolean;
  /** Usage was asked for (`scan`: the client's body read whole). */
  injected(scan: ScanResult): void;
  /** The upstream is told `reserved()` bytes more than the client's Content-Length. */
  readonly reserve: boolean;
  /** Usage asked for on every chunk too (INFERMETER_CONTINUOUS_USAGE). */
  readonly continuous?: boolean;
}

export interface StreamedBody {
  /** The bytes to forward for this chunk of the client's body (possibly none yet). */
  chunk(bytes: Buffer): Buffer[];
  /** The client's body ended: what is left to forward. */
  end(): Buffer[];
  /** What the read of the whole body found (after `end`). */
  scan(): ScanResult;
  /**
   * Bytes sent beyond the client's (0 without `reserve`): RESERVE characters of the body's
   * encoding, fixed at the first call (4 bytes each while the encoding is unknown).
   */
  reserved(): number;
}

export function createStreamedBody(options: StreamedBodyOptions): StreamedBody {
  const reader = createBodyReader();
  let encoding: BodyEncoding | undefined;
  let unit = 1;
  /** Bytes not forwarded yet: the first ones until four came (the encoding), or part of a character. */
  let pending: Buffer | undefined;
  let decided = false;
  let added = 0;
  let scanned: ScanResult | undefined;
  let reserved: number | undefined;
  const reserve = (): number => (reserved ??= options.reserve ? RESERVE * (encoding === undefined ? 4 : unit) : 0);

  /** A piece of whole characters: read, and split for the insertion when the object closed in it. */
  const forward = (piece: Buffer): Buffer[] => {
    if (piece.length === 0) return [];
    const wasDone = reader.done();
    reader.feed(piece);
    if (decided || wasDone || !reader.done()) return [piece];
    decided = true;
    if (!options.inject()) return [piece];
    const scan = reader.current();
    const inserted = insertion(scan);
    if (inserted === undefined) return [piece];
    options.injected(scan);
    added = inserted.length;
    // After the closing brace only white space can follow in this piece: the last other character is it.
    const at = lastNonSpace(piece, encoding!, unit);
    return [piece.subarray(0, at), inserted, piece.subarray(at)];
  };

  const insertion = (scan: ScanResult): Buffer | undefined => {
    for (const text of appendedUsage(scan, options.continuous === true) ?? []) {
      const bytes = encode(text, encoding!);
      if (!options.reserve || bytes.length <= reserve()) return bytes;
    }
    return undefined;
  };

  return {
    chunk(bytes) {
      let all = pending === undefined ? bytes : Buffer.concat([pending, bytes]);
      pending = undefined;
      if (encoding === undefined) {
        if (all.length < 4) {
          pending = all;
          return [];
        }
        encoding = detectJsonEncoding(all) ?? 'utf-8';
        unit = encoding.startsWith('utf-32') ? 4 : encoding.startsWith('utf-16') ? 2 : 1;
      }
      const whole = all.length - (all.length % unit);
      if (whole < all.length) {
        pending = Buffer.from(all.subarray(whole));
        all = all.subarray(0, whole);
      }
      return forward(all);
    },
    end() {
      const rest = pending ?? Buffer.alloc(0);
      pending = undefined;
      if (encoding === undefined) {
        encoding = detectJsonEncoding(rest) ?? 'utf-8';
        unit = encoding.startsWith('utf-32') ? 4 : encoding.startsWith('utf-16') ? 2 : 1;
      }
      const out = forward(rest);
      scanned = reader.end();
      if (options.reserve) out.push(encode(' '.repeat((reserve() - added) / unit), encoding));
      return out;
    },
    scan: () => scanned ?? reader.current(),
    reserved: reserve,
  };
}

/** Where the last character other than JSON white space begins in `piece`. */
function lastNonSpace(piece: Buffer, encoding: BodyEncoding, unit: number): number {
  for (let at = piece.length - unit; at >= 0; at -= unit) {
    let c: number;
    if (unit === 1) c = piece[at]!;
    else if (encoding === 'utf-16le') c = piece.readUInt16LE(at);
    else if (encoding === 'utf-16be') c = piece.readUInt16BE(at);
    else if (encoding === 'utf-32le') c = piece.readUInt32LE(at);
    else c = piece.readUInt32BE(at);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return at;
  }
  return 0;
}

/** Text in the body's encoding. */
function encode(text: string, encoding: BodyEncoding): Buffer {
  if (encoding === 'utf-8') return Buffer.from(text, 'utf8');
  if (encoding === 'utf-16le') return Buffer.from(text, 'utf16le');
  if (encoding === 'utf-16be') return Buffer.from(text, 'utf16le').swap16();
  const points = Array.from(text, (c) => c.codePointAt(0)!);
  const out = Buffer.alloc(points.length * 4);
  for (const [i, p] of points.entries()) {
    if (encoding === 'utf-32le') out.writeUInt32LE(p, i * 4);
    else out.writeUInt32BE(p, i * 4);
  }
  return out;
}
