// What a test may bound a measured time by: the scripted delays below (a timer never fires
// early by more than Node's whole millisecond), and above by what the proxy itself measured for
// the same requests, never by how fast the machine is. These helpers collect the proxy's own
// figures and turn them into the range a histogram or a quantile read from it must fall in.
import assert from 'node:assert/strict';
import type { Infermeter } from '../../src/app.ts';
import type { RequestSample } from '../../src/measure/sample.ts';

export interface Measured {
  /** Every finished request's sample, in the order they finished. */
  readonly samples: RequestSample[];
  /** Every inter-token gap observed (seconds), one entry per event. */
  readonly gaps: number[];
}

/** Records what the proxy measures from now on (observers run in the proxy's own process). */
export function recordMeasured(app: Pick<Infermeter, 'metrics'>): Measured {
  const measured: Measured = { samples: [], gaps: [] };
  app.metrics.addObserver({
    finished: (s) => void measured.samples.push(s),
    interToken: (_info, seconds) => void measured.gaps.push(seconds),
  });
  return measured;
}

/** The values of one figure over the samples that have it. */
export function figures(samples: readonly RequestSample[], pick: (s: RequestSample) => number | undefined): number[] {
  return samples.map(pick).filter((v): v is number => v !== undefined);
}

/** The bucket (lower, upper] of a cumulative histogram that `value` falls in. */
export function bucketOf(value: number, bounds: readonly number[]): [number, number] {
  const i = bounds.findIndex((b) => value <= b);
  if (i === -1) return [bounds[bounds.length - 1]!, Number.POSITIVE_INFINITY];
  return [i === 0 ? 0 : bounds[i - 1]!, bounds[i]!];
}

/**
 * The range any quantile of a histogram holding some of `values` must fall in: from the lower
 * bound of the smallest value's bucket to the upper bound of the largest value's bucket.
 */
export function quantileRange(values: readonly number[], bounds: readonly number[]): [number, number] {
  if (values.length === 0) throw new Error('no values to bound a quantile by');
  return [bucketOf(Math.min(...values), bounds)[0], bucketOf(Math.max(...values), bounds)[1]];
}

/** The cumulative bucket counts of `values`: how many are <= each bound. */
export function cumulativeCounts(values: readonly number[], bounds: readonly number[]): number[] {
  return bounds.map((b) => values.filter((v) => v <= b).length);
}

/** Asserts low <= v <= high, printing the values. */
export function within(v: number | undefined, [low, high]: readonly [number, number], what: string): void {
  assert.ok(v !== undefined && v >= low && v <= high, `${what} = ${v}, expected in [${low}, ${high}]`);
}

/** The smallest and largest value, for bounds from measured figures. */
export function span(values: readonly number[]): [number, number] {
  if (values.length === 0) throw new Error('no values');
  return [Math.min(...values), Math.max(...values)];
}
