// The process families (process_*, nodejs_*) as every Prometheus client library names them:
// served in every dialect's scrape, with sane values, and with workers each worker's under its
// `worker` label beside the primary's own.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startClusterPrimary } from '../../src/cluster/primary.ts';
import { loadConfig } from '../../src/config/config.ts';
import { silentLogger } from '../../src/log.ts';
import { startSimServer } from '../../src/sim/model-server.ts';
import { parseExposition, type Exposition } from '../helpers/exposition.ts';
import { clusterEnv, scrape, startProxy } from '../helpers/proxy-harness.ts';

const GiB = 1024 ** 3;

/** One process's series of the families an operator alerts on, their values in sane ranges. */
function assertSane(e: Exposition, labels: Record<string, string>, what: string): void {
  const v = (name: string) => {
    const value = e.value(name, labels);
    assert.ok(value !== undefined, `${what}: ${name}${JSON.stringify(labels)} is served`);
    return value;
  };
  const rss = v('process_resident_memory_bytes');
  assert.ok(rss > 1024 * 1024 && rss < 64 * GiB, `${what}: resident memory ${rss}`);
  const lag = v('nodejs_eventloop_lag_seconds');
  assert.ok(lag >= 0 && lag < 60, `${what}: event-loop lag ${lag}`);
  // The statistics of the samples since the last collection: NaN when none came since (prom-client's).
  for (const q of ['p50', 'p90', 'p99', 'min', 'max', 'mean', 'stddev']) {
    const x = v(`nodejs_eventloop_lag_${q}_seconds`);
    assert.ok(Number.isNaN(x) || (x >= 0 && x < 60), `${what}: lag ${q} ${x}`);
  }
  const start = v('process_start_time_seconds');
  assert.ok(start > Date.now() / 1000 - 86_400 && start <= Date.now() / 1000 + 1, `${what}: start time ${start}`);
  assert.ok(v('process_cpu_seconds_total') > 0, `${what}: CPU`);
  assert.ok(v('process_cpu_user_seconds_total') >= 0 && v('process_cpu_system_seconds_total') >= 0);
  assert.ok(v('process_open_fds') > 0 && v('process_max_fds') >= v('process_open_fds'), `${what}: file descriptors`);
  assert.ok(v('nodejs_heap_size_used_bytes') > 0 && v('nodejs_heap_size_used_bytes') <= v('nodejs_heap_size_total_bytes'), `${what}: heap`);
  assert.ok(v('nodejs_external_memory_bytes') >= 0);
  assert.ok(v('nodejs_active_handles_total') > 0, `${what}: handles`);
  assert.ok(
    e.series('nodejs_version_info').some((s) => s.labels.version === process.version && Object.entries(labels).every(([k, x]) => s.labels[k] === x)),
    `${what}: the Node version`,
  );
  assert.match(e.text, /^# TYPE nodejs_gc_duration_seconds histogram$/m);
}

describe('process metrics', () => {
  it('are served in every dialect, with sane values', async (t) => {
    const sim = await startSimServer();
    t.after(() => sim.close());
    for (const dialects of ['mindie', 'aom', 'vllm', 'otel']) {
      const app = await startProxy(t, sim.url, { INFERMETER_DIALECTS: dialects });
      const e = await scrape(app);
      assertSane(e, {}, dialects);
      assert.deepEqual(e.duplicates(), []);
    }
  });

  it('with 2 workers: the primary\'s own and each worker\'s, under worker="1" and worker="2"', { timeout: 120_000 }, async (t) => {
    const sim = await startSimServer();
    t.after(() => sim.close());
    const env = clusterEnv(sim.url, { INFERMETER_LOG_LEVEL: 'warn' });
    const app = await startClusterPrimary(loadConfig(env), env, { log: silentLogger, workers: 2 });
    t.after(() => app.close());
    const e = parseExposition(await (await fetch(app.metricsUrl!)).text());
    assertSane(e, {}, 'primary');
    assertSane(e, { worker: '1' }, 'worker 1');
    assertSane(e, { worker: '2' }, 'worker 2');
    assert.deepEqual(
      e
        .series('process_start_time_seconds')
        .map((s) => s.labels.worker ?? 'primary')
        .sort(),
      ['1', '2', 'primary'],
    );
    assert.deepEqual(e.duplicates(), []);
  });
});
