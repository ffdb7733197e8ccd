// A few counts per time slot, over a window of slots: a ring whose places each remember the slot
// they hold, so that a place left from an older round is zeroed when it is reused, and a sum
// reads only the places inside the window. What the dashboard's goodput and tenant tables count
// over the last minute; memory is constant, add is O(1), a sum O(slots).
import type { QuantileWindowOptions } from './quantile-window.ts';

export interface SlotCounts {
  /** The counts, `fields` to a place: add to `counts[at(nowMs) + field]`. */
  readonly counts: Float64Array;
  /** Where the slot of nowMs begins in `counts`, its place zeroed first if it held an older slot. */
  at(nowMs: number): number;
  /** Each field's sum over the window that ends at nowMs. */
  sums(nowMs: number): number[];
}

/** `fields` counts a slot of `slotSeconds`, over the slots that cover `windowSeconds`. */
export function createSlotCounts(fields: number, options: Required<QuantileWindowOptions>): SlotCounts {
  const slotMs = options.slotSeconds * 1000;
  const slots = Math.max(1, Math.ceil((options.windowSeconds * 1000) / slotMs));
  const counts = new Float64Array(slots * fields);
  const stamps = new Float64Array(slots).fill(Number.NaN);
  return {
    counts,
    at(nowMs) {
      const slot = Math.floor(nowMs / slotMs);
      const position = ((slot % slots) + slots) % slots;
      if (stamps[position] !== slot) {
        stamps[position] = slot;
        counts.fill(0, position * fields, position * fields + fields);
      }
      return position * fields;
    },
    sums(nowMs) {
      const current = Math.floor(nowMs / slotMs);
      const sums = new Array<number>(fields).fill(0);
      for (let p = 0; p < slots; p++) {
        const stamp = stamps[p]!;
        if (!(stamp > current - slots && stamp <= current)) continue;
        for (let f = 0; f < fields; f++) sums[f]! += counts[p * fields + f]!;
      }
      return sums;
    },
  };
}
