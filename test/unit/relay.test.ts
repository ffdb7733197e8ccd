// The relay on a real socket: what the client gets, what the tap is handed, and how many writes
// reach the socket: one per turn of the event loop, however many upstream chunks it brought.
import assert from 'node:assert/strict';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import net, { type Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { chunkFrame, relay, wholeChunks } from '../../src/data-plane/relay.ts';
import type { UpstreamResponse } from '../../src/data-plane/upstream-response.ts';
import { createUsageStrip, type BodyFilter } from '../../src/stream-tap/usage-strip.ts';
import { startProxy } from '../helpers/proxy-harness.ts';
import { listen } from '../helpers/listen.ts';

interface Stage {
  readonly upstream: PassThrough;
  readonly res: ServerResponse;
  /** Writes that reached the client socket so far. */
  socketWrites(): number;
  /** The chunks the tap was handed, as text. */
  readonly tapped: string[];
  readonly tapEnded: Promise<void>;
  /** Everything the client received, once the response ended. */
  readonly received: Promise<string>;
  /** When the relay said its last write was coming: socket writes then, and whether the response had ended. */
  readonly lastWrite: { writes: number; ended: boolean }[];
  /** For each chunk the tap was handed: whether it was told the bytes are on the socket, and the socket writes then. */
  readonly tapSent: { sent: boolean | undefined; writes: number }[];
}

async function stage(t: { after(fn: () => unknown): void }, filter?: BodyFilter): Promise<Stage> {
  let ready!: (s: Stage) => void;
  const staged = new Promise<Stage>((resolve) => (ready = resolve));
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const socket = res.socket as Socket & { _writeGeneric(...args: unknown[]): unknown };
    let writes = 0;
    const original = socket._writeGeneric;
    socket._writeGeneric = function (this: unknown, ...args: unknown[]) {
      writes++;
      return original.apply(this, args);
    };
    const upstream = new PassThrough();
    const tapped: string[] = [];
    let tapEnd!: () => void;
    const tapEnded = new Promise<void>((resolve) => (tapEnd = resolve));
    const lastWrite: { writes: number; ended: boolean }[] = [];
    const tapSent: { sent: boolean | undefined; writes: number }[] = [];
    relay(
      Object.assign(upstream, { lastRead: () => undefined, afterRead: () => false }) as unknown as UpstreamResponse,
      res,
      {
        chunk: (b, sent) => {
          tapped.push(b.toString());
          tapSent.push({ sent, writes });
        },
        end: tapEnd,
        close: () => undefined,
      },
      { lastWrite: () => lastWrite.push({ writes, ended: res.writableEnded }), filter },
    );
    ready({ upstream, res, socketWrites: () => writes, tapped, tapEnded, received, lastWrite, tapSent });
  });
  const { url } = await listen(t, server);
  const received = new Promise<string>((resolve, reject) => {
    http
      .get(`${url}/`, { agent: false }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve(text));
      })
      .on('error', reject);
  });
  received.catch(() => undefined); // a failed test cuts the connection in teardown
  return staged;
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('relay', () => {
  it('writes the chunks of one turn in one socket write, and hands them to the tap after', async (t) => {
    const s = await stage(t);
    await turn();
    const before = s.socketWrites();
    s.upstream.write('a');
    await turn();
    assert.equal(s.socketWrites() - before, 1, 'a lone chunk: one write (with the head)');
    assert.deepEqual(s.tapped, ['a']);
    s.upstream.write('b');
    s.upstream.write('c');
    s.upstream.write('d');
    await turn();
    assert.equal(s.socketWrites() - before, 2, 'three chunks of one turn: one write');
    assert.deepEqual(s.tapped, ['a', 'bcd'], 'handed to the tap as written, in order');
    s.upstream.write('e');
    await turn();
    assert.equal(s.socketWrites() - before, 3);
    s.upstream.write('f');
    s.upstream.end('g');
    assert.equal(await s.received, 'abcdefg');
    await s.tapEnded;
    assert.deepEqual(s.tapped.join(''), 'abcdefg');
  });

  it('tells the tap a framed batch is on the socket already (so it is read at once), and a batch Node still corks is not', async (t) => {
    const s = await stage(t);
    await turn();
    s.upstream.write('a'); // the first write carries the head: Node's own, corked until the next tick
    await turn();
    s.upstream.write('b'); // after the head: framed by the relay, straight to the socket
    await turn();
    const writesBefore = s.socketWrites();
    s.upstream.write('c');
    await turn();
    assert.deepEqual(s.tapped, ['a', 'b', 'c']);
    assert.equal(s.tapSent[0]!.sent, false, 'the head and first batch went through Node');
    assert.equal(s.tapSent[1]!.sent, true);
    assert.equal(s.tapSent[2]!.sent, true);
    assert.equal(s.tapSent[2]!.writes, writesBefore + 1, "the batch's socket write came before the tap was handed it");
    s.upstream.end();
    assert.equal(await s.received, 'abc');
  });

  it('leaves no cork behind when the response ends with a batch waiting', async (t) => {
    const s = await stage(t);
    await turn();
    s.upstream.write('x');
    s.upstream.write('y');
    s.upstream.end('z');
    assert.equal(await s.received, 'xyz');
    assert.equal(s.res.socket?.writableCorked ?? 0, 0);
  });

  it('says its last write is coming once, before the last bytes reach the socket (the end of e2e)', async (t) => {
    const s = await stage(t);
    await turn();
    s.upstream.write('a');
    await turn();
    const before = s.socketWrites();
    // As Node's parser does when the body's end came in the same read as its last bytes.
    (s.upstream as unknown as { complete: boolean }).complete = true;
    s.upstream.end('b');
    assert.equal(await s.received, 'ab');
    assert.equal(s.lastWrite.length, 1, JSON.stringify(s.lastWrite));
    assert.deepEqual(s.lastWrite[0], { writes: before, ended: false }, `socket writes after: ${s.socketWrites()}`);
    assert.ok(s.socketWrites() > before, 'the last bytes were written after it');
  });

  // Issue 34: the injected-usage path once piped through a Transform that pushed each event on
  // its own: a read of ten events left as ten writes.
  it('with the usage strip: one socket write per turn, the tap handed the upstream bytes', async (t) => {
    let stripped = 0;
    const s = await stage(t, createUsageStrip({ maxEventBytes: 1024, stripped: (n) => (stripped += n) }));
    await turn();
    const before = s.socketWrites();
    const tokens = Array.from({ length: 10 }, (_, i) => `data: {"choices":[{"delta":{"content":"t${i}"}}]}\n\n`).join('');
    const usage = 'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":10}}\n\n';
    s.upstream.write(tokens);
    await turn();
    assert.equal(s.socketWrites() - before, 1, 'ten events of one read: one write');
    s.upstream.write('data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n');
    s.upstream.write(usage);
    s.upstream.write('data: [DO');
    await turn();
    assert.equal(s.socketWrites() - before, 2, 'one write for the turn, the usage-only event removed');
    s.upstream.end('NE]\n\n');
    const received = await s.received;
    await s.tapEnded;
    assert.equal(received, `${tokens}data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n`);
    assert.equal(stripped, usage.length);
    assert.ok(s.tapped.join('').includes(usage), 'the tap reads the usage it needs');
  });

  it("writes the last event and the body's end in one write when they came in one read (the parser marks the body complete)", async (t) => {
    const s = await stage(t);
    await turn();
    s.upstream.write('data: a\n\n');
    await turn();
    const before = s.socketWrites();
    // As node's HTTP parser does when one read holds the last chunk and the terminator: the
    // chunk pushed, the message marked complete, the end pushed, all in one go.
    s.upstream.write('data: [DONE]\n\n');
    (s.upstream as PassThrough & { complete?: boolean }).complete = true;
    s.upstream.end();
    assert.equal(await s.received, 'data: a\n\ndata: [DONE]\n\n');
    assert.equal(s.socketWrites() - before, 1, 'the last event and the chunked terminator: one write');
    assert.equal(s.lastWrite.length, 1);
    assert.equal(s.lastWrite[0]!.writes, before, 'the end of e2e stamped before that one write');
    await s.tapEnded;
    assert.equal(s.tapped.join(''), 'data: a\n\ndata: [DONE]\n\n');
  });

  it('through infermeter, a stream whose last events and end came in one read ends in one write to the client, its usage chunk stripped or not (issue 29)', async (t) => {
    const chunk = (text: string): string => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    const upstream = net.createServer((socket) => {
      socket.on('error', () => undefined);
      socket.once('data', () => {
        socket.write(
          `HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunk('data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n')}`,
        );
        // The usage chunk, [DONE] and the terminator in one write, a moment later.
        setTimeout(
          () => socket.end(`${chunk('data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\n')}${chunk('data: [DONE]\n\n')}0\r\n\r\n`),
          20,
        );
      });
    });
    const app = await startProxy(t, (await listen(t, upstream)).url);
    const writes: number[] = [];
    app.dataServer!.on('connection', (socket: Socket & { _writeGeneric(...args: unknown[]): unknown }) => {
      const original = socket._writeGeneric;
      socket._writeGeneric = function (this: unknown, ...args: unknown[]) {
        writes.push(performance.now());
        return original.apply(this, args);
      };
    });
    for (const includeUsage of [true, false]) {
      writes.length = 0;
      const res = await fetch(`${app.dataUrl}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ model: 'm', stream: true, ...(includeUsage ? { stream_options: { include_usage: true } } : {}) }),
      });
      const text = await res.text();
      assert.match(text, /data: \[DONE\]\n\n$/);
      assert.equal(text.includes('"usage"'), includeUsage, 'the injected usage chunk stripped');
      // The head with the first event, then the rest with the end.
      assert.equal(writes.length, 2, `include_usage ${includeUsage}: socket writes ${writes.length}`);
    }
  });
  it('through infermeter (the body read from the parser), each upstream read of several chunks leaves in one write, its usage chunk stripped or not', async (t) => {
    const chunk = (text: string): string => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    const event = (i: number) => `data: {"choices":[{"index":0,"delta":{"content":"t${i}"}}]}\n\n`;
    // The upstream writes its next read only once the client has the one before: each is a read of its own.
    let clientGot: () => void = () => undefined;
    const upstream = net.createServer((socket) => {
      socket.on('error', () => undefined);
      socket.once('data', async () => {
        const reads = [
          `HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n${chunk(event(0))}`,
          chunk(event(1)) + chunk(event(2)),
          chunk(event(3)) + chunk(event(4)) + chunk(event(5)),
          chunk(event(6)) + chunk(event(7)),
        ];
        for (const read of reads) {
          const got = new Promise<void>((resolve) => (clientGot = resolve));
          socket.write(read);
          await got;
        }
        socket.end(`${chunk('data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":8}}\n\n')}${chunk('data: [DONE]\n\n')}0\r\n\r\n`);
      });
    });
    const app = await startProxy(t, (await listen(t, upstream)).url);
    let writes = 0;
    app.dataServer!.on('connection', (socket: Socket & { _writeGeneric(...args: unknown[]): unknown }) => {
      const original = socket._writeGeneric;
      socket._writeGeneric = function (this: unknown, ...args: unknown[]) {
        writes++;
        return original.apply(this, args);
      };
    });
    for (const includeUsage of [true, false]) {
      writes = 0;
      const res = await new Promise<IncomingMessage>((resolve, reject) => {
        const req = http.request(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', agent: false }, resolve);
        req.on('error', reject);
        req.end(JSON.stringify({ model: 'm', stream: true, ...(includeUsage ? { stream_options: { include_usage: true } } : {}) }));
      });
      let text = '';
      const pieces: string[] = [];
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
        pieces.push(c);
        clientGot();
      });
      await once(res, 'end');
      assert.equal(
        text,
        `${[0, 1, 2, 3, 4, 5, 6, 7].map(event).join('')}${includeUsage ? 'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":8}}\n\n' : ''}data: [DONE]\n\n`,
      );
      // The head with the first event, one write per read after it, the last with the end.
      assert.equal(writes, 5, `include_usage ${includeUsage}: socket writes ${writes}`);
      // The reads after the head's are whole chunks, passed on framed as the upstream framed them:
      // the client's parser finds the upstream's chunks, one piece each, as it would directly.
      assert.deepEqual(pieces.slice(1, 8), [1, 2, 3, 4, 5, 6, 7].map(event));
    }
  });
  it('passes a read on as it came only when it is exactly whole chunks of the slices the parser found', () => {
    const b = (text: string) => Buffer.from(text, 'latin1');
    const slices = [b('hello'), b('data: x\n\n')];
    assert.equal(wholeChunks(b('5\r\nhello\r\n9\r\ndata: x\n\n\r\n'), slices, 2, true), true);
    assert.equal(wholeChunks(b('5\r\nhello\r\n9\r\ndata: x\n\n\r\n'), slices, 2, false), true);
    assert.equal(wholeChunks(b('05\r\nhello\r\n'), slices, 1, false), true, 'leading zeros: the upstream framing as it was');
    assert.equal(wholeChunks(b('A\r\n0123456789\r\n'), [b('0123456789')], 1, true), true, 'upper-case hex');
    // What is not: a read that ends inside a chunk, or after more than the slices, an extension, no slices.
    assert.equal(wholeChunks(b('5\r\nhello\r\n9\r\ndata'), slices, 2, true), false);
    assert.equal(wholeChunks(b('5\r\nhello\r\n9'), slices, 1, true), false);
    assert.equal(wholeChunks(b('5;x=1\r\nhello\r\n'), slices, 1, true), false);
    assert.equal(wholeChunks(b('5\r\nhello\n'), slices, 1, true), false);
    assert.equal(wholeChunks(b(''), slices, 0, true), false);
    // A read that began inside a chunk whose bytes look like a size line and a chunk: the sizes
    // agree, the bytes do not (the parser's slice is the chunk's rest, not what follows the line).
    assert.equal(wholeChunks(b('5\r\nhello\r\n'), [b('5\r\nhe')], 1, false), false);
    assert.equal(wholeChunks(b('5\r\nhello\r\n'), [b('world')], 1, false), false);
  });
  it('frames a chunk as Node does: its size in hex, CRLF, its bytes, CRLF', () => {
    assert.equal(chunkFrame(Buffer.from('data: a\n\n')).toString('latin1'), '9\r\ndata: a\n\n\r\n');
    const big = Buffer.alloc(0x1234, 0x78);
    assert.equal(chunkFrame(big).toString('latin1'), `1234\r\n${'x'.repeat(0x1234)}\r\n`);
  });

  it('on the framed path (small batches after the head), a client that stops reading pauses the upstream, then gets every byte in order', async (t) => {
    let upstream!: PassThrough;
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders(); // the head gone: every batch takes the framed path
      upstream = new PassThrough();
      relay(Object.assign(upstream, { lastRead: () => undefined, afterRead: () => false }) as unknown as UpstreamResponse, res, undefined);
    });
    const { url } = await listen(t, server);
    const res = await new Promise<IncomingMessage>((resolve, reject) => http.get(`${url}/`, { agent: false }, resolve).on('error', reject));
    res.pause();
    // 8 KiB events one per turn, far more than the socket buffers between hold, until the relay pauses the upstream.
    const piece = (i: number) => `data: ${String(i).padStart(8, '0')}${'x'.repeat(8 * 1024 - 16)}\n\n`;
    let sent = 0;
    while (!upstream.isPaused() && sent < 20_000) {
      upstream.write(piece(sent++));
      await turn();
    }
    assert.ok(upstream.isPaused(), `the relay paused the upstream (after ${sent} events)`);
    let text = '';
    res.setEncoding('latin1');
    res.on('data', (c: string) => (text += c));
    res.resume();
    await new Promise<void>((resolve) => {
      const more = (): void => {
        if (upstream.isPaused()) return void setImmediate(more);
        upstream.end(piece(sent++));
        resolve();
      };
      more();
    });
    await new Promise((resolve) => res.on('end', resolve));
    assert.equal(text, Array.from({ length: sent }, (_, i) => piece(i)).join(''));
  });

  it("through infermeter, a head and its body in one read, or cut anywhere in two, give the client the same body (the head's read decoded on the side), its usage chunk stripped or not", async (t) => {
    const chunk = (text: string): string => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    const events = ['data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n', 'data: {"choices":[{"index":0,"delta":{"content":"bc"}}]}\n\n'];
    const usage = 'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}\n\n';
    const answer = `HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n${events.map(chunk).join('')}${chunk(usage)}${chunk('data: [DONE]\n\n')}0\r\n\r\n`;
    const headLength = answer.indexOf('\r\n\r\n') + 4;
    let cut = answer.length;
    // Written raw on the request's socket: the whole answer in one write, or in two a turn apart.
    const upstream = http.createServer((req) => {
      req.resume();
      req.on('end', () => {
        const socket = req.socket;
        socket.write(answer.slice(0, cut));
        if (cut < answer.length) setImmediate(() => socket.end(answer.slice(cut)));
        else socket.end();
      });
    });
    const app = await startProxy(t, (await listen(t, upstream)).url);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    // Every cut from inside the head's last line to the end: the head's read holds none, some or all of the body.
    for (cut = headLength - 3; cut <= answer.length; cut++) {
      for (const includeUsage of [false, true]) {
        const res = await new Promise<IncomingMessage>((resolve, reject) => {
          const req = http.request(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', agent }, resolve);
          req.on('error', reject);
          req.end(JSON.stringify({ model: 'm', stream: true, ...(includeUsage ? { stream_options: { include_usage: true } } : {}) }));
        });
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        await once(res, 'end');
        assert.equal(text, `${events.join('')}${includeUsage ? usage : ''}data: [DONE]\n\n`, `cut at ${cut}, include_usage ${includeUsage}`);
      }
    }
  });
});
