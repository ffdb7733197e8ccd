// Infermeter.close() beside a scraper that never lets its kept-alive connection go idle for long
// (Prometheus scraping every second): close() ends that connection after the response it is
// serving, instead of waiting for an idle moment that never comes.
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { describe, it } from 'node:test';
import { startInfermeter } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { silentLogger } from '../../src/log.ts';
import type { Metrics } from '../../src/metrics/metrics.ts';
import { startSimServer } from '../../src/sim/model-server.ts';

/** One GET on the agent's kept-alive connection, the body read whole; `answered` hears whether its connection was reused once its head came. */
function get(url: string, agent: Agent, answered: (reused: boolean) => void): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent }, (res) => {
      answered(req.reusedSocket);
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('close() beside a fast scraper', () => {
  it('resolves while a scraper on a one-second loop is being answered on its kept-alive connection, and ends that connection', {
    timeout: 120_000,
  }, async (t) => {
    const sim = await startSimServer({ models: ['m'] });
    t.after(() => sim.close());
    const config = loadConfig({
      INFERMETER_UPSTREAM: sim.url,
      INFERMETER_HOST: '127.0.0.1',
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_UPSTREAM_METRICS: 'off',
    });
    const app = await startInfermeter(config, { log: silentLogger });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());

    // close() starts while the second scrape (on the connection the first left open) is being
    // rendered: that connection is busy then, never idle. (The render once that scrape is sent.)
    const metrics = app.metrics as { -readonly [K in keyof Metrics]: Metrics[K] };
    const renderPieces = metrics.renderPieces;
    let second = false;
    let closed: Promise<void> | undefined;
    metrics.renderPieces = (om) => {
      if (second && closed === undefined) closed = app.close();
      return renderPieces(om);
    };

    const scrapes: boolean[] = [];
    let ended: Error | undefined;
    const loop = (async () => {
      // Bounded: close() ends the loop long before (its connection is closed, a new one refused).
      for (let i = 0; i < 600; i++) {
        try {
          second = i === 1;
          assert.equal(await get(app.metricsUrl!, agent, (reused) => scrapes.push(reused)), 200);
        } catch (error) {
          ended = error as Error;
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 1000)); // the scrape interval
      }
    })();

    // Bounded poll for the second render, which starts close().
    for (let i = 0; i < 600 && closed === undefined; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.ok(closed !== undefined, 'the second scrape was rendered');
    await closed;
    await loop;
    // The second scrape was answered on the kept-alive connection (its head came; its body may be
    // cut short when close() takes long under load), and no third was: close() ended it.
    assert.deepEqual(scrapes, [false, true], `the second scrape was answered on the first's connection, none after (the loop ended on ${ended?.message})`);
  });
});
