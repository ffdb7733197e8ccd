// Sends an upstream response's body to the client, and hands what it wrote to the tap right
// after writing it: the order (forward, then read) is in the code, not in the order of two
// listeners. The body's slices come from Node's parser as it parses a read (upstream-body.ts),
// or else from the response's 'data'; on the parser path, once a read was found to be whole
// chunks, the parser stops handing them over and the chunks are read from the socket's reads
// (chunk-decoder.ts): views of the read, without the parser's copy and call per slice; when the
// head's own read holds the whole head, from the body's first byte (skipFromHead). Chunks
// that arrive in the same read (one socket read holds many small HTTP chunks when the upstream
// streams fast) are written as one, as the read's turn ends (on the parser path, from a listener
// on the upstream socket after Node's own; else in a tick queued at the first of them): the same
// bytes, leaving in the same turn, but one write through Node's HTTP and stream machinery
// instead of one per upstream chunk, as nginx writes what one read brought.
// When the upstream's end came in the same read, the batch waits for it and leaves with the
// end in one write, as the upstream sent them (the last event and the chunked terminator in one
// packet). Back-pressure as a pipe has it: a client that reads slowly pauses the upstream.
// Once the head has gone, a chunked response's batch leaves through the response's raw send in
// one socket write, where Node's write() makes four (size, CRLF, bytes, CRLF) corked until the
// next tick and sent as one writev: on the parser path, a read that is whole chunks and that the
// strip leaves as it is goes as the upstream framed it, its very bytes (the client's parser then
// finds the upstream's chunks, as it would directly); any other batch is framed by the relay, size
// line, bytes and CRLF in one Buffer. Either way a valid chunked body, with the same content.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ResponseTap } from '../stream-tap/response-tap.ts';
import { hexValue } from '../stream-tap/json-bytes.ts';
import type { BodyFilter } from '../stream-tap/usage-strip.ts';
import { ChunkDecoder } from './chunk-decoder.ts';
import { readBodyFromParser, skipBodySlices, skipFromHead } from './upstream-body.ts';

export interface RelayHooks {
  /** Counts the bytes handed to the client (the access log); undefined: not counted. */
  readonly sent?: ((bytes: number) => void) | undefined;
  /** Told just before the first write (the head leaves with it, unless it was flushed before). */
  readonly firstWrite?: () => void;
  /** Told just before the last bytes are written (the end of e2e). */
  readonly lastWrite?: () => void;
  /**
   * What the client gets of each batch (the usage strip): still one write per batch; the tap
   * reads the upstream's bytes as they came, the count is of what was written.
   */
  readonly filter?: BodyFilter | undefined;
  /** Told when a batch's first chunk arrives (the start of the proxy's own time on it). */
  readonly arrived?: () => void;
  /** Told when the client's socket refuses a write (`true`: the upstream paused) and when it drains (`false`). */
  readonly backpressure?: (on: boolean) => void;
}

/**
 * What of Node's OutgoingMessage the framed write uses (internal, but its HTTP/1.1 writes have
 * gone through them for over a decade): its raw send (buffered while the socket is not this
 * response's, dropped once it is destroyed), whether the head went and whether it has a body.
 */
interface RawSend {
  _send(data: Buffer, encoding: null, callback: null): boolean;
  readonly _hasBody?: boolean;
  readonly _headerSent?: boolean;
}

/**
 * Larger batches go through Node's write (a writev of the parts) rather than be copied: a frame
 * under 4 KiB comes from Node's buffer pool, a larger one would be an allocation of its own
 * (measured: 16 KiB frames cost the throughput scenario more CPU per event than they saved).
 */
const FRAME_COPY_MAX = 4 * 1024 - 16;
const CRLF = 0x0d0a;
const EMPTY = Buffer.alloc(0);

/** The batch as one HTTP/1.1 chunk: its size in hex, CRLF, its bytes, CRLF. */
export function chunkFrame(bytes: Buffer): Buffer {
  const size = bytes.length.toString(16);
  const frame = Buffer.allocUnsafe(size.length + bytes.length + 4);
  frame.write(size, 0, 'latin1');
  frame.writeUInt16BE(CRLF, size.length);
  bytes.copy(frame, size.length + 2);
  frame.writeUInt16BE(CRLF, frame.length - 2);
  return frame;
}

