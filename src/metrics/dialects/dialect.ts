// A dialect exposes the one shared measurement under one naming scheme: it registers its
// families in the registry, reads counters and gauges from the shared state at scrape time and
// observes its histograms from each request's events. Adding a dialect touches nothing else.
import type { Registry } from 'prom-client';
import type { MeasurementState, SampleObserver } from '../recorder.ts';

export interface Dialect extends SampleObserver {
  readonly name: string;
  /** The families it registered, in order (tests and docs/metrics.md use them). */
  readonly metricNames: readonly string[];
}

export type DialectFactory = (registry: Registry, state: MeasurementState) => Dialect;
