// /ready follows the model server (INFERMETER_READY_FOLLOWS_UPSTREAM, on by default): 503 while
// it cannot be reached, 200 again once it can; /health stays liveness. In one process and with
// workers (the primary answers /ready), and the old behaviour with the variable off. News goes
// stale after 2 s (STALE_MS): infermeter's clock is moved past it rather than waited for.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { Infermeter } from '../../src/app.ts';
import { startClusterPrimary } from '../../src/cluster/primary.ts';
import { loadConfig } from '../../src/config/config.ts';
import { silentLogger } from '../../src/log.ts';
import { startSimServer, type SimServer } from '../../src/sim/model-server.ts';
import { freePort } from '../helpers/listen.ts';
import { clusterEnv, startProxy } from '../helpers/proxy-harness.ts';

/** The model server on a fixed port, so that it can be stopped and started again where infermeter expects it. */
async function upstreamAt(t: TestContext): Promise<{ url: string; stop(): Promise<void>; start(): Promise<void> }> {
  const port = await freePort();
  let sim: SimServer | undefined = await startSimServer({}, '127.0.0.1', port);
  t.after(() => sim?.close());
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      await sim?.close();
      sim = undefined;
    },
    async start() {
      sim = await startSimServer({}, '127.0.0.1', port);
    },
  };
}

/** News older than this is stale, and a /ready asked then probes first (upstream-readiness.ts's STALE_MS, documented in deploy.md). */
const STALE_MS = 2000;

/** infermeter's clock: the real one, moved forward by `pass` where a test would otherwise wait for the news to go stale. */
function movableClock(): { now: () => number; pass: (ms: number) => void } {
  let ahead = 0;
  return { now: () => performance.now() + ahead, pass: (ms) => (ahead += ms) };
}

const status = async (url: string): Promise<number> => {
  const res = await fetch(url);
  await res.arrayBuffer();
  return res.status;
};

/**
 * Polls /ready until it answers `want`, a bounded number of times (100 ms apart: 60 s in all, so
 * that a slow machine does not fail it; with the news made stale first, the first ask probes).
 */
async function readyBecomes(app: Pick<Infermeter, 'managementUrl'>, want: number): Promise<void> {
  let last = 0;
  for (let i = 0; i < 600; i++) {
    last = await status(`${app.managementUrl}/ready`);
    if (last === want) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail(`/ready answered ${last}, not ${want}`);
}

const chat = (app: Infermeter): Promise<number> =>
  fetch(`${app.dataUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim-llama-8b', messages: [{ role: 'user', content: 'hi' }] }),
  }).then(async (r) => {
    await r.arrayBuffer();
    return r.status;
  });

describe('/ready follows the model server', () => {
  it('turns 503 when the upstream stops (at once after a request that could not connect; by the probe without traffic) and 200 when it returns', async (t) => {
    const upstream = await upstreamAt(t);
    const clock = movableClock();
    const app = await startProxy(t, upstream.url, {}, { clock: clock.now });
    assert.equal(await status(`${app.managementUrl}/ready`), 200);
    assert.equal(await chat(app), 200);

    // Without traffic: the probe finds it gone, once the last news is stale.
    await upstream.stop();
    clock.pass(STALE_MS);
    await readyBecomes(app, 503);
    const body = (await (await fetch(`${app.managementUrl}/ready`)).json()) as { reason?: string };
    assert.equal(body.reason, 'the model server cannot be reached');
    assert.equal(await status(`${app.managementUrl}/health`), 200, '/health stays liveness');
    await upstream.start();
    clock.pass(STALE_MS);
    await readyBecomes(app, 200);

    // With traffic: the request that could not connect says so before its 502 is answered.
    await upstream.stop();
    assert.equal(await chat(app), 502);
    assert.equal(await status(`${app.managementUrl}/ready`), 503);
    await upstream.start();
    clock.pass(STALE_MS);
    await readyBecomes(app, 200);
    assert.equal(await chat(app), 200);
  });

  it('is not ready from the start when the upstream is down at start', async (t) => {
    const upstream = await upstreamAt(t);
    await upstream.stop();
    const clock = movableClock();
    const app = await startProxy(t, upstream.url, {}, { clock: clock.now });
    assert.equal(await status(`${app.managementUrl}/ready`), 503, 'the first probe is done before /ready answers 200');
    await upstream.start();
    clock.pass(STALE_MS);
    await readyBecomes(app, 200);
  });

  it('with INFERMETER_READY_FOLLOWS_UPSTREAM=off stays 200 while every client gets a 502 (the old behaviour)', async (t) => {
    const upstream = await upstreamAt(t);
    await upstream.stop();
    const app = await startProxy(t, upstream.url, { INFERMETER_READY_FOLLOWS_UPSTREAM: 'off' });
    assert.equal(await chat(app), 502);
    assert.equal(await status(`${app.managementUrl}/ready`), 200);
  });

  it('with workers, the primary follows it too', { timeout: 120_000 }, async (t) => {
    const upstream = await upstreamAt(t);
    const env = clusterEnv(upstream.url, { INFERMETER_LOG_LEVEL: 'warn' });
    const clock = movableClock();
    const app = await startClusterPrimary(loadConfig(env), env, { log: silentLogger, workers: 2, clock: clock.now });
    t.after(() => app.close());
    assert.equal(await status(`${app.managementUrl}/ready`), 200);
    await upstream.stop();
    // A worker's request that could not connect reaches the primary over the bus: /ready turns
    // 503 with it or with the primary's own probe, whichever comes first.
    assert.equal(await chat(app), 502);
    await readyBecomes(app, 503);
    await upstream.start();
    clock.pass(STALE_MS);
    await readyBecomes(app, 200);
    assert.equal(await chat(app), 200);
  });
});
