import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from '@prometheus-io/client';
import { registerDerived, registerHistogram } from '../../src/metrics/exposition/families.ts';
import { createSlidingSum } from '../../src/metrics/windows/sliding-sum.ts';

describe('weighted histogram', () => {
  it('renders cumulative buckets, sum and count; a weight adds that many observations', async () => {
    const registry = new Registry();
    const h = registerHistogram(registry, { name: 'tpot_seconds', help: 'h', buckets: [0.01, 0.1, 1], labelName: 'model_name' });
    h.observe('a', 0.01); // on a bound: counts in that bucket (le)
    h.observe('a', 0.05, 9);
    h.observe('a', 5);
    h.observe('b', 0.5);
    h.observe('b', Number.NaN);
    h.observe('b', 1, 0);
    const text = await registry.metrics();
    const lines = text.split('\n').filter((l) => l.startsWith('tpot_seconds'));
    assert.deepEqual(lines, [
      'tpot_seconds_bucket{model_name="a",le="0.01"} 1',
      'tpot_seconds_bucket{model_name="a",le="0.1"} 10',
      'tpot_seconds_bucket{model_name="a",le="1"} 10',
      'tpot_seconds_bucket{model_name="a",le="+Inf"} 11',
      `tpot_seconds_sum{model_name="a"} ${0.01 + 0.05 * 9 + 5}`,
      'tpot_seconds_count{model_name="a"} 11',
      'tpot_seconds_bucket{model_name="b",le="0.01"} 0',
      'tpot_seconds_bucket{model_name="b",le="0.1"} 0',
      'tpot_seconds_bucket{model_name="b",le="1"} 1',
      'tpot_seconds_bucket{model_name="b",le="+Inf"} 1',
      'tpot_seconds_sum{model_name="b"} 0.5',
      'tpot_seconds_count{model_name="b"} 1',
    ]);
    assert.match(text, /# TYPE tpot_seconds histogram/);
  });

  it('validates names and buckets once, at construction', () => {
    const registry = new Registry();
    assert.throws(() => registerHistogram(registry, { name: 'bad-name', help: 'h', buckets: [1], labelName: 'm' }), /invalid metric name/);
    assert.throws(() => registerHistogram(registry, { name: 'x', help: 'h', buckets: [1, 1], labelName: 'm' }), /increase strictly/);
    assert.throws(() => registerHistogram(registry, { name: 'y', help: 'h', buckets: [1], labelName: 'le' }), /invalid label name/);
  });
});

describe('derived families', () => {
  it('compute their samples at scrape time', async () => {
    const registry = new Registry();
    let n = 1;
    registerDerived(registry, { name: 'things_total', help: 'things', type: 'counter', collect: () => [{ value: n, labels: { model_name: 'a"b\\c' } }] });
    assert.match(await registry.metrics(), /things_total\{model_name="a\\"b\\\\c"\} 1/);
    n = 5;
    assert.match(await registry.metrics(), /things_total\{model_name="a\\"b\\\\c"\} 5/);
  });
});

describe('sliding sum', () => {
  it('sums what was added in the last N seconds and forgets the rest', () => {
    const s = createSlidingSum(10);
    s.add(500, 1);
    s.add(4_200, 2);
    s.add(9_999, 3);
    assert.equal(s.sum(9_999), 6);
    assert.equal(s.sum(10_000), 5, 'second 0 left the window');
    assert.equal(s.sum(14_999), 3);
    assert.equal(s.sum(20_000), 0);
    s.add(1_000_000, 7);
    assert.equal(s.sum(1_000_500), 7, 'a long gap clears everything');
  });
});
