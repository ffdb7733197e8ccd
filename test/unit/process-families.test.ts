// The process families' event-loop lag statistics when no sample came since the last collection.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { processMetrics } from '../../src/metrics/own/process-families.ts';

const STATISTICS = ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99'];

function lag(reading: Awaited<ReturnType<ReturnType<typeof processMetrics>['read']>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const q of STATISTICS) out[q] = reading.find((m) => m.name === `nodejs_eventloop_lag_${q}_seconds`)!.values[0]!.value;
  return out;
}

describe('process families', () => {
  it("give NaN for every lag statistic of no samples, not the empty histogram's 2^63 ns minimum", async () => {
    const pm = processMetrics();
    // A few turns of the loop, so that the first reading has samples.
    for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 15));
    const first = lag(await pm.read());
    for (const q of STATISTICS) assert.ok(first[q]! >= 0 && first[q]! < 60, `${q} with samples: ${first[q]}`);
    // Only microtasks between the two collections: the loop-delay timer cannot record a sample.
    const second = lag(await pm.read());
    for (const q of STATISTICS) assert.ok(Number.isNaN(second[q]), `${q} of no samples: ${second[q]}`);
  });
});
