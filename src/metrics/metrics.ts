// Builds the metrics of one infermeter: a prom-client Registry of its own (never the global
// one), the shared measurement state, the enabled dialects and infermeter's own families.
import { Registry } from 'prom-client';
import type { DialectName } from '../config/config.ts';
import type { Clock } from '../measure/clock.ts';
import type { MeasurementSink } from '../measure/request-timer.ts';
import { createAomDialect } from './dialects/aom.ts';
import type { Dialect, DialectContext, DialectFactory } from './dialects/dialect.ts';
import { createMindieDialect } from './dialects/mindie.ts';
import { createProxyFamilies, type ProxyFamilies } from './proxy-families.ts';
import { createRecorder, type MeasurementState, type SampleObserver } from './recorder.ts';

/** Every dialect by its INFERMETER_DIALECTS name. */
export const DIALECTS: Readonly<Record<DialectName, DialectFactory>> = {
  mindie: createMindieDialect,
  aom: createAomDialect,
};

export interface Metrics {
  readonly registry: Registry;
  readonly sink: MeasurementSink;
  readonly state: MeasurementState;
  readonly proxy: ProxyFamilies;
  readonly dialects: readonly Dialect[];
  /** Hears every request's events after the dialects (tests await finished requests with it). */
  addObserver(observer: SampleObserver): void;
  /** Call when a scrape starts; returns what to call with the size of the body served. */
  scrapeStarted(): (bytes: number) => void;
  /** The exposition text of every family. */
  render(): Promise<string>;
  readonly contentType: string;
  /** Stops the dialects' background work. */
  close(): void;
}

export interface MetricsOptions extends Omit<DialectContext, 'openConnections'> {
  readonly clock: Clock;
  readonly throughputWindowSeconds: number;
  readonly version: string;
  readonly dialects: readonly DialectName[];
  /** Client connections open on the data plane now (read at scrape time). */
  readonly openConnections?: () => number;
}

export function createMetrics(options: MetricsOptions): Metrics {
  const registry = new Registry();
  const recorder = createRecorder(options.clock, options.throughputWindowSeconds);
  const context: DialectContext = {
    buckets: options.buckets,
    aom: options.aom,
    openConnections: options.openConnections ?? (() => 0),
    ...(options.container === undefined ? {} : { container: options.container }),
  };
  const dialects = options.dialects.map((name) => DIALECTS[name](registry, recorder.state, context));
  for (const dialect of dialects) recorder.addObserver(dialect);
  const proxy = createProxyFamilies(registry, options.version);
  return {
    registry,
    sink: recorder.sink,
    state: recorder.state,
    proxy,
    dialects,
    addObserver: recorder.addObserver,
    scrapeStarted() {
      const done = dialects.map((d) => d.scrapeStarted?.()).filter((f) => f !== undefined);
      return (bytes) => {
        for (const f of done) f(bytes);
      };
    },
    render: () => registry.metrics(),
    contentType: registry.contentType,
    close() {
      for (const d of dialects) d.close?.();
    },
  };
}
