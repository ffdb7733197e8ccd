// infermeter_event_loop_delay_seconds: how late the event loop runs what is due, sampled by
// Node itself (perf_hooks.monitorEventLoopDelay: a libuv timer every RESOLUTION_MS records how
// long it really took). A request that arrives while the loop is busy waits in its socket for
// that long before it can be stamped, so this is how much a TTFT, TTFB or e2e can read low.
// Node keeps the samples in an HDR histogram since the start; at each read its cumulative counts
// at the family's bounds are taken from its percentiles (never reset: a reset loses the delay
// that spans it), so the family is an ordinary cumulative Prometheus histogram.
import { monitorEventLoopDelay, type ELDHistogram } from 'node:perf_hooks';
import type { Registry } from '@prometheus-io/client';
import type { Family, MetricValue } from '../exposition/families.ts';
import { formatValue, header } from '../exposition/text-format.ts';

const LOOP_DELAY_NAME = 'infermeter_event_loop_delay_seconds';
/** Upper bounds, seconds: a millisecond-true TTFT needs the loop's delay in the lowest ones. */
export const LOOP_DELAY_BUCKETS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** Node's sampling interval (ms); each sample is the interval taken, so the delay is that minus this. */
const RESOLUTION_MS = 10;

/** Cumulative counts at LOOP_DELAY_BUCKETS' bounds, then the total count; the sum in seconds. */
export interface LoopDelayReading {
  readonly buckets: readonly number[];
  readonly sum: number;
  readonly count: number;
}

export interface LoopDelayMonitor {
  read(): LoopDelayReading;
  close(): void;
}

export function createLoopDelayMonitor(): LoopDelayMonitor {
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  histogram.enable();
  return {
    read: () => readingOf(histogram),
    close: () => histogram.disable(),
  };
}

/** The samples at or below `delayNs` of delay, as a share (0 to 1), from the HDR's percentiles. */
function shareAtOrBelow(h: ELDHistogram, delayNs: number): number {
  const value = delayNs + RESOLUTION_MS * 1e6;
  if (h.max <= value) return 1;
  if (h.min > value) return 0;
  // The largest percentile whose value is within the bound: bisection to 1e-6 of the samples.
  let low = 0;
  let high = 100;
  for (let i = 0; i < 27; i++) {
    const mid = (low + high) / 2;
    if (h.percentile(mid) <= value) low = mid;
    else high = mid;
  }
  return low / 100;
}

function readingOf(h: ELDHistogram): LoopDelayReading {
  const count = h.count;
  if (count === 0) return { buckets: LOOP_DELAY_BUCKETS.map(() => 0), sum: 0, count: 0 };
  const buckets = LOOP_DELAY_BUCKETS.map((bound) => Math.round(count * shareAtOrBelow(h, bound * 1e9)));
  return { buckets, sum: (Math.max(0, h.mean - RESOLUTION_MS * 1e6) * count) / 1e9, count };
}

/** Adds readings (several workers' into one). */
export function addReadings(readings: readonly LoopDelayReading[]): LoopDelayReading {
  const buckets = LOOP_DELAY_BUCKETS.map(() => 0);
  let sum = 0;
  let count = 0;
  for (const r of readings) {
    for (let i = 0; i < buckets.length; i++) buckets[i]! += r.buckets[i] ?? 0;
    sum += r.sum;
    count += r.count;
  }
  return { buckets, sum, count };
}

/**
 * The family, one series per `process` label (`main`: the process serving /metrics; `workers`:
 * the data plane's workers, added up). Each series never decreases between scrapes (a later
 * reading's rounding cannot make a counter go back).
 */
export function registerLoopDelay(registry: Registry, read: () => ReadonlyArray<readonly [process: string, reading: LoopDelayReading]>): Family {
  const help =
    'Event-loop delay: how late the process ran what was due (perf_hooks.monitorEventLoopDelay, sampled every 10 ms). A request arriving meanwhile is stamped that much late, so TTFT, TTFB and e2e can read low by about this much.';
  const head = header(LOOP_DELAY_NAME, help, 'histogram');
  const shown = new Map<string, number[]>();
  const values = (): MetricValue[] => {
    const out: MetricValue[] = [];
    for (const [process, r] of read()) {
      const before = shown.get(process);
      const now = [...r.buckets, r.count, r.sum].map((v, i) => Math.max(v, before?.[i] ?? 0));
      shown.set(process, now);
      LOOP_DELAY_BUCKETS.forEach((le, i) => {
        out.push({ metricName: `${LOOP_DELAY_NAME}_bucket`, labels: { process, le: formatValue(le) }, value: now[i]! });
      });
      const n = LOOP_DELAY_BUCKETS.length;
      out.push({ metricName: `${LOOP_DELAY_NAME}_bucket`, labels: { process, le: '+Inf' }, value: now[n]! });
      out.push({ metricName: `${LOOP_DELAY_NAME}_sum`, labels: { process }, value: now[n + 1]! });
      out.push({ metricName: `${LOOP_DELAY_NAME}_count`, labels: { process }, value: now[n]! });
    }
    return out;
  };
  const family: Family = {
    name: LOOP_DELAY_NAME,
    help,
    type: 'histogram',
    renderText() {
      let out = head;
      for (const v of values())
        out += `${v.metricName}{process="${v.labels.process}"${v.labels.le === undefined ? '' : `,le="${v.labels.le}"`}} ${formatValue(v.value)}\n`;
      return out;
    },
    get: () => ({ name: LOOP_DELAY_NAME, help, type: 'histogram', values: values(), aggregator: 'sum' }),
  };
  registry.registerMetric(family as never);
  return family;
}
