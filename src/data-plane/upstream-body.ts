// An upstream response's body taken from Node's HTTP parser as it parses it, instead of through
// the response's Readable (push, buffer, 'data'). Node's client parses each socket read with
// llhttp and hands every body slice to the parser's kOnBody callback, which pushes it into the
// IncomingMessage; here that callback hands the slices of a response that asked for them
// straight to its reader. The framing, the limits, the errors, the end (kOnMessageComplete, then
// the response's 'end') and the keep-alive stay Node's: only the stream between the parser and
// the relay is skipped. Back-pressure pauses the socket itself, as Node's readStop does.
// skipBodySlices goes one step further for a chunked body whose reads the caller reads itself:
// the slot is emptied (Node's parser then neither copies a slice nor calls into JavaScript for
// it), and given back at the response's end, and in any case as Node frees the parser, before
// it returns to the pool its server and client share. bodyAfterHead lets a response whose head
// and first body bytes came in one read (a fast upstream writes them together) skip the slices
// from its first byte: the body's part of that read is found after the head in it.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { createRequire } from 'node:module';

/** Told each body slice as the parser reads it, before the read's turn ends. */
export type BodySlice = (slice: Buffer) => void;

interface Parser {
  incoming: IncomingMessage | null;
  remove?: (this: Parser) => unknown;
  /** A copy of the read being parsed; empty outside the parser's execute. */
  getCurrentBuffer?: (this: Parser) => Buffer;
  [key: number]: unknown;
}

const READER = Symbol('infermeter.bodyReader');
type Read = IncomingMessage & { [READER]?: BodySlice };

const require = createRequire(import.meta.url);
// The parser's callback slots are numbered properties; Node has kept them in `_http_common` since 12.
const kOnBody: number | undefined = (() => {
  try {
    const common = require('node:_http_common') as { HTTPParser?: { kOnBody?: unknown } };
    return typeof common.HTTPParser?.kOnBody === 'number' ? common.HTTPParser.kOnBody : undefined;
  } catch {
    return undefined;
  }
})();

/** The slot's callback once taken over: a response with a reader gets its slices, any other Node's own handling. */
const taken = new WeakSet<(b: Buffer) => void>();

/**
 * Reads `response`'s body slices straight from its socket's parser; false when that cannot be
 * done (no parser, part of the body read into the stream already, a Node without the slot):
 * the caller reads its 'data' instead. Call it in the 'response' event's turn.
 */
export function readBodyFromParser(response: IncomingMessage, reader: BodySlice): boolean {
  if (kOnBody === undefined) return false;
  const socket = response.socket as (Socket & { parser?: Parser | null }) | null;
  const parser = socket?.parser;
  if (parser == null || parser.incoming !== response || response.readableLength > 0 || response.readableFlowing === true) return false;
  const current = parser[kOnBody] as ((this: Parser, b: Buffer) => void) | undefined;
  if (typeof current !== 'function') return false;
  if (!taken.has(current)) {
    const own = function (this: Parser, b: Buffer): void {
      const incoming = this.incoming as Read | null;
      const read = incoming?.[READER];
      if (read === undefined) current.call(this, b);
      else if (!incoming!.destroyed) read(b); // as a destroyed stream drops what is pushed
    };
    taken.add(own);
    parser[kOnBody] = own;
    // Node frees every parser through its remove() before it goes back to the pool that its
    // server and client share: an emptied slot (skipBodySlices) is given back there, whatever
    // ended the response.
    const remove = parser.remove;
    if (typeof remove === 'function') {
      parser.remove = function (this: Parser): unknown {
        if (this[kOnBody!] === undefined) this[kOnBody!] = own;
        return remove.call(this);
      };
    }
  }
  (response as Read)[READER] = reader;
  // The stream stays empty and flowing, so its 'end' (and with it the keep-alive) comes as before.
  response.resume();
  return true;
}

/**
 * Stops the parser handing `response`'s body slices to its reader (read with readBodyFromParser):
 * the caller reads the chunks from the socket's reads itself (chunk-decoder.ts), saving the
 * parser's copy of each slice and its call into JavaScript. Returns what gives the slot back (call
 * it when the response ends or closes; Node's freeing of the parser gives it back too), or
 * undefined when the slot is not the reader's.
 */
