// The process families every Prometheus client library exposes (process_* and nodejs_*: CPU,
// resident memory, open files, start time, heap, event-loop lag and utilisation, GC, handles,
// the Node version), as @prometheus-io/client's collectDefaultMetrics reads them, in a registry
// of their own, then served under infermeter's registry beside every dialect's families (they
// belong to no dialect). With workers, each worker reads its own and sends them with its flush
// (cluster/bus.ts); the primary serves its own series as they are and each worker's with a
// `worker` label (its slot, 1 to INFERMETER_WORKERS: a restarted worker takes its slot again).
import type { MetricObjectWithValues, MetricValue, Registry } from '@prometheus-io/client';
import { prometheus } from '../../prometheus-parts.ts';

/** One process's families as read (the client's JSON form: structured-clone safe, for the bus). */
export type ProcessReading = MetricObjectWithValues<MetricValue<string>>[];

/** A reading serves the families of one scrape: reused for this long (ms). */
const READING_REUSE_MS = 1000;

export interface ProcessMetrics {
  /** The families now (collected at the call: CPU, memory, handles, ...). */
  read(): Promise<ProcessReading>;
  /** The families' names, help and types, in the client's order. */
  readonly families: ReadonlyArray<{ readonly name: string; readonly help: string; readonly type: string }>;
}

let shared: ProcessMetrics | undefined;

/**
 * The process's families, read by one collector per process (its GC observer and event-loop
 * monitors run for the process's life: every Metrics of the process, a test's many, shares them).
 */
export function processMetrics(): ProcessMetrics {
  shared ??= createProcessMetrics();
  return shared;
}

function createProcessMetrics(): ProcessMetrics {
  const { Registry, collectProcessMetrics } = prometheus();
  const own = new Registry();
  collectProcessMetrics(own);
  const families = own.getMetricsAsArray().map((m) => {
    const { name, help, type } = m as unknown as { name: string; help: string; type: string };
    return { name, help, type };
  });
  return { read: async () => withoutEmptyLagStatistics(await own.getMetricsAsJSON()), families };
}

const LAG_STATISTICS = ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99'].map((s) => `nodejs_eventloop_lag_${s}_seconds`);

/**
 * With no event-loop sample since the last collection the client reports the empty histogram's
 * fields as they are: min 2^63 ns (9.2e9 s, read as a 292-year stall by an alert on max or min),
 * max 0, percentiles of nothing. Every statistic of no samples is NaN instead, as the mean is.
 */
function withoutEmptyLagStatistics(reading: ProcessReading): ProcessReading {
  const mean = reading.find((m) => m.name === 'nodejs_eventloop_lag_mean_seconds')?.values[0]?.value;
  if (mean === undefined || !Number.isNaN(mean)) return reading;
  // New objects: the reading's values are the client's own, not copies.
  return reading.map((m) => (LAG_STATISTICS.includes(m.name) ? { ...m, values: m.values.map((v) => ({ ...v, value: Number.NaN })) } : m));
}

/**
 * Registers one family per process metric in `registry`: this process's series, then each
 * worker's (`workers`: their last readings, by slot) with a `worker` label.
 */
export function registerProcessFamilies(
  registry: Registry,
  local: ProcessMetrics,
  workers: () => ReadonlyArray<readonly [slot: string, reading: ProcessReading]> = () => [],
): void {
  // One collection for all the families of a scrape (rendered one after another, within about a
  // second), so that they agree: the event-loop lag's statistics are reset at each collection.
  let pending: Promise<ProcessReading> | undefined;
  let at = Number.NEGATIVE_INFINITY;
  const mine = (): Promise<ProcessReading> => {
    if (pending === undefined || performance.now() - at > READING_REUSE_MS) {
      at = performance.now();
      pending = local.read();
    }
    return pending;
  };
  for (const { name, help, type } of local.families) {
    const family = {
      name,
      help,
      type,
      aggregator: 'sum',
      async get() {
        const found = (await mine()).find((m) => m.name === name)!;
        const values = [...found.values];
        for (const [slot, reading] of workers()) {
          for (const v of reading.find((m) => m.name === name)?.values ?? []) values.push({ ...v, labels: { ...v.labels, worker: slot } });
        }
        return { ...found, values };
      },
    };
    registry.registerMetric(family as never);
  }
}
