// Sends an upstream response's body to the client, and hands what it wrote to the tap right
// after writing it: the order (forward, then read) is in the code, not in the order of two
// listeners. The body's slices come from undici's parser as it parses a read (views of the read,
// no copy: upstream-request.ts). Chunks that arrive in the same read (one socket read holds many
// small HTTP chunks when the upstream streams fast) are written as one, once undici's parser is
// done with the read (at its next read of the socket, in the same turn; a tick where that is not
// known): the same bytes, leaving in the same turn, but one write through Node's HTTP and
// stream machinery instead of one per upstream chunk, as nginx writes what one read brought.
// When the upstream's end came in the same read, the batch waits for it and leaves with the
// end in one write, as the upstream sent them (the last event and the chunked terminator in one
// packet). Back-pressure as a pipe has it: a client that reads slowly pauses the upstream's parser.
// Once the head has gone, a chunked response's batch leaves through the response's raw send in
// one socket write, where Node's write() makes four (size, CRLF, bytes, CRLF) corked until the
// next tick and sent as one writev: a read that is whole chunks and that the strip leaves as it
// is goes as the upstream framed it, its very bytes (the client's parser then finds the
// upstream's chunks, as it would directly); any other batch under 4 KiB is framed by the relay,
// size line, bytes and CRLF in one Buffer. Either way a valid chunked body, with the same content.
import type { ServerResponse } from 'node:http';
import type { ResponseTap } from '../stream-tap/response-tap.ts';
import { hexValue } from '../json-bytes/bytes.ts';
import type { BodyFilter } from '../stream-tap/usage-strip.ts';
import type { UpstreamResponse } from './upstream-response.ts';

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
  /** Where the tap's reading of the last read and the end is left, after the end has gone (settle-queue.ts); undefined: at once. */
  readonly settle?: ((work: () => void) => void) | undefined;
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
 * `count` of `slices` (views of it, from undici's parser), each a size line of hex digits and CRLF,
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

export function relay(proxyRes: UpstreamResponse, res: ServerResponse, tap: ResponseTap | undefined, hooks: RelayHooks = {}): void {
  const { sent, lastWrite, filter, arrived, backpressure, settle } = hooks;
  let firstWrite = hooks.firstWrite;
  // The batch's chunks in the first `count` places; the array is kept (not emptied: that would
  // free its store and make a new one for the next read's chunk).
  const batch: Buffer[] = [];
  let count = 0;
  let batchLength = 0;
  let waiting = false;
  const written: Written = { full: undefined, sent: false };
  const onDrain = (): void => {
    waiting = false;
    backpressure?.(false);
    proxyRes.resume();
  };
  /** The batch, joined (a lone chunk as it is); the batch starts over. */
  const take = (): Buffer => {
    const out = count === 1 ? batch[0]! : Buffer.concat(count === batch.length ? batch : batch.slice(0, count), batchLength);
    batch.fill(EMPTY, 0, count); // nothing of this read kept alive by the array
    count = 0;
    batchLength = 0;
    return out;
  };
  // The last read went on as it came: the next one begins at a chunk's start.
  let aligned = false;
  const write = (): void => {
    // The upstream's read that brought the batch: when it is whole chunks and nothing of it is
    // cut, it goes on as it came, framing and all (no copy, no framing of our own).
    const raw = proxyRes.lastRead();
    aligned = raw !== undefined && wholeChunks(raw, batch, count, aligned);
    const framed = aligned ? raw : undefined;
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
          proxyRes.pause();
          full.once('drain', onDrain);
        }
      }
      sent?.(out.length);
    }
    // Read at once only when what the client gets of this read went straight to the socket.
    tap?.chunk(read, written.sent);
    written.sent = false;
  };
  const flush = (): void => {
    if (count === 0) return; // written already, with the end
    // The upstream's end came in the same read (the parser saw the body complete): the batch
    // leaves with it, in one write, as the upstream sent it.
    if (proxyRes.complete) return;
    write();
  };
  const onData = (chunk: Buffer): void => {
    if (count === 0) {
      // Written once the parser is done with this read, at undici's next read of the socket in
      // the same turn: a tick queued per read instead cost the latency scenario 60.43 against
      // 52.71 µs of CPU per event (npm run bench, 15 repetitions; issue 54).
      if (!proxyRes.afterRead(flush)) process.nextTick(flush);
      arrived?.();
    }
    batch[count++] = chunk;
    batchLength += chunk.length;
  };
  proxyRes.on('data', onData);
  proxyRes.on('end', () => {
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
    if (tap === undefined) return;
    // The last read's stamp is the last write's (request-timer.ts), however late it is read.
    if (settle === undefined) endTap(tap, read);
    else settle(() => endTap(tap, read));
  });
  // Broken off before its end (a reset, its client left): what was held is handed on.
  proxyRes.on('close', () => {
    if (count > 0 && !proxyRes.complete) write();
    if (!proxyRes.complete) tap?.close();
  });
}

/** The tap reads the answer's last read, if any, and its end. */
function endTap(tap: ResponseTap, read: Buffer | undefined): void {
  if (read !== undefined) tap.chunk(read);
  tap.end();
}
