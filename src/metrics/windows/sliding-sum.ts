// A sum over the last N seconds at one-second resolution: a ring of N slots, so memory is
// constant and add() is O(1) however long the proxy runs (sum() is O(N), at scrape time).

export interface SlidingSum {
  add(nowMs: number, value: number): void;
  /** Sum of the values added in the window that ends at nowMs. */
  sum(nowMs: number): number;
}

export function createSlidingSum(windowSeconds: number): SlidingSum {
  const slots = new Float64Array(windowSeconds);
  let head = -1; // the second the newest slot stands for

  function advance(second: number): void {
    if (head === -1) {
      head = second;
      return;
    }
    if (second <= head) return;
    const steps = Math.min(second - head, windowSeconds);
    for (let i = 1; i <= steps; i++) slots[(head + i) % windowSeconds] = 0;
    head = second;
  }

  return {
    add(nowMs, value) {
      const second = Math.floor(nowMs / 1000);
      advance(second);
      if (second > head - windowSeconds) slots[((second % windowSeconds) + windowSeconds) % windowSeconds]! += value;
    },
    sum(nowMs) {
      advance(Math.floor(nowMs / 1000));
      let total = 0;
      for (let i = 0; i < windowSeconds; i++) total += slots[i]!;
      return total;
    },
  };
}
