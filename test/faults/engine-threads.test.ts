// Neutral in time in front of a thread-per-connection engine (issue 29): llama.cpp's server gives
// each connection a thread until it closes or idles 5 s, and writes a non-streamed answer's head
// and body in two writes with Nagle on. A client must not wait longer through infermeter than it
// waits directly: not for a thread an idle upstream connection holds (a 5 s stall), not for a
// delayed ACK on a reused upstream connection (40 ms) it would not meet directly. The stand-in is
// test/helpers/thread-per-connection.ts. Client, proxy and stand-in share one process on what
// may be a loaded machine, where infermeter's own CPU time stretches with the load (on a 2-core
// machine at a load of 10, proxied p90s of 2 to 3 times direct's, from CPU alone): the times are
// held to the stalls they catch (none over 5 s, no connection waiting 5 s for a thread), not to a
// few milliseconds, and the 40 ms gap to its cause, counted (no upstream connection reused where
// the client's was not); the median, p90 and max margins of issue 29 are a benchmark's, checked
// against the real llama.cpp by `npm run bench:llamacpp` (docs/real-engines.md).
import assert from 'node:assert/strict';
import http from 'node:http';
import type { Socket } from 'node:net';
import { describe, it } from 'node:test';
import { startProxy } from '../helpers/proxy-harness.ts';
import { startThreadServer } from '../helpers/thread-per-connection.ts';

const THREADS = 4;
// Where a test bounds a request's time, the engine keeps an idle connection's thread 30 s (not
// llama.cpp's 5): a request that waited for such a thread waited far longer than the bound, 5 s,
// itself far over what a busy machine makes of one (at a load of 16, up to 1.4 s, which failed
// the bound of 1 s this file had).
const STALL_MS = 30_000;
const BOUND_MS = 5000;
const CHAT = '/v1/chat/completions';
const NON_STREAMED = '{"model":"m","messages":[{"role":"user","content":"hi"}]}';
const STREAMED = '{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}';

/** One request's time from sending to the response's end (ms); rejects on a failure or after 20 s. */
function timed(base: string, path: string, body: string | undefined, agent: http.Agent): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const headers: Record<string, string | number> =
      body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
    const req = http.request(new URL(path, base), { method: body === undefined ? 'GET' : 'POST', agent, headers }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - t0) : reject(new Error(`status ${res.statusCode}`))));
      res.on('error', reject);
    });
    req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', reject);
    req.end(body);
  });
}

/** `requests` requests one after another on `agent`: each answer's `connection` header, and how many connections carried them. */
async function connectionHeaders(
  base: string,
  path: string,
  body: string | undefined,
  requests: number,
  agent: http.Agent,
): Promise<{ headers: string[]; connections: number }> {
  const headers: string[] = [];
  const sockets = new Set<unknown>();
  for (let i = 0; i < requests; i++) {
    headers.push(
      await new Promise<string>((resolve, reject) => {
        const head: Record<string, string | number> =
          body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
        const req = http.request(new URL(path, base), { method: body === undefined ? 'GET' : 'POST', agent, headers: head }, (res) => {
          res.resume();
          res.on('end', () => resolve(String(res.headers.connection)));
          res.on('error', reject);
        });
        req.on('socket', (socket) => sockets.add(socket));
        req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
        req.on('error', reject);
        req.end(body);
      }),
    );
  }
  return { headers, connections: sockets.size };
}

/** `requests` requests, `concurrency` at a time; their times in the order they were sent. */
async function run(base: string, path: string, body: string | undefined, concurrency: number, requests: number, agent: http.Agent): Promise<number[]> {
  const times: number[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < requests) {
      const i = next++;
      times[i] = await timed(base, path, body, agent);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return times;
}

/** Resolves once `done()` holds, checked after each turn of I/O (at most 2000 turns, about 2 s). */
async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 1));
  assert.ok(done(), what);
}

function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

const summary = (v: readonly number[]): string =>
  `p50 ${quantile(v, 0.5).toFixed(1)} / p90 ${quantile(v, 0.9).toFixed(1)} / max ${Math.max(...v).toFixed(1)} ms`;

