// The live dashboard's sliding quantiles: TTFT and TPOT p50/p90/p99 over the last minute, per
// model, in constant memory whatever the traffic. Values are counted in log-scale buckets (8
// per octave, from 2^-14 s ≈ 61 µs to 2^10 s = 1024 s) kept per time slot (5 s by default), so
// a quantile is read from the summed buckets of the slots in the window and stands for its
// bucket's geometric midpoint: at most 2^(1/16) − 1 ≈ 4.4 % from the sample it names, and
// never outside the smallest and largest value of the window (a window of equal values reads
// exactly). Adding a value is O(1); reading is O(buckets); a slot that leaves the window is
// subtracted from the running totals (weights are whole numbers: no rounding drift).

/** Buckets per octave: each spans a factor of 2^(1/8) ≈ 1.09. */
const SUB_BUCKETS = 8;
/** Lower edge of the first bucket, in seconds; smaller values share that bucket. */
export const MIN_VALUE = 2 ** -14;
const OCTAVES = 24;
export const BUCKETS = SUB_BUCKETS * OCTAVES;
/** Largest relative distance between a quantile read and the sample it stands for (in range). */
export const MAX_RELATIVE_ERROR = 2 ** (1 / (2 * SUB_BUCKETS)) - 1;

/** The bucket of a value: [MIN·2^(i/8), MIN·2^((i+1)/8)), clamped to the first and last. */
export function bucketOf(value: number): number {
  if (!(value > MIN_VALUE)) return 0;
  return Math.min(BUCKETS - 1, Math.floor(Math.log2(value / MIN_VALUE) * SUB_BUCKETS));
}

/** Midpoints of the sub-buckets of one octave, over its lower edge. */
const MIDPOINTS = Array.from({ length: SUB_BUCKETS }, (_, j) => 2 ** ((j + 0.5) / SUB_BUCKETS));

/** The geometric midpoint of bucket i: what a quantile falling in it reads (a power of two times a constant, so exact). */
export function bucketValue(i: number): number {
  return MIN_VALUE * 2 ** Math.floor(i / SUB_BUCKETS) * MIDPOINTS[i % SUB_BUCKETS]!;
}

export interface QuantileWindow {
  /** Counts `value` `weight` times (a whole number; TPOT counts one per token) at nowMs. */
  add(nowMs: number, value: number, weight?: number): void;
  /**
   * Nearest-rank quantiles (the smallest value with at least q of the weight at or below it) of
   * what was added in the window ending at nowMs, one per q; NaN for all when it is empty.
   * q <= 0 and q >= 1 read the smallest and the largest value, exactly.
   */
  quantiles(nowMs: number, qs: readonly number[]): number[];
  /** Total weight in the window ending at nowMs. */
  weight(nowMs: number): number;
}

export interface QuantileWindowOptions {
  /** Seconds the window spans (default 60). */
  readonly windowSeconds?: number;
  /** Seconds per slot (default 5): the window moves in these steps, covering the last windowSeconds − slotSeconds to windowSeconds. */
  readonly slotSeconds?: number;
}

export function createQuantileWindow(options: QuantileWindowOptions = {}): QuantileWindow {
  const slotMs = (options.slotSeconds ?? 5) * 1000;
  const slots = Math.max(1, Math.ceil(((options.windowSeconds ?? 60) * 1000) / slotMs));
  const counts = new Float64Array(slots * BUCKETS);
  const slotWeight = new Float64Array(slots);
  const slotMin = new Float64Array(slots).fill(Number.POSITIVE_INFINITY);
  const slotMax = new Float64Array(slots).fill(Number.NEGATIVE_INFINITY);
  const total = new Float64Array(BUCKETS);
  let totalWeight = 0;
  let head = Number.NaN; // the slot number the newest ring position stands for

  const clear = (position: number): void => {
    if (slotWeight[position] === 0) return;
    const base = position * BUCKETS;
    for (let i = 0; i < BUCKETS; i++) {
      const c = counts[base + i]!;
      if (c !== 0) {
        total[i]! -= c;
        counts[base + i] = 0;
      }
    }
    totalWeight -= slotWeight[position]!;
    slotWeight[position] = 0;
    slotMin[position] = Number.POSITIVE_INFINITY;
    slotMax[position] = Number.NEGATIVE_INFINITY;
  };

  const advance = (nowMs: number): number => {
    const slot = Math.floor(nowMs / slotMs);
    if (Number.isNaN(head)) head = slot;
    else if (slot > head) {
      const steps = Math.min(slot - head, slots);
      for (let s = 1; s <= steps; s++) clear((((head + s) % slots) + slots) % slots);
      head = slot;
    }
    return slot;
  };

  return {
    add(nowMs, value, weight = 1) {
      if (!Number.isFinite(value) || !(weight > 0)) return;
      const slot = advance(nowMs);
      if (slot <= head - slots) return; // older than the window (a clock that went back)
      const position = ((slot % slots) + slots) % slots;
      const bucket = bucketOf(value);
      counts[position * BUCKETS + bucket]! += weight;
      total[bucket]! += weight;
      slotWeight[position]! += weight;
      totalWeight += weight;
      if (value < slotMin[position]!) slotMin[position] = value;
      if (value > slotMax[position]!) slotMax[position] = value;
    },
    quantiles(nowMs, qs) {
      advance(nowMs);
      if (totalWeight <= 0) return qs.map(() => Number.NaN);
      let min = Number.POSITIVE_INFINITY;
      let max = Number.NEGATIVE_INFINITY;
      for (let p = 0; p < slots; p++) {
        if (slotWeight[p] === 0) continue;
        if (slotMin[p]! < min) min = slotMin[p]!;
        if (slotMax[p]! > max) max = slotMax[p]!;
      }
      return qs.map((q) => {
        // The extremes are known exactly.
        if (q <= 0) return min;
        if (q >= 1) return max;
        // Weights are whole numbers; the tolerance only absorbs q·total's rounding (0.29 · 100).
        const target = q * totalWeight - 1e-9 * totalWeight;
        let cumulative = 0;
        for (let i = 0; i < BUCKETS; i++) {
          cumulative += total[i]!;
          if (cumulative > 0 && cumulative >= target) return Math.min(max, Math.max(min, bucketValue(i)));
        }
        return max;
      });
    },
    weight(nowMs) {
      advance(nowMs);
      return totalWeight;
    },
  };
}
