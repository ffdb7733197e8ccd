// What undici, the upstream client (issue 54), would do otherwise than a client's own connection
// to the engine, held to what the engine sees directly: a kept-alive client connection's HEAD,
// GET with a body, and inference requests share its one upstream connection (undici closes a
// connection after a HEAD, and after a GET with a body, unless told not to).
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, it } from 'node:test';
import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { startProxy } from '../helpers/proxy-harness.ts';
import { listen } from '../helpers/listen.ts';
import { createUpstreamConnections } from '../../src/data-plane/upstream-connections.ts';
import { createUpstreamRequest } from '../../src/data-plane/upstream-request.ts';
import type { UpstreamRequestHandle } from '../../src/data-plane/upstream-response.ts';

/**
 * The data plane's upstream sender on a mirrored connection to `engine` (closed in t.after), and
 * a client request as the data plane hands it over: each on one client connection, kept alive.
 */
function upstreamSender(t: { after(fn: () => unknown): void }, engine: string) {
  const upstream = new URL(engine);
  const connections = createUpstreamConnections({ policy: 'mirror', upstream, tls: {}, connectTimeoutMs: 0 });
  t.after(() => connections.destroy());
  const clientSocket = Object.assign(new EventEmitter(), { destroyed: false });
  const clientRequest = (): IncomingMessage =>
    Object.assign(new EventEmitter(), {
      method: 'POST',
      url: '/v1/chat/completions',
      rawHeaders: ['content-type', 'application/json'],
      socket: clientSocket,
    }) as unknown as IncomingMessage;
  return { send: createUpstreamRequest({ upstream, connections }), clientRequest };
}

/** One request on `agent`, its whole answer read: status and body. */
function request(base: string, agent: http.Agent, method: string, path: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
    const req = http.request(new URL(path, base), { method, agent, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('upstream requests on undici', () => {
  it("a kept-alive client's HEAD, GET with a body and chat requests go on its one upstream connection, as directly", async (t) => {
    let connections = 0;
    const seen: string[] = [];
    const engine = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        seen.push(`${req.method} ${req.url} ${body}`);
        const answer = req.url === '/v1/chat/completions' ? '{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}' : '{"data":[]}';
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
        res.end(answer);
      });
    });
    engine.on('connection', () => connections++);
    const { url } = await listen(t, engine);
    const app = await startProxy(t, url);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    const steps: [string, string, string | undefined][] = [
      ['HEAD', '/v1/models', undefined],
      ['GET', '/v1/models', '{"q":1}'],
      ['POST', '/v1/chat/completions', '{"model":"m","messages":[]}'],
      ['HEAD', '/health', undefined],
      ['POST', '/v1/chat/completions', '{"model":"m","messages":[]}'],
    ];
    for (const [method, path, body] of steps) {
      const got = await request(app.dataUrl, agent, method, path, body);
      assert.equal(got.status, 200, `${method} ${path}`);
    }
    assert.equal(seen.length, steps.length);
    assert.equal(seen[1], 'GET /v1/models {"q":1}', 'the GET body reached the engine with its request');
    assert.equal(connections, 1, `the engine saw one connection, as directly (saw ${connections})`);
  });

  it('a request on a reused upstream connection is written in the turn it is sent (undici would wait for the turn to end)', async (t) => {
    const seen: string[] = [];
    const engine = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      req.resume();
      req.on('end', () => res.end('{}'));
    });
    const { send, clientRequest } = upstreamSender(t, (await listen(t, engine)).url);
    const answered = (): { handle: UpstreamRequestHandle; ended: Promise<void> } => {
      let handle: UpstreamRequestHandle | undefined;
      const ended = new Promise<void>((resolve, reject) => {
        handle = send(clientRequest(), Buffer.from('{"model":"m"}'), { response: (response) => response.once('end', resolve), error: reject });
      });
      return { handle: handle!, ended };
    };
    const first = answered();
    await first.ended;
    // A later turn, as a kept-alive client's next request comes.
    await new Promise((resolve) => setTimeout(resolve, 10));
    const second = answered();
    assert.equal(second.handle.reusedSocket, true, "the second request reuses the first one's connection");
    assert.notEqual(second.handle.socket, null, 'written before send returned, not in the check phase');
    await second.ended;
    assert.deepEqual(seen, ['POST /v1/chat/completions', 'POST /v1/chat/completions']);
  });

  it("each upstream read is said to be parsed (afterRead, the relay's write) after its last 'data', before the next read's and before any tick", async (t) => {
    // The engine writes an event only once the one before reached the proxy's side: a read each.
    const next: Array<() => void> = [];
    const engine = http.createServer(async (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let i = 0; i < 3; i++) {
        res.write(`data: ${i}\n\n`);
        await new Promise<void>((resolve) => next.push(resolve));
      }
      res.end();
    });
    const { send, clientRequest } = upstreamSender(t, (await listen(t, engine)).url);
    const order: string[] = [];
    await new Promise<void>((resolve, reject) => {
      send(clientRequest(), Buffer.from('{}'), {
        response: (response) => {
          response.on('data', (chunk: Buffer) => {
            order.push(`data ${chunk.toString().trim()}`);
            process.nextTick(() => order.push('tick'));
            assert.equal(
              response.afterRead(() => {
                order.push('parsed');
                setImmediate(() => next.shift()?.());
              }),
              true,
            );
          });
          response.once('end', () => {
            order.push('end');
            resolve();
          });
        },
        error: reject,
      });
    });
    assert.deepEqual(order, ['data data: 0', 'parsed', 'tick', 'data data: 1', 'parsed', 'tick', 'data data: 2', 'parsed', 'tick', 'end']);
  });
});
