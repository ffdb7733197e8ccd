// A dialect exposes the one shared measurement under one naming scheme: it registers its
// families in the registry, reads counters and gauges from the shared state at scrape time and
// observes its histograms from each request's events. Adding a dialect is its own module plus
// one row in the dialect table (dialects/index.ts: name, help line, default buckets, factory),
// from which the configuration's validation, the bucket overrides, the help text and the
// composition all derive. The context is what every dialect shares; a dialect's own options
// (AOM's labels, OTel's attributes) are its factory's own argument, so no dialect knows another.
import type { BucketOverrides } from '../exposition/buckets.ts';
import type { EngineView } from '../../engine/engine-scraper.ts';
import type { InferenceApis } from '../../measure/inference-apis.ts';
import type { SampleObserver } from '../state/recorder.ts';

export interface Dialect extends SampleObserver {
  readonly name: string;
  /** The families it registered, in order (tests and docs/metrics.md use them). */
  readonly metricNames: readonly string[];
  /**
   * Families the engine measures better than a proxy can (time spent inside the engine): when
   * the relay carries the engine's own family of that name, the engine's is served, not this.
   */
  readonly engineFirst?: readonly string[];
  /**
   * A request of a route infermeter forwards without measuring, under the labels its row's
   * passThroughLabels gave it in the data plane (ProxyEvents.httpRequest, addressed to this dialect).
   */
  httpRequest?(route: string, method: string, status: number, seconds: number): void;
  /** Called when a scrape starts; returns what to call with the bytes served. */
  scrapeStarted?(): (bytes: number) => void;
  /** Stops background work (samplers); called when infermeter closes. */
  close?(): void;
}

export interface DialectContext {
  readonly buckets: BucketOverrides | undefined;
  /** The row of a sample's API (its canonical route, whether it generates, its OTel operation). */
  readonly apis: InferenceApis;
  /** Client connections open on the data plane now. */
  readonly openConnections: () => number;
  /** The engine's own state from its /metrics, when it is read and the last scrape succeeded. */
  readonly engine: () => EngineView | undefined;
}