/** Direct first, then through infermeter; twice, interleaved, so that neither way has the quieter machine. */
async function sideBySide(
  direct: string,
  proxied: string,
  path: string,
  body: string | undefined,
  concurrency: number,
  requests: number,
  keepAlive: boolean,
): Promise<{ direct: number[]; proxied: number[] }> {
  const out = { direct: [] as number[], proxied: [] as number[] };
  for (let round = 0; round < 4; round++) {
    for (const [way, base] of [
      ['direct', direct],
      ['proxied', proxied],
    ] as const) {
      // A fresh-connection client's agent has no socket limit: with one, Node's agent hands a
      // freed socket to a queued request, keep-alive or not.
      const agent = keepAlive ? new http.Agent({ keepAlive, maxSockets: concurrency }) : new http.Agent({ keepAlive });
      try {
        out[way].push(...(await run(base, path, body, concurrency, requests / 4, agent)));
      } finally {
        agent.destroy();
      }
    }
  }
  return out;
}

describe('in front of a thread-per-connection engine (4 threads, 5 s idle or 30 s where a time is bounded, Nagle on)', () => {
  for (const [kind, body] of [
    ['non-streamed', NON_STREAMED],
    ['streamed', STREAMED],
  ] as const) {
    it(`fresh-connection clients, ${kind}, concurrency 6: no request waits for a thread an idle upstream connection holds`, async (t) => {
      const engine = await startThreadServer(t, { threads: THREADS, workMs: 10, idleMs: STALL_MS });
      const app = await startProxy(t, engine.url);
      const times = await sideBySide(engine.url, app.dataUrl, CHAT, body, 6, 48, false);
      const message = `direct ${summary(times.direct)}; through infermeter ${summary(times.proxied)}`;
      assert.deepEqual(
        times.proxied.filter((ms) => ms > BOUND_MS),
        [],
        `no request over 5 s (${message})`,
      );
      assert.ok(engine.stats.maxQueueMs < BOUND_MS, `no connection waited 5 s for a thread (${engine.stats.maxQueueMs.toFixed(0)} ms)`);
    });
  }

  it('fresh-connection clients, the pass-through route (GET /v1/models), concurrency 6: no request over 5 s', async (t) => {
    const engine = await startThreadServer(t, { threads: THREADS, workMs: 10, idleMs: STALL_MS });
    const app = await startProxy(t, engine.url);
    const times = await sideBySide(engine.url, app.dataUrl, '/v1/models', undefined, 6, 48, false);
    const message = `direct ${summary(times.direct)}; through infermeter ${summary(times.proxied)}`;
    assert.deepEqual(
      times.proxied.filter((ms) => ms > BOUND_MS),
      [],
      `no request over 5 s (${message})`,
    );
    assert.ok(engine.stats.maxQueueMs < BOUND_MS, `no connection waited 5 s for a thread (${engine.stats.maxQueueMs.toFixed(0)} ms)`);
  });

  it("a client connection's upstream connection is its own: reused for its next requests, closed when it closes; INFERMETER_UPSTREAM_CONNECTIONS=close opens one per request", async (t) => {
    const engine = await startThreadServer(t, { threads: THREADS, workMs: 1 });
    const app = await startProxy(t, engine.url);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const clientSockets = new Set<unknown>();
    agent.on('free', (socket) => clientSockets.add(socket));
    await run(app.dataUrl, CHAT, NON_STREAMED, 1, 3, agent);
    await run(app.dataUrl, '/v1/models', undefined, 1, 2, agent);
    if (engine.stats.connections !== 1) {
      // Seen once in a loaded suite (2 connections), never reproduced alone: what infermeter re-sent says why.
      const retries = (await (await fetch(app.metricsUrl!)).text()).split('\n').filter((l) => l.startsWith('infermeter_upstream_retries_total'));
      assert.fail(
        `one client connection, one upstream connection (both routes): ${engine.stats.connections} for ${engine.stats.requests} requests on ${clientSockets.size} client connections; ${retries.join('; ') || 'no retries'}`,
      );
    }
    assert.equal(engine.open(), 1);
    agent.destroy();
    await until(() => engine.open() === 0, 'the upstream connection closes with the client connection');
    const closing = await startThreadServer(t, { threads: THREADS, workMs: 1 });
    const app2 = await startProxy(t, closing.url, { INFERMETER_UPSTREAM_CONNECTIONS: 'close' });
    const kept = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => kept.destroy());
    await run(app2.dataUrl, CHAT, NON_STREAMED, 1, 3, kept);
    assert.equal(closing.stats.connections, 3, 'close: a connection per request');
  });

  it("an idle client connection outlives the engine's idle close: the client's next request reuses it (a new upstream connection under it); INFERMETER_KEEP_ALIVE_TIMEOUT_MS closes it", async (t) => {
    const engine = await startThreadServer(t, { threads: THREADS, workMs: 1, idleMs: 50 });
    const app = await startProxy(t, engine.url);
    const answer = (base: string, agent: http.Agent): Promise<{ reused: boolean; socket: Socket }> =>
      new Promise((resolve, reject) => {
        const req = http.request(new URL(CHAT, base), { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
          res.resume();
          res.on('end', () =>
            res.statusCode === 200 ? resolve({ reused: req.reusedSocket, socket: req.socket! }) : reject(new Error(`status ${res.statusCode}`)),
          );
        });
        req.on('error', reject);
        req.end(NON_STREAMED);
      });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    const first = await answer(app.dataUrl, agent);
    await until(() => engine.open() === 0, 'the engine closed its idle connection (50 ms)');
    const second = await answer(app.dataUrl, agent);
    assert.equal(second.reused, true, 'the client kept its connection to infermeter');
    assert.equal(second.socket, first.socket);
    assert.equal(engine.stats.connections, 2, 'and infermeter opened the upstream connection again');
    // The variable is what closes an idle client connection (Node adds its own 1 s margin).
    const short = await startProxy(t, engine.url, { INFERMETER_KEEP_ALIVE_TIMEOUT_MS: '1000' });
    const shortAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => shortAgent.destroy());
    const idle = (await answer(short.dataUrl, shortAgent)).socket;
    const since = performance.now();
    await new Promise((resolve) => (idle.destroyed ? resolve(undefined) : idle.once('close', resolve)));
    assert.ok(performance.now() - since >= 900, 'not closed before its timeout');
  });

  it('closing infermeter ends a kept-alive client connection as soon as its answer in flight is done, not at the keep-alive timeout', async (t) => {
    const engine = await startThreadServer(t, { threads: THREADS, workMs: 150 });
    const app = await startProxy(t, engine.url, { INFERMETER_KEEP_ALIVE_TIMEOUT_MS: '3600000' });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    const socket = new Promise<Socket>((resolve, reject) => {
      const req = http.request(new URL(CHAT, app.dataUrl), { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
        res.resume();
        res.on('end', () => resolve(req.socket!));
      });
      req.on('error', reject);
      req.end(NON_STREAMED);
    });
    await until(() => engine.stats.connections === 1, 'the request reached the engine');
    const closed = app.close();
    const client = await socket;
    // Without it, the connection would stay open for the hour's keep-alive, and close() with it.
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      Promise.all([new Promise((resolve) => (client.destroyed ? resolve(undefined) : client.once('close', resolve))), closed]).then(() => 'closed'),
      new Promise((resolve) => (timer = setTimeout(resolve, 30_000, 'still open after 30 s'))),
    ]);
    clearTimeout(timer);
    assert.equal(outcome, 'closed');
  });

  it("the engine scraper's connection is not open between scrapes, and a slow scrape delays no client", async (t) => {
    // The first scrape answers after 2 s: a request that waited for its thread waited that long
    // at least, far over what a busy machine makes of one (at a load of 11, beside the type check
    // and two CPU hogs, up to 572 ms, which failed the 500 ms bound of a 600 ms scrape). The
    // clients run during it; the two after it, at once, show no scrape reuses a connection.
    const engine = await startThreadServer(t, { threads: THREADS, workMs: 10, metricsDelayMs: 2000, slowScrapes: 1 });
    const app = await startProxy(t, engine.url, {
      INFERMETER_UPSTREAM_METRICS: `${engine.url}/metrics`,
      INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '3600',
      INFERMETER_UPSTREAM_METRICS_TIMEOUT_MS: '10000',
    });
    const scraper = app.metrics.engineScraper!;
    // Two clients at a time (the scrape takes a third thread of four), during the slow scrape.
    const scrapes = (async () => {
      for (let i = 0; i < 3; i++) await scraper.scrapeOnce();
    })();
    const during = await run(app.dataUrl, CHAT, NON_STREAMED, 2, 40, new http.Agent({ keepAlive: false }));
    await scrapes;
    assert.ok(engine.stats.scrapes >= 3, `scraped (${engine.stats.scrapes})`);
    assert.equal(engine.stats.scrapesOnKeptConnection, 0, 'every scrape on a connection of its own, closed after it');
    await until(() => engine.openScrapeConnections() === 0, 'no scrape connection left open');
    assert.deepEqual(
      during.filter((ms) => ms >= 2000),
      [],
      `no client request waited for a scrape (${summary(during)})`,
    );
  });

  it("kept-alive clients: an upstream answer that closes its connection (cpp-httplib's last of `max` requests) closes the client's after it, said in the same head, as directly", async (t) => {
    const engine = await startThreadServer(t, { threads: THREADS, workMs: 1, maxRequests: 3 });
    const app = await startProxy(t, engine.url);
    for (const [path, body] of [
      [CHAT, NON_STREAMED],
      ['/v1/models', undefined],
    ] as const) {
      const seen: Record<string, { headers: string[]; connections: number }> = {};
      for (const [way, base] of [
        ['direct', engine.url],
        ['proxied', app.dataUrl],
      ] as const) {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        try {
          seen[way] = await connectionHeaders(base, path, body, 7, agent);
        } finally {
          agent.destroy();
        }
      }
      assert.deepEqual(
        seen.direct!.headers,
        ['keep-alive', 'keep-alive', 'close', 'keep-alive', 'keep-alive', 'close', 'keep-alive'],
        `${path}: the stand-in closes after 3`,
      );
      assert.deepEqual(seen.proxied, seen.direct, `${path}: the client's connections through infermeter are those it has directly`);
    }
  });

  it("kept-alive clients, streamed: the engine's unannounced close after each answer costs the client no request; each next one goes out on a new upstream connection, as the client's would directly", async (t) => {
    const engine = await startThreadServer(t, { threads: THREADS, workMs: 1 });
    const app = await startProxy(t, engine.url);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    const seen = await connectionHeaders(app.dataUrl, CHAT, STREAMED, 6, agent);
    assert.equal(seen.headers.length, 6, 'every request answered');
    assert.equal(engine.stats.connections, 6, 'a new upstream connection per streamed answer: the engine closed each');
  });

  // The delayed-ACK gap (40 ms) comes of an upstream connection reused where the client's was
  // not: asserted on the connections the engine saw, which do not depend on the machine's speed.
  // The medians side by side are `npm run bench:llamacpp`'s (its connections table's margins).
  it('fresh-connection clients, non-streamed, one after another: each request on an upstream connection of its own, as directly (no reused connection to meet a delayed ACK on)', async (t) => {
    const engine = await startThreadServer(t, { threads: THREADS, workMs: 1 });
    const app = await startProxy(t, engine.url);
    const seen: Record<string, number> = {};
    for (const [way, base] of [
      ['direct', engine.url],
      ['proxied', app.dataUrl],
    ] as const) {
      const agent = new http.Agent({ keepAlive: false });
      const before = engine.stats.connections;
      try {
        await run(base, CHAT, NON_STREAMED, 1, 30, agent);
      } finally {
        agent.destroy();
      }
      seen[way] = engine.stats.connections - before;
    }
    assert.deepEqual(seen, { direct: 30, proxied: 30 }, 'upstream connections opened for 30 requests on fresh client connections');
  });

  it("kept-alive clients, non-streamed, one after another and at the engine's threads: as many upstream connections as client connections, as directly", async (t) => {
    const engine = await startThreadServer(t, { threads: THREADS, workMs: 1, idleMs: STALL_MS });
    const app = await startProxy(t, engine.url);
    for (const concurrency of [1, THREADS]) {
      const times = await sideBySide(engine.url, app.dataUrl, CHAT, NON_STREAMED, concurrency, 24, true);
      const message = `concurrency ${concurrency}: direct ${summary(times.direct)}; through infermeter ${summary(times.proxied)}`;
      assert.deepEqual(
        times.proxied.filter((ms) => ms > BOUND_MS),
        [],
        `no request over 5 s (${message})`,
      );
      // A client connection kept is an upstream connection kept (its own): counted on one round.
      const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
      const clientSockets = new Set<unknown>();
      agent.on('free', (socket) => clientSockets.add(socket));
      const before = engine.stats.connections;
      try {
        await run(app.dataUrl, CHAT, NON_STREAMED, concurrency, 24, agent);
      } finally {
        agent.destroy();
      }
      assert.equal(engine.stats.connections - before, clientSockets.size, `upstream connections for ${clientSockets.size} client connections (${message})`);
      assert.ok(clientSockets.size <= concurrency, `${clientSockets.size} client connections at concurrency ${concurrency}`);
    }
  });
});
