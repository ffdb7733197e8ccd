// A dialect exposes the one shared measurement under one naming scheme: it registers its
// families in the registry, reads counters and gauges from the shared state at scrape time and
// observes its histograms from each request's events. Adding a dialect touches nothing else:
// write a DialectFactory and list it in DIALECTS (metrics/metrics.ts).
import type { Registry } from 'prom-client';
import type { AomOptions } from '../../config/config.ts';
import type { BucketOverrides } from '../buckets.ts';
import type { ContainerSamplerOptions } from '../container/container-sampler.ts';
import type { EngineView } from '../../engine/engine-scraper.ts';
import type { MeasurementState, SampleObserver } from '../recorder.ts';
import type { OtelOptions } from './otel.ts';

export interface Dialect extends SampleObserver {
  readonly name: string;
  /** The families it registered, in order (tests and docs/metrics.md use them). */
  readonly metricNames: readonly string[];
  /**
   * Families the engine measures better than a proxy can (time spent inside the engine): when
   * the relay carries the engine's own family of that name, the engine's is served, not this.
   */
  readonly engineFirst?: readonly string[];
  /** Called when a scrape starts; returns what to call with the bytes served. */
  scrapeStarted?(): (bytes: number) => void;
  /** Stops background work (samplers); called when infermeter closes. */
  close?(): void;
}

export interface DialectContext {
  readonly buckets: BucketOverrides | undefined;
  readonly aom: AomOptions;
  /** Client connections open on the data plane now. */
  readonly openConnections: () => number;
  /** The engine's own state from its /metrics, when it is read and the last scrape succeeded. */
  readonly engine: () => EngineView | undefined;
  /** Sources of the container metrics; tests pass fixture trees and a fake nvidia-smi. */
  readonly container?: ContainerSamplerOptions;
  /** The otel dialect's constant attributes (provider, upstream address); its defaults when unset. */
  readonly otel?: OtelOptions;
}

export type DialectFactory = (registry: Registry, state: MeasurementState, context: DialectContext) => Dialect;
