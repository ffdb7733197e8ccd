// Averages over the last N finished requests, for /metrics-json: a ring of N slots and running
// sums, so memory is constant and each request costs O(1) however long the proxy runs. The sums
// are rebuilt from the ring once every N requests, so floating-point drift cannot accumulate.

export interface RecentRequests {
  /** Records one finished request's TTFT and TBT in milliseconds (undefined: it has none). */
  add(ttftMs: number | undefined, tbtMs: number | undefined): void;
  /** Mean TTFT and TBT over the requests of the window that have each figure. */
  averages(): { ttftMs: number | undefined; tbtMs: number | undefined };
}

export function createRecentRequests(size: number): RecentRequests {
  const ttft = new Float64Array(size).fill(Number.NaN);
  const tbt = new Float64Array(size).fill(Number.NaN);
  let next = 0;
  let ttftSum = 0;
  let ttftCount = 0;
  let tbtSum = 0;
  let tbtCount = 0;
  let sinceRebuild = 0;

  const rebuild = (): void => {
    ttftSum = ttftCount = tbtSum = tbtCount = 0;
    for (let i = 0; i < size; i++) {
      if (!Number.isNaN(ttft[i]!)) {
        ttftSum += ttft[i]!;
        ttftCount++;
      }
      if (!Number.isNaN(tbt[i]!)) {
        tbtSum += tbt[i]!;
        tbtCount++;
      }
    }
  };

  return {
    add(ttftMs, tbtMs) {
      const oldTtft = ttft[next]!;
      const oldTbt = tbt[next]!;
      if (!Number.isNaN(oldTtft)) {
        ttftSum -= oldTtft;
        ttftCount--;
      }
      if (!Number.isNaN(oldTbt)) {
        tbtSum -= oldTbt;
        tbtCount--;
      }
      const t = ttftMs ?? Number.NaN;
      const b = tbtMs ?? Number.NaN;
      ttft[next] = t;
      tbt[next] = b;
      if (!Number.isNaN(t)) {
        ttftSum += t;
        ttftCount++;
      }
      if (!Number.isNaN(b)) {
        tbtSum += b;
        tbtCount++;
      }
      next = (next + 1) % size;
      if (++sinceRebuild >= size) {
        sinceRebuild = 0;
        rebuild();
      }
    },
    averages: () => ({
      ttftMs: ttftCount === 0 ? undefined : ttftSum / ttftCount,
      tbtMs: tbtCount === 0 ? undefined : tbtSum / tbtCount,
    }),
  };
}
