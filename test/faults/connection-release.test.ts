// What outlives one request is given back once it ends, whoever ends it (issue 53): a client
// connection closed by infermeter's own keep-alive timeout, or reset by the client, releases its
// upstream connection (the engine's count of open connections back to 0, as infermeter's own
// counts). The engine is the thread-per-connection stand-in with an idle timeout of a minute, so
// that only infermeter can close the upstream side within the test.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { startProxy } from '../helpers/proxy-harness.ts';
import { startThreadServer, type ThreadServer } from '../helpers/thread-per-connection.ts';
import type { Infermeter } from '../../src/app.ts';

const CHAT = '/v1/chat/completions';
const BODY = {
  'non-streamed': '{"model":"m","messages":[{"role":"user","content":"hi"}]}',
  streamed: '{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}',
};

/** One request on `agent`; resolves with its socket once the answer ended. */
function answer(base: string, agent: http.Agent, body: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(CHAT, base), { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(req.socket!) : reject(new Error(`status ${res.statusCode}`))));
    });
    req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', reject);
    req.end(body);
  });
}

/** Polls `done` every 10 ms for at most 10 s; fails saying what it waited for and what it saw. */
async function until(done: () => boolean, what: () => string): Promise<void> {
  for (let i = 0; i < 1000 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(done(), `waited 10 s for ${what()}`);
}

/** Every connection, on both sides, given back. */
async function released(engine: ThreadServer, app: Infermeter): Promise<void> {
  const plane = app.dataPlane!;
  const state = () =>
    `engine open ${engine.open()}, infermeter: clients ${plane.connections()}, upstream ${plane.upstreamConnections()}, mirrored ${JSON.stringify(plane.mirrored())}`;
  await until(
    () => engine.open() === 0 && plane.connections() === 0 && plane.upstreamConnections() === 0,
    () => `every connection closed (${state()})`,
  );
  assert.deepEqual(plane.mirrored(), { clients: 0, waiting: 0 }, state());
}

async function setUp(t: TestContext, env: Record<string, string> = {}, threads = 4) {
  const engine = await startThreadServer(t, { threads, workMs: 1, idleMs: 60_000, closeAfterStream: false });
  const app = await startProxy(t, engine.url, env);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  return { engine, app, agent };
}

// Each test has its own infermeter and engine, and most wait for a keep-alive timeout: side by side.
describe('connections released once their requests end', { concurrency: true }, () => {
  for (const kind of ['non-streamed', 'streamed'] as const) {
    it(`${kind}: a kept-alive client connection that infermeter's keep-alive timeout closes releases its upstream connection`, async (t) => {
      const { engine, app, agent } = await setUp(t, { INFERMETER_KEEP_ALIVE_TIMEOUT_MS: '1000' });
      const socket = await answer(app.dataUrl, agent, BODY[kind]);
      assert.equal(engine.stats.connections, 1);
      await new Promise((resolve) => (socket.destroyed ? resolve(undefined) : socket.once('close', resolve)));
      await released(engine, app);
    });

    it(`${kind}: a kept-alive client connection reset by the client releases its upstream connection`, async (t) => {
      const { engine, app, agent } = await setUp(t, { INFERMETER_KEEP_ALIVE_TIMEOUT_MS: '3600000' });
      const socket = await answer(app.dataUrl, agent, BODY[kind]);
      assert.equal(engine.stats.connections, 1);
      socket.resetAndDestroy();
      await released(engine, app);
    });
  }

  it('many kept-alive clients, then all gone: every upstream connection released, no client left in the mirror map', async (t) => {
    // A thread each (a connection holds its thread until it closes).
    const { engine, app } = await setUp(t, { INFERMETER_KEEP_ALIVE_TIMEOUT_MS: '3600000' }, 8);
    const agents = Array.from({ length: 8 }, () => new http.Agent({ keepAlive: true, maxSockets: 1 }));
    const sockets = await Promise.all(agents.map((agent, i) => answer(app.dataUrl, agent, BODY[i % 2 === 0 ? 'streamed' : 'non-streamed'])));
    assert.equal(app.dataPlane!.mirrored().clients, 8, 'each client connection has its own upstream connection while it is open');
    sockets.forEach((socket, i) => {
      if (i % 2 === 0) socket.resetAndDestroy();
      else socket.end();
    });
    for (const agent of agents) agent.destroy();
    await released(engine, app);
  });
});
