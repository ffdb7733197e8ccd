// Goodput for /metrics-json: the attainment over the last N judged requests (a ring of N
// verdicts with running counts, O(1) per request, as the TTFT window), and good requests and
// their tokens per second over the throughput window (sliding sums, as the avg_*_throughput
// gauges). Cancelled requests are not in the attainment: good / (good + missed + failed).
import type { Judgement } from './goodput-verdict.ts';
import { createSlidingSum } from '../metrics/windows/sliding-sum.ts';

export interface GoodputWindow {
  add(judgement: Judgement): void;
  /** good / (good + missed + failed) over the last N such requests; undefined before the first. */
  attainment(): number | undefined;
  /** Good requests and their completion tokens per second over the throughput window. */
  rates(): { requests: number; tokens: number };
}

export function createGoodputWindow(size: number, windowSeconds: number, clock: () => number, coverage: () => number): GoodputWindow {
  // 1: good, 0: missed or failed, -1: empty.
  const ring = new Int8Array(size).fill(-1);
  let next = 0;
  let good = 0;
  let judged = 0;
  const requests = createSlidingSum(windowSeconds);
  const tokens = createSlidingSum(windowSeconds);
  return {
    add(j) {
      if (j.verdict === 'good') {
        const now = clock();
        requests.add(now, 1);
        tokens.add(now, j.tokens);
      }
      if (j.verdict === 'cancelled') return;
      const old = ring[next]!;
      if (old !== -1) {
        judged--;
        good -= old;
      }
      const v = j.verdict === 'good' ? 1 : 0;
      ring[next] = v;
      judged++;
      good += v;
      next = (next + 1) % size;
    },
    attainment: () => (judged === 0 ? undefined : good / judged),
    rates() {
      const now = clock();
      const seconds = coverage();
      return { requests: requests.sum(now) / seconds, tokens: tokens.sum(now) / seconds };
    },
  };
}
