// A JSON request body read as the engines read its bytes, whatever their size and encoding, in
// constant memory: Python's json.loads takes UTF-16 and UTF-32 (json.detect_encoding, by the
// first four bytes), so such a body is decoded to UTF-8 chunk by chunk on its way to the scanner
// (request-body-scanner.ts), as leniently as Python's 'surrogatepass' (a lone surrogate reads as
// U+FFFD, the structure unchanged). A UTF-8 body goes to the scanner as it comes. Only reading:
// the bytes forwarded are the client's.
import { detectJsonEncoding, type WideEncoding } from './json-encoding.ts';
import { createBodyScanner, type ScanResult } from './request-body-scanner.ts';

export type BodyEncoding = 'utf-8' | WideEncoding;

export interface BodyReader {
  feed(chunk: Buffer): void;
  /** The top-level object has closed (as the scanner's done). */
  done(): boolean;
  /** The body's encoding, once its first four bytes (or all of a shorter body) were seen. */
  encoding(): BodyEncoding | undefined;
  /** What the bytes so far say (the whole body's once it closed), without ending the read. */
  current(): ScanResult;
  end(): ScanResult;
}

export function createBodyReader(): BodyReader {
  const scanner = createBodyScanner();
  let encoding: BodyEncoding | undefined;
  let first: Buffer | undefined; // the first bytes, until there are four
  let decode: ((chunk: Buffer, last: boolean) => Buffer) | undefined;
  const decided = (bytes: Buffer, last: boolean): void => {
    const wide = detectJsonEncoding(bytes);
    encoding = wide ?? 'utf-8';
    if (wide === 'utf-16le' || wide === 'utf-16be') decode = utf16(wide);
    else if (wide !== undefined) decode = utf32(wide === 'utf-32le');
    pass(bytes, last);
  };
  const pass = (bytes: Buffer, last: boolean): void => {
    const utf8 = decode === undefined ? bytes : decode(bytes, last);
    if (utf8.length > 0) scanner.feed(utf8);
  };
  return {
    feed(chunk) {
      if (encoding !== undefined) {
        pass(chunk, false);
        return;
      }
      first = first === undefined ? chunk : Buffer.concat([first, chunk]);
      if (first.length < 4) return;
      const bytes = first;
      first = undefined;
      decided(bytes, false);
    },
    done: () => scanner.done(),
    encoding: () => encoding,
    current: () => scanner.end(),
    end() {
      if (encoding === undefined) decided(first ?? Buffer.alloc(0), true);
      else if (decode !== undefined) pass(Buffer.alloc(0), true);
      return scanner.end();
    },
  };
}

function utf16(encoding: 'utf-16le' | 'utf-16be'): (chunk: Buffer, last: boolean) => Buffer {
  // Not fatal: a lone surrogate becomes U+FFFD, as Python's 'surrogatepass' keeps it (the JSON the same).
  const decoder = new TextDecoder(encoding, { fatal: false, ignoreBOM: false });
  return (chunk, last) => Buffer.from(decoder.decode(chunk, { stream: !last }), 'utf8');
}

function utf32(le: boolean): (chunk: Buffer, last: boolean) => Buffer {
  let carry: Buffer | undefined;
  let start = true;
  return (chunk, last) => {
    const bytes = carry === undefined ? chunk : Buffer.concat([carry, chunk]);
    const whole = bytes.length - (bytes.length % 4);
    carry = whole < bytes.length ? bytes.subarray(whole) : undefined;
    let text = '';
    for (let i = 0; i < whole; i += 4) {
      const cp = le ? bytes.readUInt32LE(i) : bytes.readUInt32BE(i);
      if (start && cp === 0xfeff) {
        start = false;
        continue;
      }
      start = false;
      text += cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? '\ufffd' : String.fromCodePoint(cp);
    }
    // Bytes that are no whole character at the end: JSON cannot end there.
    if (last && carry !== undefined) text += '\ufffd';
    return Buffer.from(text, 'utf8');
  };
}