/**
 * Whether the upstream's read `raw` is exactly HTTP/1.1 chunks whose bodies are the first
 * `count` of `slices` (Node's parser's copies of them), each a size line of hex digits and CRLF,
 * its bytes, CRLF, and nothing else: then it can go to a chunked client as it came. A read that
 * begins or ends inside a chunk, or has a chunk extension, is not. `known`: the read begins at a
 * chunk's start (the last one ended at a chunk's end), so the sizes tell; else the bytes are
 * compared as well, since a read that began inside a chunk could look like a size line.
 */
export function wholeChunks(raw: Buffer, slices: readonly Buffer[], count: number, known: boolean): boolean {
  if (count === 0) return false;
  let at = 0;
  for (let i = 0; i < count; i++) {
    const slice = slices[i]!;
    let size = 0;
    let j = at;
    for (; j < raw.length && j - at < 8; j++) {
      const digit = hexValue(raw[j]!);
      if (digit === -1) break;
      size = size * 16 + digit;
    }
    if (j === at || size !== slice.length || raw[j] !== 0x0d || raw[j + 1] !== 0x0a) return false;
    const start = j + 2;
    const end = start + size;
    if (raw[end] !== 0x0d || raw[end + 1] !== 0x0a) return false;
    if (!known && raw.compare(slice, 0, size, start, end) !== 0) return false;
    at = end + 2;
  }
  return at === raw.length;
}

/** What a batch's write did: what to wait on for 'drain' before the next, and whether its bytes are on the socket. */
interface Written {
  full: NodeJS.EventEmitter | undefined;
  sent: boolean;
}

/**
 * Writes one batch. Framed by the relay when Node would frame it as a chunk and the head has
 * gone to the socket, else Node's own write. A framed write goes to the socket: its 'drain' is
 * the one to wait for (Node tells the response only of drains its own write() asked for), and
 * on an uncorked socket its bytes have left (or are queued behind earlier ones) when it returns.
 */
function writeBatch(res: ServerResponse, out: Buffer, written: Written, framed: Buffer | undefined): void {
  const raw = res as unknown as RawSend;
  const socket = res.socket;
  if (
    res.chunkedEncoding &&
    raw._headerSent === true &&
    socket !== null &&
    raw._hasBody !== false &&
    out.length > 0 &&
    (framed !== undefined || out.length <= FRAME_COPY_MAX) &&
    typeof raw._send === 'function'
  ) {
    written.full = raw._send(framed ?? chunkFrame(out), null, null) ? undefined : socket;
    written.sent = socket.writableCorked === 0;
    return;
  }
  written.full = res.write(out) ? undefined : res;
  written.sent = false;
}

