// infermeter loads the parts of @prometheus-io/client it uses from their files
// (src/prometheus-parts.ts): each class must be the very one the index exports, and the
// process families the ones collectDefaultMetrics registers, in its order, with the client's CPU
// counters' names, help, type and values, so that a client that moves or changes one fails here
// rather than in production.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import * as client from '@prometheus-io/client';
import { processMetrics } from '../../src/metrics/own/process-families.ts';
import { prometheus } from '../../src/prometheus-parts.ts';

const require = createRequire(import.meta.url);
const lib = (file: string): unknown => require(`@prometheus-io/client/lib/${file}.js`);

describe("@prometheus-io/client's parts, loaded from their files", () => {
  it('are the classes the package exports: Registry, Counter, Gauge, Summary', () => {
    const parts = prometheus();
    assert.equal(parts.Registry, client.Registry);
    assert.equal(parts.Counter, client.Counter);
    assert.equal(parts.Gauge, client.Gauge);
    assert.equal(parts.Summary, client.Summary);
  });

  it("register collectDefaultMetrics' families in its order, the CPU counters with the client's name, help and type", () => {
    // The client's list of its default modules, and each module's families, as they are registered.
    const { metricsList } = lib('defaultMetrics') as { metricsList: string[] };
    const expected = metricsList
      .filter((m) => m !== 'processResources' || typeof process.getActiveResourcesInfo === 'function')
      .flatMap((m) => (lib(`metrics/${m}`) as { metricNames: string[] }).metricNames);
    const families = processMetrics().families;
    assert.deepEqual(
      families.map((f) => f.name),
      expected,
    );
    // The client's own CPU counters, in a registry of their own (they start no monitor).
    const theirs = new client.Registry();
    (lib('metrics/processCpuTotal') as (r: client.Registry, c: object) => void)(theirs, {});
    const cpu = theirs.getMetricsAsArray().map((m) => {
      const { name, help, type } = m as unknown as { name: string; help: string; type: string };
      return { name, help, type };
    });
    assert.equal(cpu.length, 3);
    assert.deepEqual(
      families.filter((f) => f.name.startsWith('process_cpu_')),
      cpu,
    );
  });

  it('count CPU seconds that only grow, the total the sum of user and system', async () => {
    const cpuOf = async () => {
      const reading = await processMetrics().read();
      const value = (name: string) => reading.find((m) => m.name === name)!.values[0]!.value;
      return { user: value('process_cpu_user_seconds_total'), system: value('process_cpu_system_seconds_total'), total: value('process_cpu_seconds_total') };
    };
    const first = await cpuOf();
    // Some CPU between the readings.
    const until = process.cpuUsage().user + 20_000;
    while (process.cpuUsage().user < until) Math.sqrt(Math.random());
    const second = await cpuOf();
    for (const r of [first, second]) assert.ok(Math.abs(r.total - (r.user + r.system)) < 1e-6, `total ${r.total} = user ${r.user} + system ${r.system}`);
    assert.ok(second.user >= first.user + 0.02, `user ${first.user} s, then ${second.user} s after 20 ms of CPU`);
    assert.ok(second.system >= first.system, `system ${first.system} s, then ${second.system} s`);
  });
});
