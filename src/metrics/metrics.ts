// Builds the metrics of one infermeter: a prom-client Registry of its own (never the global
// one), the exposer families, the shared measurement state and the enabled dialects.
import { Registry } from 'prom-client';
import type { Clock } from '../measure/clock.ts';
import type { MeasurementSink } from '../measure/request-timer.ts';
import { createMindieDialect } from './dialects/mindie.ts';
import type { Dialect } from './dialects/dialect.ts';
import { createExposer, type Exposer } from './exposer.ts';
import { createProxyFamilies, type ProxyFamilies } from './proxy-families.ts';
import { createRecorder, type MeasurementState, type SampleObserver } from './recorder.ts';

export interface Metrics {
  readonly registry: Registry;
  readonly sink: MeasurementSink;
  readonly state: MeasurementState;
  readonly exposer: Exposer;
  readonly proxy: ProxyFamilies;
  readonly dialects: readonly Dialect[];
  /** Hears every request's events after the dialects (tests await finished requests with it). */
  addObserver(observer: SampleObserver): void;
  /** The exposition text of every family. */
  render(): Promise<string>;
  readonly contentType: string;
}

export interface MetricsOptions {
  readonly clock: Clock;
  readonly throughputWindowSeconds: number;
  readonly version: string;
}

export function createMetrics(options: MetricsOptions): Metrics {
  const registry = new Registry();
  const exposer = createExposer(registry);
  const recorder = createRecorder(options.clock, options.throughputWindowSeconds);
  const dialects = [createMindieDialect(registry, recorder.state)];
  for (const dialect of dialects) recorder.addObserver(dialect);
  const proxy = createProxyFamilies(registry, options.version);
  return {
    registry,
    sink: recorder.sink,
    state: recorder.state,
    exposer,
    proxy,
    dialects,
    addObserver: recorder.addObserver,
    render: () => registry.metrics(),
    contentType: registry.contentType,
  };
}