export function relay(proxyRes: IncomingMessage, res: ServerResponse, tap: ResponseTap | undefined, hooks: RelayHooks = {}): void {
  const { sent, lastWrite, filter, arrived, backpressure } = hooks;
  let firstWrite = hooks.firstWrite;
  // The batch's chunks in the first `count` places; the array is kept (not emptied: that would
  // free its store and make a new one for the next read's chunk).
  const batch: Buffer[] = [];
  let count = 0;
  let batchLength = 0;
  let waiting = false;
  const written: Written = { full: undefined, sent: false };
  // The body's slices come from the parser itself where they can (upstream-body.ts): then
  // back-pressure pauses the socket, as Node's own readStop does.
  let direct = false;
  const socket = proxyRes.socket;
  /** What back-pressure pauses. */
  const source = (): { pause(): unknown; resume(): unknown } | null => (direct ? socket : proxyRes);
  const onDrain = (): void => {
    waiting = false;
    backpressure?.(false);
    source()?.resume();
  };
  /** The batch, joined (a lone chunk as it is); the batch starts over. */
  const take = (): Buffer => {
    const out = count === 1 ? batch[0]! : Buffer.concat(count === batch.length ? batch : batch.slice(0, count), batchLength);
    batch.fill(EMPTY, 0, count); // nothing of this read kept alive by the array
    count = 0;
    batchLength = 0;
    return out;
  };
  const flush = (): void => {
    if (count === 0) return; // written already, with the end
    // The upstream's end came in the same read (the parser saw the body complete): the batch
    // leaves with it, in one write, as the upstream sent it ('end' follows in this turn).
    if (proxyRes.complete && !proxyRes.destroyed) return;
    write();
  };
  // The upstream socket's read whose slices are the batch (the parser path, a read after the
  // head's): when it is whole chunks and nothing of it is cut, it goes on as it came, framing
  // and all (no copy, no framing of our own).
  let rawRead: Buffer | undefined;
  // The last read went on as it came: the next one begins at a chunk's start.
  let aligned = false;
  // From then on the parser's slices are skipped (each a copy and a call from C++): the chunks
  // are read from the socket's reads (chunk-decoder.ts), which says whether a read is whole.
  let decoder: ChunkDecoder | undefined;
  let giveBack: (() => void) | undefined;
  let whole = false;
  const write = (): void => {
    if (decoder === undefined) aligned = rawRead !== undefined && wholeChunks(rawRead, batch, count, aligned);
    const framed = (decoder === undefined ? aligned : whole) ? rawRead : undefined;
    rawRead = undefined;
    const read = take();
    const out = filter === undefined ? read : filter.pass(read);
    // A client that is gone takes its upstream request down with it (the data plane's 'close');
    // an answer ended already (the total timeout's 504) gets nothing more.
    if (out !== undefined) {
      if (firstWrite !== undefined) {
        firstWrite();
        firstWrite = undefined;
      }
      if (!res.destroyed && !res.writableEnded) {
        writeBatch(res, out, written, out === read ? framed : undefined);
        const full = written.full;
        if (full !== undefined && !waiting) {
          waiting = true;
          backpressure?.(true);
          source()?.pause();
          full.once('drain', onDrain);
        }
      }
      sent?.(out.length);
    }
    // Read at once only when what the client gets of this read went straight to the socket.
    tap?.chunk(read, written.sent);
    written.sent = false;
  };
  // On the parser path a listener on the upstream socket, after Node's own (which parses the
  // read), writes the batch as the read's turn ends: no tick queued per read. It hears only the
  // reads after the head's: that one's body is read in a tick (skipFromHead, below), or its
  // slices written in one, as on the stream path.
  let reading = false;
  const onRead = (chunk: Buffer): void => {
    reading = true;
    if (decoder !== undefined) {
      // A read Node's parser failed on (it destroyed the socket), or of a response destroyed,
      // gives nothing, as the parser's slices of a destroyed response are dropped.
      if (proxyRes.destroyed || socket?.destroyed === true) return;
      whole = decoder.feed(chunk, onData);
    } else if (count === 0) aligned = false; // a read of framing alone: where the next begins is unknown
    rawRead = chunk;
    flush();
    rawRead = undefined;
    if (decoder === undefined && aligned && !proxyRes.complete) {
      giveBack = skipBodySlices(proxyRes);
      if (giveBack !== undefined) decoder = new ChunkDecoder();
    }
  };
  const onData = (chunk: Buffer): void => {
    if (count === 0) {
      if (!reading) process.nextTick(flush);
      arrived?.();
    }
    batch[count++] = chunk;
    batchLength += chunk.length;
  };
  direct = readBodyFromParser(proxyRes, onData);
  if (!direct) proxyRes.on('data', onData);
  else {
    socket?.on('data', onRead);
    // The head's read holds the whole head: its body is read from it too (no slice copied at
    // all), once the parser is done with it, as a later read is, before the 'end'.
    const head = skipFromHead(proxyRes);
    if (head !== undefined) {
      ({ giveBack } = head);
      decoder = new ChunkDecoder();
      if (head.body.length > 0) process.nextTick(onRead, head.body);
    }
  }
  /** The socket's next response (kept alive) is another relay's. */
  const unlisten = (): void => {
    if (direct) socket?.off('data', onRead);
    giveBack?.();
    giveBack = undefined;
  };
  proxyRes.on('end', () => {
    unlisten();
    const read = count === 0 ? undefined : take();
    let out = read;
    if (filter !== undefined) {
      const passed = read === undefined ? undefined : filter.pass(read);
      const rest = filter.end();
      out = rest === undefined ? passed : passed === undefined ? rest : Buffer.concat([passed, rest]);
    }
    // The last bytes and the end go out in one write.
    if (!res.destroyed && !res.writableEnded) {
      firstWrite?.();
      lastWrite?.();
      res.end(out);
    }
    if (out !== undefined) sent?.(out.length);
    if (read !== undefined) tap?.chunk(read);
    tap?.end();
  });
  // Complete but destroyed before its 'end' (its client left): what was held is handed on.
  proxyRes.on('close', () => {
    unlisten();
    if (count > 0) write();
    tap?.close();
  });
}
