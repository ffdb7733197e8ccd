// Upstreams that close kept-alive connections (issue 19): llama.cpp says `Keep-Alive:
// timeout=5` and closes about a millisecond after each streamed answer, so the pool's reuse of
// that connection fails before any response byte. Such a request is sent again, once, on a new
// connection, and counted; one whose response began is never sent again.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net, { type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { scrape, startProxy } from '../helpers/proxy-harness.ts';
import { listen } from '../helpers/listen.ts';

const SSE_BODY = 'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: {"choices":[{"index":0,"delta":{"content":"b"}}]}\n\ndata: [DONE]\n\n';

interface Upstream {
  readonly url: string;
  /** Requests answered, and connections opened. */
  readonly stats: { requests: number; connections: number; reset: number };
}

/**
 * An upstream that answers every request well, saying keep-alive; `close` decides what happens to
 * the connection: 'after' closes it 1 ms after each response (llama.cpp), 'reused' resets it when
 * a second request arrives on it (the same race, made certain).
 */
async function startUpstream(t: TestContext, close: 'after' | 'reused' | 'never', keepAlive = 'timeout=5, max=100'): Promise<Upstream> {
  const stats = { requests: 0, connections: 0, reset: 0 };
  const served = new WeakMap<Socket, number>();
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const n = (served.get(socket) ?? 0) + 1;
    served.set(socket, n);
    if (close === 'reused' && n > 1) {
      stats.reset++;
      socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      stats.requests++;
      const body = Buffer.concat(chunks).toString();
      const headers = { 'keep-alive': keepAlive, connection: 'keep-alive' };
      if (body.includes('"stream":true')) {
        res.writeHead(200, { ...headers, 'content-type': 'text/event-stream' });
        res.end(SSE_BODY);
      } else {
        const answer = req.url?.includes('embeddings')
          ? '{"data":[{"embedding":[0.1]}],"usage":{"prompt_tokens":2,"total_tokens":2}}'
          : '{"choices":[{"message":{"content":"ok"}}],"usage":{"prompt_tokens":2,"completion_tokens":1}}';
        res.writeHead(200, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
        res.end(answer);
      }
      if (close === 'after') res.on('finish', () => setTimeout(() => socket.end(), 1));
    });
  });
  server.on('connection', () => stats.connections++);
  server.keepAliveTimeout = 5000;
  return { url: (await listen(t, server)).url, stats };
}

const REQUESTS: ReadonlyArray<{ path: string; body: string }> = [
  { path: '/v1/chat/completions', body: '{"model":"m","stream":true,"messages":[]}' }, // held: usage injected
  { path: '/v1/chat/completions', body: '{"model":"m","messages":[]}' },
  { path: '/v1/embeddings', body: '{"model":"m","input":"hi"}' }, // streamed upstream, kept beside
];