export function skipBodySlices(response: IncomingMessage): (() => void) | undefined {
  if (kOnBody === undefined) return undefined;
  const parser = (response.socket as (Socket & { parser?: Parser | null }) | null)?.parser;
  if (parser == null || parser.incoming !== response || (response as Read)[READER] === undefined) return undefined;
  const own = parser[kOnBody] as (b: Buffer) => void;
  if (!taken.has(own)) return undefined;
  parser[kOnBody] = undefined;
  return () => {
    // Not once the parser was freed and taken by another response (that one's, then).
    if (parser[kOnBody] === undefined && (parser.incoming === response || parser.incoming === null)) parser[kOnBody] = own;
  };
}

const CR = 0x0d;
const LF = 0x0a;
const STATUS_LINE = Buffer.from('HTTP/1.1 ', 'latin1');
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');

/**
 * The body bytes of the read Node's parser is parsing, when called in `response`'s 'response'
 * event (emitted as the parser finds the head's end, before it parses the rest of that read) and
 * that read holds the whole head of a chunked body from its first byte: a copy of what follows
 * the head in it (empty when nothing does), to be read with chunk-decoder.ts once the slices are
 * skipped. undefined otherwise (the head began in an earlier read, a 1xx came before it, a body
 * framed another way or none, or not in the head's read): the slices are read as before.
 */
export function bodyAfterHead(response: IncomingMessage): Buffer | undefined {
  const parser = (response.socket as (Socket & { parser?: Parser | null }) | null)?.parser;
  if (parser == null || parser.incoming !== response || typeof parser.getCurrentBuffer !== 'function') return undefined;
  const status = response.statusCode ?? 0;
  if (status < 200 || status === 204 || status === 304 || response.headers['content-length'] !== undefined) return undefined;
  // An answer to HEAD has no body, whatever its head says: what follows it is not this response's.
  if ((response as IncomingMessage & { req?: { method?: string } }).req?.method === 'HEAD') return undefined;
  if (!lastCodingIsChunked(response.headers['transfer-encoding'])) return undefined;
  const read = parser.getCurrentBuffer();
  const end = headEnd(read, status, response.rawHeaders.length / 2);
  return end === -1 ? undefined : read.subarray(end);
}

/**
 * bodyAfterHead, then skipBodySlices: the body's bytes in the head's read and what gives the slot
 * back, for a response read with readBodyFromParser; undefined when either declines, or when no
 * body byte came with the head (a head sent alone: its first body read goes as before, whose
 * slices say whether it is whole, and the skip follows it).
 */
export function skipFromHead(response: IncomingMessage): { body: Buffer; giveBack: () => void } | undefined {
  const body = bodyAfterHead(response);
  const giveBack = body === undefined || body.length === 0 ? undefined : skipBodySlices(response);
  return giveBack === undefined ? undefined : { body: body!, giveBack };
}

/** Whether a Transfer-Encoding value's last coding is chunked (then the body is chunked). */
function lastCodingIsChunked(value: string | undefined): boolean {
  if (value === undefined) return false;
  const last = value.slice(value.lastIndexOf(',') + 1).trim();
  return last.length === 7 && last.toLowerCase() === 'chunked';
}

/**
 * Where the head ends in `read`, when `read` begins with it: a status line with `status` and
 * `fields` header lines, every line ending in CRLF (so the first empty line is where Node's
 * parser found the end too); -1 when it is not so.
 */
function headEnd(read: Buffer, status: number, fields: number): number {
  if (read.length < 16 || read.compare(STATUS_LINE, 0, 9, 0, 9) !== 0) return -1;
  if ((read[9]! - 48) * 100 + (read[10]! - 48) * 10 + (read[11]! - 48) !== status) return -1;
  const end = read.indexOf(HEAD_END);
  if (end === -1) return -1;
  let lines = 0;
  for (let i = read.indexOf(LF); i !== -1 && i < end; i = read.indexOf(LF, i + 1)) {
    if (read[i - 1] !== CR) return -1;
    lines++;
  }
  // The status line's LF and one per field but the last, whose CRLF begins the empty line (a
  // folded field would be two lines for one).
  return lines === fields ? end + 4 : -1;
}
