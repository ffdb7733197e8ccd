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
// it returns to the pool its server and client share.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { createRequire } from 'node:module';

/** Told each body slice as the parser reads it, before the read's turn ends. */
export type BodySlice = (slice: Buffer) => void;

interface Parser {
  incoming: IncomingMessage | null;
  remove?: (this: Parser) => unknown;
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
