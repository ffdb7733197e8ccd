// The ranges the configuration table (docs/configuration.md) states, at their edges: the smallest and largest
// values are taken as given, one past either end stops the start naming the variable. A test of
// a far-off value only (0, or 99999999) passes a range that is off by one.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { loadConfig, type Config } from '../../src/config/config.ts';

/** Variable, range as docs/configuration.md states it, and where the value lands. */
const RANGES: ReadonlyArray<readonly [variable: string, min: number, max: number, read: (c: Config) => number]> = [
  ['INFERMETER_THROUGHPUT_WINDOW_SECONDS', 1, 3600, (c) => c.throughputWindowSeconds],
  ['INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS', 1, 3600, (c) => c.upstreamMetricsIntervalSeconds],
  ['INFERMETER_UPSTREAM_METRICS_TIMEOUT_MS', 100, 60000, (c) => c.upstreamMetricsTimeoutMs],
  ['INFERMETER_RELAY_INTERVAL_SECONDS', 1, 3600, (c) => c.relayIntervalSeconds],
  ['INFERMETER_JSON_WINDOW', 1, 1000000, (c) => c.jsonWindow],
  ['INFERMETER_WORKERS', 1, 256, (c) => c.workers],
  ['INFERMETER_AOM_PERIOD_SECONDS', 1, 3600, (c) => c.aom.periodSeconds],
];

const README = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');

describe('configuration ranges, at their edges', () => {
  for (const [variable, min, max, read] of RANGES) {
    it(`${variable}: ${min} to ${max}`, () => {
      const row = README.split('\n').find((l) => l.startsWith(`| \`${variable}\` |`)) ?? '';
      assert.match(row, new RegExp(`\\b${min} to ${max}\\b`), `docs/configuration.md states the range: ${row}`);
      for (const edge of [min, max]) assert.equal(read(loadConfig({ [variable]: String(edge) })), edge, `${variable}=${edge} is taken`);
      for (const outside of [min - 1, max + 1]) {
        assert.throws(() => loadConfig({ [variable]: String(outside) }), (e: Error) => e.message.includes(`${variable}: expected an integer from ${min} to ${max}`), `${variable}=${outside} stops the start`);
      }
    });
  }
});