async function send(dataUrl: string, i: number): Promise<number> {
  const { path, body } = REQUESTS[i % REQUESTS.length]!;
  const res = await fetch(`${dataUrl}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  const text = await res.text();
  if (res.status === 200 && path.includes('chat') && body.includes('"stream":true')) assert.match(text, /\[DONE\]/);
  return res.status;
}

/** A non-streamed chat request through `agent`: its status. */
function sendVia(dataUrl: string, agent: http.Agent): Promise<number> {
  const body = REQUESTS[1]!.body;
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${dataUrl}/v1/chat/completions`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

// The stale race's window (50 ms from the request's write) is real time, and these upstreams
// share the test's process: on a loaded machine a turn of its loop can outlast it, and a reset
// that is the race would be taken for a request the upstream worked on. The tests that expect a
// re-send widen it; those that expect none keep it (their upstream takes 300 ms, or answered a
// byte). The bound itself is tested against a given clock (test/unit/stale-race.test.ts).
const WIDE = { staleRaceMs: 10_000 };

describe('retry on a stale upstream connection', () => {
  for (const concurrency of [1, 8]) {
    it(`serves every request in front of an upstream that closes each connection 1 ms after its answer (concurrency ${concurrency})`, async (t) => {
      const upstream = await startUpstream(t, 'after');
      const app = await startProxy(t, upstream.url, {}, WIDE);
      const statuses: number[] = [];
      for (let round = 0; round < 6; round++)
        statuses.push(...(await Promise.all(Array.from({ length: concurrency }, (_, i) => send(app.dataUrl, round * concurrency + i)))));
      assert.deepEqual(
        statuses.filter((s) => s !== 200),
        [],
        `every one answered 200 (${statuses.length} requests)`,
      );
      const m = await scrape(app);
      assert.equal(m.value('infermeter_upstream_errors_total', { kind: 'upstream_unreachable' }), 0);
      assert.equal(m.sum('request_failed_total'), 0);
    });
  }

  it('sends a request whose reused connection fails before any response byte again, once, on a new connection, and counts it', async (t) => {
    const upstream = await startUpstream(t, 'reused');
    const log = join(mkdtempSync(join(tmpdir(), 'infermeter-retry-')), 'access.log');
    t.after(() => rmSync(dirname(log), { recursive: true, force: true, maxRetries: 5 }));
    const app = await startProxy(t, upstream.url, { INFERMETER_ACCESS_LOG: log }, WIDE);
    for (let i = 0; i < 9; i++) assert.equal(await send(app.dataUrl, i), 200, `request ${i}`);
    // Requests alternate: one on a new pooled connection, the next meets it reused and reset,
    // and is served on a connection of its own (not pooled), so the one after opens a new one.
    assert.equal(upstream.stats.requests, 9);
    assert.equal(upstream.stats.reset, 4);
    const m = await scrape(app);
    assert.equal(m.value('infermeter_upstream_retries_total', { reason: 'stale_connection' }), 4);
    assert.equal(m.value('infermeter_upstream_errors_total', { kind: 'upstream_unreachable' }), 0);
    assert.equal(m.sum('request_success_total'), 9);
    // The access log names the re-sent ones (the bench reads them to time them).
    await app.close();
    const resent = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { resent?: string }).resent);
    assert.deepEqual(
      resent.filter((r) => r !== undefined),
      ['stale_connection', 'stale_connection', 'stale_connection', 'stale_connection'],
    );
    assert.equal(resent.length, 9);
  });

  it('never sends a request again once a byte of its response came', async (t) => {
    let requests = 0;
    const server = http.createServer((req, res) => {
      requests++;
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n', () => setTimeout(() => req.socket.destroy(), 5));
    });
    const app = await startProxy(t, (await listen(t, server)).url);
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' });
      assert.equal(res.status, 200);
      await assert.rejects(res.text(), 'the client sees the cut');
    }
    assert.equal(requests, 3, 'each sent once');
    const m = await scrape(app);
    assert.equal(m.value('infermeter_upstream_retries_total', { reason: 'stale_connection' }), 0);
    assert.equal(m.value('request_failed_total', { model_name: 'm' }), 3);
  });

  it("honours the upstream's Keep-Alive timeout hint: a hint too short to reuse safely opens a connection per request", async (t) => {
    const short = await startUpstream(t, 'never', 'timeout=1');
    const app = await startProxy(t, short.url);
    for (let i = 0; i < 4; i++) assert.equal(await send(app.dataUrl, 1), 200);
    assert.equal(short.stats.connections, 4, 'timeout=1: never reused');
    // The client keeps one connection (its upstream connection is its own: the default
    // INFERMETER_UPSTREAM_CONNECTIONS=mirror).
    const long = await startUpstream(t, 'never', 'timeout=5');
    const app2 = await startProxy(t, long.url);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    for (let i = 0; i < 4; i++) assert.equal(await sendVia(app2.dataUrl, agent), 200);
    assert.equal(long.stats.connections, 1, 'timeout=5: one connection, reused');
  });

  // Issue 30, point 5: what the upstream may have worked on, or began to answer, is never sent
  // again. The stale race (a kept-alive connection the upstream closed as it was reused) fails
  // within a millisecond of the request's write; measured through infermeter in one process
  // under an 8-way load, 484 races: 480 under 1 ms, 2 under 2 ms, the slowest 8.4 ms (the event
  // loop's own delay). A request the upstream had for longer than 50 ms is not that race.
  const ATTACKS: ReadonlyArray<{ name: string; answer: (socket: Socket) => void }> = [
    { name: 'works 300 ms, then resets', answer: (socket) => setTimeout(() => socket.resetAndDestroy(), 300) },
    { name: 'works 300 ms, then closes', answer: (socket) => setTimeout(() => socket.end(), 300) },
    { name: 'sends part of a response head, then resets', answer: (socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Ty', () => socket.resetAndDestroy()) },
    { name: 'sends 100 Continue, then resets', answer: (socket) => socket.write('HTTP/1.1 100 Continue\r\n\r\n', () => socket.resetAndDestroy()) },
    {
      name: 'sends 103 Early Hints, then resets',
      answer: (socket) => socket.write('HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n', () => socket.resetAndDestroy()),
    },
  ];
  for (const attack of ATTACKS) {
    it(`never sends a request again when the upstream, on a reused connection, ${attack.name}`, async (t) => {
      const upstream = await startRawKeptUpstream(t, attack.answer);
      const app = await startProxy(t, upstream.url);
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      t.after(() => agent.destroy());
      assert.equal(await sendVia(app.dataUrl, agent), 200, 'the first request, answered');
      assert.equal(await sendVia(app.dataUrl, agent), 502, 'the second: its upstream connection failed');
      assert.equal(upstream.requests(), 2, 'each sent once');
      const m = await scrape(app);
      assert.equal(m.value('infermeter_upstream_retries_total', { reason: 'stale_connection' }), 0);
    });
  }

  it('still sends a request again when its reused connection is reset the instant the request is read (the stale race)', async (t) => {
    const upstream = await startRawKeptUpstream(t, (socket) => socket.resetAndDestroy());
    const app = await startProxy(t, upstream.url, {}, WIDE);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    for (let i = 0; i < 3; i++) assert.equal(await sendVia(app.dataUrl, agent), 200, `request ${i}`);
    const m = await scrape(app);
    assert.ok((m.value('infermeter_upstream_retries_total', { reason: 'stale_connection' }) ?? 0) >= 1, 'retried');
  });
});

/**
 * A raw upstream that answers the first request on each connection well (keep-alive) and hands
 * the connection's later ones to `later`; counts the requests it read.
 */
async function startRawKeptUpstream(t: TestContext, later: (socket: Socket) => void): Promise<{ url: string; requests: () => number }> {
  let requests = 0;
  const server = net.createServer((socket) => {
    socket.on('error', () => {});
    let buffered = Buffer.alloc(0);
    let served = 0;
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = buffered.subarray(0, end).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? '0');
        if (buffered.length < end + 4 + length) return;
        buffered = buffered.subarray(end + 4 + length);
        requests++;
        if (served++ > 0) {
          later(socket);
          return;
        }
        const body = '{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":2,"completion_tokens":1}}';
        socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nKeep-Alive: timeout=5\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      }
    });
  });
  return { url: (await listen(t, server)).url, requests: () => requests };
}
