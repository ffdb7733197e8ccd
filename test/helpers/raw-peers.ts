// Raw sockets on both sides of the proxy, for bytes no HTTP library would write: a client that
// sends a request as given and reads whatever comes back until the connection closes, and an
// upstream that answers each request with the bytes a test chooses (or a well-behaved event
// stream, held until the test lets it finish: the bystander).
import { once } from 'node:events';
import net, { type Socket } from 'node:net';
import type { TestContext } from 'node:test';
import { listen } from './listen.ts';

/** Sends `bytes` on a fresh connection; resolves with all that came back once the proxy closed it. */
export async function rawExchange(url: string, bytes: string | Buffer, timeoutMs = 10_000): Promise<{ text: string; closed: boolean }> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => {});
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  await once(socket, 'connect');
  socket.write(bytes);
  const closed = await Promise.race([
    once(socket, 'close').then(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref()),
  ]);
  socket.destroy();
  return { text: Buffer.concat(chunks).toString('latin1'), closed };
}

/** One request as the raw upstream read it: its head, and its socket to answer on. */
export interface RawRequest {
  readonly head: string;
  readonly method: string;
  readonly path: string;
  readonly socket: Socket;
}

export interface RawUpstream {
  readonly url: string;
  /** Heads of every request read, in order. */
  readonly heads: string[];
  /** Lets the held bystander streams finish. */
  release(): void;
}

const BYSTANDER_EVENT = 'data: {"choices":[{"index":0,"delta":{"content":"b"}}]}\n\n';
const PING = ': ping\n\n';

/**
 * An upstream on raw sockets. A request whose path contains `/bystander` gets a well-formed
 * event stream: one event at once, the rest when release() is called. Any other request is
 * handed to `answer`, which writes what it likes on the socket.
 */
export async function startRawUpstream(t: TestContext, answer: (request: RawRequest) => void): Promise<RawUpstream> {
  const heads: string[] = [];
  const held: Socket[] = [];
  let released = false;
  const pings = new Map<Socket, NodeJS.Timeout>();
  const finish = (socket: Socket): void => {
    clearInterval(pings.get(socket));
    const rest = `${BYSTANDER_EVENT}data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\ndata: [DONE]\n\n`;
    socket.end(`${rest.length.toString(16)}\r\n${rest}\r\n0\r\n\r\n`);
  };
  const server = net.createServer((socket) => {
    socket.on('error', () => {});
    let buffered = '';
    const onData = (chunk: Buffer): void => {
      buffered += chunk.toString('latin1');
      const end = buffered.indexOf('\r\n\r\n');
      if (end === -1) return;
      socket.off('data', onData);
      socket.resume(); // the body, if any, is read and dropped
      const head = buffered.slice(0, end);
      heads.push(head);
      const [method = '', path = ''] = head.split('\r\n', 1)[0]!.split(' ');
      if (!path.includes('/bystander')) {
        answer({ head, method, path, socket });
        return;
      }
      socket.write(
        `HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${BYSTANDER_EVENT.length.toString(16)}\r\n${BYSTANDER_EVENT}\r\n`,
      );
      if (released) {
        finish(socket);
        return;
      }
      held.push(socket);
      // A comment now and then, as engines keep a quiet stream alive: a held bystander outlasts
      // a short idle timeout.
      const ping = setInterval(() => socket.write(`${PING.length.toString(16)}\r\n${PING}\r\n`), 100);
      ping.unref();
      socket.on('close', () => clearInterval(ping));
      pings.set(socket, ping);
    };
    socket.on('data', onData);
  });
  const { url } = await listen(t, server);
  t.after(() => {
    for (const ping of pings.values()) clearInterval(ping);
  });
  return {
    url,
    heads,
    release() {
      released = true;
      for (const socket of held.splice(0)) finish(socket);
    },
  };
}

/**
 * A streamed request that stays in flight until the upstream releases it; resolves with the
 * whole body once it ends (rejects if it is cut).
 */
export async function startBystander(dataUrl: string, model = 'bystander'): Promise<{ done: Promise<string> }> {
  const res = await fetch(`${dataUrl}/v1/bystander/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model, stream: true }) });
  if (res.status !== 200 || res.body === null) throw new Error(`the bystander got ${res.status}`);
  const reader = res.body.getReader();
  const first = await reader.read(); // in flight: its first event arrived
  const decoder = new TextDecoder();
  let text = decoder.decode(first.value, { stream: true });
  const done = (async () => {
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end) return text + decoder.decode();
      text += decoder.decode(value, { stream: true });
    }
  })();
  return { done };
}
