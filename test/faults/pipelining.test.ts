// Pipelining through the connection mirror (security review, issue 49, finding 6): a client that
// writes its requests one after another on one connection without waiting for the answers gets
// one upstream connection, as the engine would see directly, not one per request. Directly, a
// thread-per-connection engine (cpp-httplib, llama.cpp) serves that connection's requests on one
// thread, one after another, and the rest of its threads stay free for other clients; through
// infermeter each pipelined request used to open an upstream connection of its own (12 streams,
// 13 connections), holding a thread each, so that a bystander on another connection waited for
// the pipeline. The stand-in is test/helpers/thread-per-connection.ts, its streamed answers'
// connections kept (closeAfterStream false), so that one connection can carry them all.
// Assertions are on connection counts and order, never on milliseconds.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import net, { type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { listen } from '../helpers/listen.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startThreadServer } from '../helpers/thread-per-connection.ts';

const CHAT = '/v1/chat/completions';

/** A streamed chat request whose answer has `tokens` token events (the stand-in honours max_tokens). */
function streamed(tokens: number): string {
  const body = `{"model":"m","stream":true,"max_tokens":${tokens},"messages":[{"role":"user","content":"hi"}]}`;
  return `POST ${CHAT} HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

const MODELS = 'GET /v1/models HTTP/1.1\r\nHost: engine\r\n\r\n';
const NON_STREAMED_BODY = '{"model":"m","messages":[{"role":"user","content":"hi"}]}';
const NON_STREAMED = `POST ${CHAT} HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(NON_STREAMED_BODY)}\r\n\r\n${NON_STREAMED_BODY}`;

interface RawResponse {
  /** The head without its hop-by-hop and per-hop fields (Date, Connection, Keep-Alive). */
  readonly head: string;
  readonly body: string;
}

/** One complete response from `at`, or undefined while its bytes have not all come. */
function parseResponse(buf: Buffer, at: number): { response: RawResponse; end: number } | undefined {
  const headEnd = buf.indexOf('\r\n\r\n', at);
  if (headEnd === -1) return undefined;
  const rawHead = buf.toString('latin1', at, headEnd);
  const head = rawHead
    .split('\r\n')
    .filter((line) => !/^(date|connection|keep-alive):/i.test(line))
    .join('\r\n');
  let pos = headEnd + 4;
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(rawHead);
  if (length !== null) {
    const end = pos + Number(length[1]);
    return buf.length < end ? undefined : { response: { head, body: buf.toString('latin1', pos, end) }, end };
  }
  assert.match(rawHead, /\r\ntransfer-encoding:\s*chunked/i, 'a response with a length or chunked');
  const parts: string[] = [];
  while (pos < buf.length) {
    const lineEnd = buf.indexOf('\r\n', pos);
    if (lineEnd === -1) return undefined;
    const size = Number.parseInt(buf.toString('latin1', pos, lineEnd), 16);
    pos = lineEnd + 2;
    if (size === 0) return buf.length < pos + 2 ? undefined : { response: { head, body: parts.join('') }, end: pos + 2 };
    if (buf.length < pos + size + 2) return undefined;
    parts.push(buf.toString('latin1', pos, pos + size));
    pos += size + 2;
  }
  return undefined;
}

interface Pipeline {
  readonly socket: Socket;
  /** The complete responses so far, in the order they came. */
  readonly responses: RawResponse[];
  /** Resolves once the first response's head has come. */
  readonly firstHead: Promise<void>;
  /** Resolves with the responses once `n` have come; rejects after 20 s. */
  all(n: number): Promise<RawResponse[]>;
}

/** Writes `requests` at once on one new connection to `url` and reads the responses as they come. */
async function pipeline(url: string, requests: readonly string[]): Promise<Pipeline> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => {});
  await once(socket, 'connect');
  const responses: RawResponse[] = [];
  let buf = Buffer.alloc(0);
  let at = 0;
  let headSeen: () => void = () => {};
  const firstHead = new Promise<void>((resolve) => (headSeen = resolve));
  const waiters: Array<() => void> = [];
  socket.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    if (buf.includes('\r\n\r\n')) headSeen();
    for (let parsed = parseResponse(buf, at); parsed !== undefined; parsed = parseResponse(buf, at)) {
      responses.push(parsed.response);
      at = parsed.end;
    }
    for (const wake of waiters.splice(0)) wake();
  });
  socket.on('close', () => {
    for (const wake of waiters.splice(0)) wake();
  });
  socket.write(requests.join(''));
  return {
    socket,
    responses,
    firstHead,
    async all(n) {
      const deadline = performance.now() + 20_000;
      while (responses.length < n && !socket.destroyed && performance.now() < deadline) {
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 250).unref();
        });
      }
      assert.equal(responses.length, n, `${responses.length} of ${n} pipelined responses came within 20 s`);
      return responses;
    },
  };
}

/** Resolves once `done()` holds, checked every few ms for up to 20 s. */
async function until(done: () => boolean, what: () => string): Promise<void> {
  const deadline = performance.now() + 20_000;
  while (!done() && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.ok(done(), what());
}

describe('pipelined requests through the connection mirror (INFERMETER_UPSTREAM_CONNECTIONS=mirror)', () => {
  it('one client connection, 8 pipelined requests (streamed chat and GET /v1/models, both routes): one upstream connection, the answers in order, as directly', async (t) => {
    // Threads enough for a connection per request: the count is the point, not a stall.
    const options = { threads: 16, workMs: 5, closeAfterStream: false };
    const requests = Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? streamed(i + 1) : MODELS));
    const direct = await startThreadServer(t, options);
    const directly = await pipeline(direct.url, requests);
    const expected = await directly.all(requests.length);
    directly.socket.destroy();
    assert.equal(direct.stats.connections, 1);

    const engine = await startThreadServer(t, options);
    const app = await startProxy(t, engine.url);
    const measured = nextFinished(app, 4);
    const proxied = await pipeline(app.dataUrl, requests);
    t.after(() => proxied.socket.destroy());
    const got = await proxied.all(requests.length);
    // Each waited for the answers before it, as directly; its TTFT, from its arrival (with the
    // others, in one read), holds that wait.
    const samples = await measured;
    assert.deepEqual(
      samples.map((s) => s.completionTokens),
      [1, 3, 5, 7],
    );
    for (let i = 1; i < samples.length; i++)
      assert.ok(
        samples[i]!.ttft! >= samples[i - 1]!.e2e!,
        `TTFT ${samples[i]!.ttft} of the ${i + 1}th stream holds the e2e ${samples[i - 1]!.e2e} of the one before`,
      );
    assert.equal(engine.stats.connections, 1, `the engine saw one connection, as directly (saw ${engine.stats.connections})`);
    assert.equal(engine.stats.requests, requests.length);
    assert.deepEqual(got, expected, 'the same answers, in the same order, as directly');
    assert.match(got[6]!.body, /"completion_tokens":7/, 'the 7th answer is the 7th request’s');
    assert.deepEqual(app.dataPlane?.mirrored(), { clients: 1, waiting: 0 });
    proxied.socket.destroy();
    await until(
      () => engine.open() === 0 && app.dataPlane?.mirrored().clients === 0,
      () => `the upstream connection closes with the client's (engine ${engine.open()} open)`,
    );
  });

  it('a 2-thread engine: a bystander on another connection gets its first token while a pipeline of 6 streams is still being answered', async (t) => {
    const engine = await startThreadServer(t, { threads: 2, workMs: 20, closeAfterStream: false });
    const app = await startProxy(t, engine.url);
    const requests = Array.from({ length: 6 }, () => streamed(4));
    const piped = await pipeline(app.dataUrl, requests);
    t.after(() => piped.socket.destroy());
    await piped.firstHead;
    // How many of the pipeline's answers were complete when the bystander's first token came.
    const pipelineDone = await new Promise<number>((resolve, reject) => {
      const body = '{"model":"m","stream":true,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}';
      const req = http.request(
        new URL(CHAT, app.dataUrl),
        { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
        (res) => {
          res.once('data', () => resolve(piped.responses.length));
          res.resume();
        },
      );
      req.setTimeout(20_000, () => req.destroy(new Error(`the bystander had no first token within 20 s (engine saw ${engine.stats.connections} connections)`)));
      req.on('error', reject);
      req.end(body);
    });
    assert.ok(
      pipelineDone < requests.length,
      `the bystander did not wait for the pipeline (${pipelineDone} of ${requests.length} answered before its first token)`,
    );
    await piped.all(requests.length);
    assert.equal(engine.stats.connections, 2, 'one connection for the pipeline, one for the bystander');
  });

  it('a client that resets its connection with pipelined requests waiting: none goes upstream, and everything is released', async (t) => {
    const engine = await startThreadServer(t, { threads: 2, workMs: 5, tokens: 200, tokenGapMs: 5, closeAfterStream: false });
    const app = await startProxy(t, engine.url);
    const piped = await pipeline(app.dataUrl, [streamed(200), streamed(2), MODELS, streamed(2)]);
    await piped.firstHead;
    assert.deepEqual(app.dataPlane?.mirrored(), { clients: 1, waiting: 3 }, 'three requests wait for the first answer to end');
    piped.socket.resetAndDestroy();
    await until(
      () => engine.open() === 0 && app.dataPlane?.mirrored().clients === 0 && app.dataPlane.mirrored().waiting === 0,
      () => `released (engine ${engine.open()} open; ${JSON.stringify(app.dataPlane?.mirrored())})`,
    );
    assert.equal(app.dataPlane?.upstreamConnections(), 0);
    assert.equal(engine.stats.connections, 1);
    assert.equal(engine.stats.requests, 1, 'the waiting requests never reached the engine');
  });

  it("a stale upstream connection's re-send (on a fresh connection) stays the pipeline's one request upstream at a time", async (t) => {
    // An upstream that resets a connection when a second request comes on it (the stale race,
    // made certain, as in retry.test.ts), and answers each request with its marker.
    const stats = { inFlight: 0, maxInFlight: 0, resets: 0 };
    const served = new WeakMap<Socket, number>();
    const upstream = http.createServer((req, res) => {
      const n = (served.get(req.socket) ?? 0) + 1;
      served.set(req.socket, n);
      if (n > 1) {
        stats.resets++;
        req.socket.destroy();
        return;
      }
      stats.inFlight++;
      stats.maxInFlight = Math.max(stats.maxInFlight, stats.inFlight);
      res.once('close', () => stats.inFlight--);
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const marker = /"content":"(m\d)"/.exec(Buffer.concat(chunks).toString())?.[1];
        const answer = `{"choices":[{"message":{"content":"${marker}"}}],"usage":{"prompt_tokens":2,"completion_tokens":1}}`;
        // Answered a turn later: a second request sent meanwhile would overlap it.
        setImmediate(() => {
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer), 'keep-alive': 'timeout=5' });
          res.end(answer);
        });
      });
    });
    // The stale race's window is real time and this upstream shares the test's loaded process:
    // widened, as for retry.test.ts's re-sends, or a reset a turn late is taken for a request
    // the upstream worked on and answered 502 (under two CPU hogs, once).
    const app = await startProxy(t, (await listen(t, upstream)).url, {}, { staleRaceMs: 10_000 });
    const chat = (marker: string): string => {
      const body = `{"model":"m","messages":[{"role":"user","content":"${marker}"}]}`;
      return `POST ${CHAT} HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    };
    const piped = await pipeline(app.dataUrl, [chat('m1'), chat('m2'), chat('m3'), chat('m4')]);
    t.after(() => piped.socket.destroy());
    const got = await piped.all(4);
    assert.deepEqual(
      got.map((r) => /"content":"(m\d)"/.exec(r.body)?.[1]),
      ['m1', 'm2', 'm3', 'm4'],
      'every request answered, in order',
    );
    assert.equal(stats.maxInFlight, 1, 'never two of the pipeline upstream at once, re-sends included');
    assert.equal(stats.resets, 2, 'the 2nd and 4th met their connection reused and reset');
    assert.equal((await scrape(app)).value('infermeter_upstream_retries_total', { reason: 'stale_connection' }), 2);
  });

  it('pipelined requests waiting for their turn take no place under INFERMETER_MAX_CONCURRENCY: another client queues, not refused', async (t) => {
    const engine = await startThreadServer(t, { threads: 2, workMs: 20, closeAfterStream: false });
    // One in flight, two waiting: the pipeline's three would have filled both.
    const app = await startProxy(t, engine.url, { INFERMETER_MAX_CONCURRENCY: '1' });
    const requests = [streamed(3), streamed(3), streamed(3)];
    const piped = await pipeline(app.dataUrl, requests);
    t.after(() => piped.socket.destroy());
    await piped.firstHead;
    const status = await new Promise<number>((resolve, reject) => {
      const body = '{"model":"m","stream":true,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}';
      const req = http.request(
        new URL(CHAT, app.dataUrl),
        { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(status, 200, 'the other client was queued and served');
    await piped.all(requests.length);
    assert.equal(engine.stats.connections, 2);
  });

  it('a drain lets the pipelined requests already read finish, one upstream connection, then closes both', async (t) => {
    const engine = await startThreadServer(t, { threads: 2, workMs: 5, closeAfterStream: false });
    const app = await startProxy(t, engine.url);
    const requests = [streamed(3), streamed(2), MODELS];
    const piped = await pipeline(app.dataUrl, requests);
    t.after(() => piped.socket.destroy());
    await piped.firstHead;
    const drained = app.drain();
    const got = await piped.all(requests.length);
    assert.match(got[1]!.body, /"completion_tokens":2/);
    await drained;
    assert.equal(engine.stats.connections, 1);
    await until(
      () => engine.open() === 0 && piped.socket.destroyed,
      () => `both connections closed (engine ${engine.open()} open)`,
    );
  });
});

// Two cases that wait out a 1 s timeout, each its own engine and infermeter: side by side. (Not
// the others: a stale connection's re-send is told by a reset within 50 ms of the write, which a
// loop busy with other tests can miss.)
describe('pipelined requests through the connection mirror, and its timeouts', { concurrency: true }, () => {
  it('a pipelined request waiting longer than INFERMETER_UPSTREAM_IDLE_TIMEOUT_MS for its turn is not timed out: its deadlines start when it is sent', async (t) => {
    // The first answer streams for about 2 s, a token every 50 ms: never idle for 1 s.
    const engine = await startThreadServer(t, { threads: 2, workMs: 1, tokenGapMs: 50, closeAfterStream: false });
    const app = await startProxy(t, engine.url, { INFERMETER_UPSTREAM_IDLE_TIMEOUT_MS: '1000' });
    const piped = await pipeline(app.dataUrl, [streamed(40), streamed(2)]);
    t.after(() => piped.socket.destroy());
    const got = await piped.all(2);
    assert.deepEqual(
      got.map((r) => [/^HTTP\/1\.1 (\d+)/.exec(r.head)?.[1], /"completion_tokens":(\d+)/.exec(r.body)?.[1]]),
      [
        ['200', '40'],
        ['200', '2'],
      ],
    );
    assert.equal((await scrape(app)).value('infermeter_upstream_errors_total', { kind: 'upstream_timeout' }), 0);
  });

  it('infermeter ending an idle client connection (INFERMETER_KEEP_ALIVE_TIMEOUT_MS) closes its upstream connection too', async (t) => {
    const engine = await startThreadServer(t, { threads: 2, workMs: 1, idleMs: 600_000, closeAfterStream: false });
    const app = await startProxy(t, engine.url, { INFERMETER_KEEP_ALIVE_TIMEOUT_MS: '1000' });
    const piped = await pipeline(app.dataUrl, [NON_STREAMED, MODELS, streamed(2)]);
    t.after(() => piped.socket.destroy());
    await piped.all(3);
    assert.equal(engine.stats.connections, 1);
    // The client keeps its connection: infermeter closes it, and with it the upstream one.
    await Promise.race([once(piped.socket, 'close'), new Promise((resolve) => setTimeout(resolve, 20_000).unref())]);
    assert.ok(piped.socket.destroyed, 'infermeter closed the idle client connection');
    await until(
      () => engine.open() === 0 && app.dataPlane?.mirrored().clients === 0,
      () => `the upstream connection closed with it (engine ${engine.open()} open)`,
    );
  });
});
