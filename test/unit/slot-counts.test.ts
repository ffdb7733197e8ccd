// The dashboard's per-slot counts (metrics/windows/slot-counts.ts): what is added counts while its
// slot is inside the window, a place reused for a later slot starts from zero, and the sums are
// those of a plain list of (time, field, value) kept whole, at any time, in a seeded run.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSlotCounts } from '../../src/metrics/windows/slot-counts.ts';
import { seededRandom } from '../helpers/random.ts';

describe('slot counts', () => {
  it('counts a slot while it is in the window, and a reused place from zero', () => {
    const c = createSlotCounts(2, { windowSeconds: 10, slotSeconds: 5 });
    c.counts[c.at(1_000)]! += 3;
    c.counts[c.at(6_000) + 1]!++;
    assert.deepEqual(c.sums(6_000), [3, 1]);
    assert.deepEqual(c.sums(10_000), [0, 1], 'the slot of 0-5 s has left the window of 10 s');
    c.counts[c.at(11_000)]!++; // the place of 0-5 s again, zeroed before it counts 10-15 s
    assert.deepEqual(c.sums(11_000), [1, 1]);
    assert.deepEqual(c.sums(100_000), [0, 0]);
  });

  it('sums what a whole list of the additions sums over the window, at every time', () => {
    const random = seededRandom(3);
    const options = { windowSeconds: 60, slotSeconds: 5 };
    const c = createSlotCounts(3, options);
    const added: Array<{ at: number; field: number; value: number }> = [];
    let now = 0;
    for (let i = 0; i < 2000; i++) {
      now += Math.floor(random() * (random() < 0.05 ? 90_000 : 3_000));
      const field = Math.floor(random() * 3);
      const value = Math.floor(random() * 10);
      c.counts[c.at(now) + field]! += value;
      added.push({ at: now, field, value });
      const slot = Math.floor(now / 5_000);
      const expected = [0, 0, 0];
      for (const a of added) if (Math.floor(a.at / 5_000) > slot - 12) expected[a.field]! += a.value;
      assert.deepEqual(c.sums(now), expected, `at ${now} ms`);
    }
  });
});
