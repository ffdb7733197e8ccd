// An upstream read of whole chunks goes on to the client as the upstream framed it (the relay's
// raw path, relay.ts): the socket's last read is kept on the connection's line by
// upstream-connections.ts, and the relay writes it unchanged. The framing here is one infermeter
// would never write itself (leading zeros, upper-case hex, two chunks in one read), so the
// client's wire bytes tell the raw path from a batch framed anew.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net, { type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { listen } from '../helpers/listen.ts';
import { startProxy } from '../helpers/proxy-harness.ts';

const HEAD = 'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n';
// Each a read of its own: two whole chunks, then one in upper-case hex, then the end; each with
// the bytes that end it on the wire however it is framed.
const READS = [
  { bytes: '0F\r\ndata: {"a":1}\n\n\r\n0f\r\ndata: {"a":2}\n\n\r\n', ends: '{"a":2}\n\n\r\n' },
  { bytes: '00F\r\ndata: {"a":3}\n\n\r\n', ends: '{"a":3}\n\n\r\n' },
  { bytes: '0\r\n\r\n', ends: '\r\n0\r\n\r\n' },
];

/** Resolves once `socket` has received `text` in all (from its first byte). */
function received(socket: Socket, got: { bytes: string }, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (!got.bytes.includes(text)) return;
      socket.off('data', check);
      socket.off('close', fail);
      resolve();
    };
    const fail = (): void => reject(new Error(`closed before ${JSON.stringify(text)}; got ${JSON.stringify(got.bytes)}`));
    socket.on('data', check);
    socket.once('close', fail);
    check();
  });
}

describe('the framing of an answer', () => {
  it('an upstream read of whole chunks reaches the client framed as the upstream framed it (leading zeros, upper-case hex, two chunks in one read)', async (t) => {
    let upstreamSocket: Socket | undefined;
    const upstreamReady = Promise.withResolvers<Socket>();
    const upstream = net.createServer((socket) => {
      upstreamSocket = socket;
      let request = '';
      socket.on('data', (c: Buffer) => {
        request += c.toString('latin1');
        const end = request.indexOf('\r\n\r\n');
        const length = Number(/content-length: (\d+)/i.exec(request)?.[1] ?? 0);
        if (end >= 0 && request.length >= end + 4 + length) upstreamReady.resolve(socket);
      });
      socket.on('error', () => undefined);
    });
    const app = await startProxy(t, (await listen(t, upstream)).url);
    t.after(() => upstreamSocket?.destroy());

    const { port } = new URL(app.dataUrl);
    const client = net.connect(Number(port), '127.0.0.1');
    t.after(() => client.destroy());
    client.on('error', () => undefined);
    await once(client, 'connect');
    const got = { bytes: '' };
    client.on('data', (c: Buffer) => (got.bytes += c.toString('latin1')));
    // The client asks for usage itself: nothing is injected, nothing stripped on the way back.
    const body = '{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}';
    client.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);

    const socket = await upstreamReady.promise;
    socket.write(HEAD);
    await received(client, got, '\r\n\r\n');
    const head = got.bytes.length;
    for (const read of READS) {
      socket.write(read.bytes);
      await received(client, got, read.ends);
    }
    assert.equal(got.bytes.slice(head), READS.map((r) => r.bytes).join(''), 'the body on the wire, byte for byte');
  });
});
