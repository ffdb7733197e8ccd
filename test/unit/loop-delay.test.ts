// infermeter_event_loop_delay_seconds: a loop held on purpose shows up above the bound it was
// held past, the family is a cumulative histogram that never goes back, and workers' readings
// add up.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from '@prometheus-io/client';
import { addReadings, createLoopDelayMonitor, LOOP_DELAY_BUCKETS, registerLoopDelay, type LoopDelayReading } from '../../src/metrics/own/loop-delay.ts';
import { parseExposition } from '../helpers/exposition.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const hold = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

describe('event-loop delay', () => {
  it('counts a loop held for 40 ms as a delay above 25 ms', async (t) => {
    const monitor = createLoopDelayMonitor();
    t.after(() => monitor.close());
    await sleep(50); // the sampling timer runs
    hold(40); // the 10 ms timer falls due during it: at least 30 ms late
    await sleep(30);
    const r = monitor.read();
    const at25ms = r.buckets[LOOP_DELAY_BUCKETS.indexOf(0.025)]!;
    assert.ok(r.count >= 2, `samples: ${r.count}`);
    assert.ok(at25ms < r.count, `samples within 25 ms: ${at25ms} of ${r.count}: ${JSON.stringify(r)}`);
    assert.ok(r.sum >= 0.03, `sum ${r.sum} s includes the 30 ms or more of delay`);
    for (let i = 1; i < r.buckets.length; i++) assert.ok(r.buckets[i]! >= r.buckets[i - 1]!, `cumulative: ${r.buckets.join(',')}`);
  });

  it('renders one cumulative series per process that never decreases', async () => {
    const registry = new Registry();
    let main: LoopDelayReading = { buckets: LOOP_DELAY_BUCKETS.map((_, i) => (i < 3 ? 5 : 10)), sum: 0.05, count: 10 };
    const workers = addReadings([
      { buckets: LOOP_DELAY_BUCKETS.map(() => 4), sum: 0.001, count: 4 },
      { buckets: LOOP_DELAY_BUCKETS.map(() => 6), sum: 0.002, count: 6 },
    ]);
    registerLoopDelay(registry, () => [
      ['main', main],
      ['workers', workers],
    ]);
    let x = parseExposition(await registry.metrics());
    assert.equal(x.value('infermeter_event_loop_delay_seconds_count', { process: 'main' }), 10);
    assert.equal(x.value('infermeter_event_loop_delay_seconds_bucket', { process: 'main', le: '0.001' }), 5);
    assert.equal(x.value('infermeter_event_loop_delay_seconds_bucket', { process: 'main', le: '+Inf' }), 10);
    assert.equal(x.value('infermeter_event_loop_delay_seconds_count', { process: 'workers' }), 10);
    assert.equal(x.value('infermeter_event_loop_delay_seconds_bucket', { process: 'workers', le: '0.0005' }), 10);
    // A later reading whose rounding puts one sample back below a bound: the counter stays.
    main = { buckets: LOOP_DELAY_BUCKETS.map((_, i) => (i < 3 ? 4 : 11)), sum: 0.06, count: 11 };
    x = parseExposition(await registry.metrics());
    assert.equal(x.value('infermeter_event_loop_delay_seconds_bucket', { process: 'main', le: '0.001' }), 5);
    assert.equal(x.value('infermeter_event_loop_delay_seconds_count', { process: 'main' }), 11);
  });
});
