import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createRecentRequests } from '../../src/metrics/windows/recent-requests.ts';
import { seededRandom } from '../helpers/random.ts';

describe('recent requests window', () => {
  it('averages each figure over the requests of the window that have it', () => {
    const w = createRecentRequests(3);
    assert.deepEqual(w.averages(), { ttftMs: undefined, tbtMs: undefined });
    w.add(100, undefined); // a non-streamed answer has no TBT
    w.add(200, 10);
    assert.deepEqual(w.averages(), { ttftMs: 150, tbtMs: 10 });
    w.add(undefined, undefined); // a failure before any token
    w.add(600, 30); // the first request leaves the window
    assert.deepEqual(w.averages(), { ttftMs: 400, tbtMs: 20 });
  });

  it('stays equal to the mean of the last N over a long run (drift is rebuilt away)', () => {
    const n = 50;
    const w = createRecentRequests(n);
    const random = seededRandom(7);
    const all: Array<[number | undefined, number | undefined]> = [];
    for (let i = 0; i < 10_000; i++) {
      const pair: [number | undefined, number | undefined] = [random() < 0.9 ? random() * 5000 : undefined, random() < 0.8 ? random() * 80 : undefined];
      all.push(pair);
      w.add(...pair);
      if (i % 997 === 0 || i === 9_999) {
        const last = all.slice(-n);
        const mean = (xs: Array<number | undefined>) => {
          const v = xs.filter((x): x is number => x !== undefined);
          return v.length === 0 ? undefined : v.reduce((a, b) => a + b, 0) / v.length;
        };
        const got = w.averages();
        const want = { ttftMs: mean(last.map((p) => p[0])), tbtMs: mean(last.map((p) => p[1])) };
        const close = (a: number | undefined, b: number | undefined) => (a === undefined ? b === undefined : b !== undefined && Math.abs(a - b) <= 1e-9 * b);
        assert.ok(close(got.ttftMs, want.ttftMs), `ttft at ${i}: ${got.ttftMs} vs ${want.ttftMs}`);
        assert.ok(close(got.tbtMs, want.tbtMs), `tbt at ${i}: ${got.tbtMs} vs ${want.tbtMs}`);
      }
    }
  });
});
