// Builds the metrics of one infermeter: a Prometheus client (@prometheus-io/client) Registry of its own (never the global
// one), the shared measurement state, the enabled dialects and infermeter's own families.
import type { Registry } from '@prometheus-io/client';
import { prometheus } from '../prometheus-parts.ts';
import type { Clock } from '../measure/clock.ts';
import { inferenceApis, REAL_APIS, type InferenceApis, type InferenceApiRow } from '../measure/inference-apis.ts';
import type { MeasurementSink } from '../measure/request-timer.ts';
import type { Dialect, DialectContext } from './dialects/dialect.ts';
import { dialectRows, type DialectOptions, type DialectRow } from './dialects/index.ts';
import type { BucketOverrides } from './exposition/buckets.ts';
import { createEngineScraper, fetchText, type EngineScraper, type EngineScraperOptions, type EngineView } from '../engine/engine-scraper.ts';
import { seriesNames, type FamilyType } from '../engine/exposition-parser.ts';
import { createLabelGuard } from './exposition/label-guard.ts';
import { createLoopDelayMonitor, registerLoopDelay, type LoopDelayReading } from './own/loop-delay.ts';
import { processMetrics, registerProcessFamilies, type ProcessReading } from './own/process-families.ts';
import { createProxyFamilies, type HeldBodyBytes, type ProxyFamilies } from './own/proxy-families.ts';
import { createRecentRequests } from './windows/recent-requests.ts';
import { createRecorder, type MeasurementState, type SampleObserver } from './state/recorder.ts';
import { NO_TENANT, tenantLabel as tenantLabelOf, UNAUTHENTICATED_TENANT } from './state/tenant-label.ts';
import { createTenantFamilies } from '../tenants/tenant-families.ts';
import { createFailureFamilies } from './own/failure-classes.ts';
import { createGoodputFamilies, type Goodput } from '../goodput/goodput-families.ts';
import { createGoodputWindow } from '../goodput/goodput-window.ts';
import type { SloPolicy } from '../goodput/slo-policy.ts';
import { OPENMETRICS_CONTENT_TYPE } from './exposition/openmetrics.ts';
import { createRenderPieces } from './exposition/render-pieces.ts';
import { registerAccountingFamilies } from './own/accounting-families.ts';
import { createUsageDetailFamilies } from './own/usage-detail-families.ts';
import { createFirstOutputFamilies } from './own/first-output-families.ts';
import { createOverheadFamily } from './own/overhead-family.ts';
import { createStreamHealthFamilies } from './own/stream-health-families.ts';
import { createPromptBandFamilies } from './own/prompt-band-families.ts';

export interface Metrics {
  readonly registry: Registry;
  readonly sink: MeasurementSink;
  readonly state: MeasurementState;
  readonly proxy: ProxyFamilies;
  readonly dialects: readonly Dialect[];
  /** The row of a sample's API, in the API table the metrics were built with (the OTLP export reads it). */
  readonly apis: InferenceApis;
  /** Goodput (INFERMETER_SLO, INFERMETER_SLO_FILE); undefined when no SLO is configured. */
  readonly goodput: Goodput | undefined;
  /** The model_name label a raw model name is counted under (bounded like the labels; counts nothing). */
  modelLabel(model: string): string;
  /** The tenant label a tenant is counted under (bounded; counts nothing); itself when metering by tenant is off. */
  tenantLabel(tenant: string, accepted?: boolean): string;
  /** Hears every request's events after the dialects (tests await finished requests with it). */
  addObserver(observer: SampleObserver): void;
  /** Call when a scrape starts; returns what to call with the size of the body served. */
  scrapeStarted(): (bytes: number) => void;
  /** The exposition text of every family (`openMetrics`: in OpenMetrics, with exemplars, `# EOF` last). */
  render(openMetrics?: boolean): Promise<string>;
  /**
   * The same text in pieces, each rendered within about RENDER_SLICE_MS (render-pieces.ts) of the event loop,
   * which it is given back between pieces: a scrape of thousands of series never holds the
   * data plane's streams for long. A piece holds whole series; a large family spans pieces. A
   * piece may be empty (the loop given back within a family's long work): nothing to send.
   */
  renderPieces(openMetrics?: boolean): AsyncGenerator<string>;
  readonly contentType: string;
  /** The content type of an OpenMetrics render. */
  readonly openMetricsContentType: string;
  /** Mean TTFT and TBT (ms) over the last INFERMETER_JSON_WINDOW finished requests. */
  recentAverages(): { ttftMs: number | undefined; tbtMs: number | undefined };
  /**
   * Goodput for /metrics-json: attainment over the last INFERMETER_JSON_WINDOW judged requests,
   * good requests and tokens per second over the throughput window; undefined without an SLO.
   */
  recentGoodput(): { attainment: number | undefined; requestsPerSecond: number; tokensPerSecond: number } | undefined;
  /** The engine's state from its last good scrape, when its metrics are read. */
  engineView(): EngineView | undefined;
  /** The engine scraper, when the upstream's metrics are read (tests drive its rounds). */
  readonly engineScraper: EngineScraper | undefined;
  /** Settles when the upstream's /v1/models, asked for once the model cap is reached, has been applied. */
  modelsListed(): Promise<void>;
  /** Starts background work (the engine scraper). */
  start(): void;
  /** Stops the dialects' and the scraper's background work. */
  close(): void;
}

/** The dialects' own options (AOM's, the container sources, OTel's) are DialectOptions'. */
export interface MetricsOptions extends DialectOptions {
  readonly buckets: BucketOverrides | undefined;
  readonly clock: Clock;
  readonly throughputWindowSeconds: number;
  readonly version: string;
  /** The dialects to serve, in order: names of `dialectTable`. */
  readonly dialects: readonly string[];
  /** The dialect table the names are looked up in (default: DIALECTS; a test adds its own). */
  readonly dialectTable?: readonly DialectRow[];
  /** The inference APIs whose traits the families read (default: INFERENCE_APIS; a test adds its own). */
  readonly apiTable?: readonly InferenceApiRow[] | undefined;
  /** Client connections open on the data plane now (read at scrape time). */
  readonly openConnections?: () => number;
  /** Bytes the data plane holds in memory now against its budgets (read at scrape time). */
  readonly heldBodyBytes?: () => HeldBodyBytes;
  /** Size of the /metrics-json window, in requests. */
  readonly jsonWindow?: number;
  /** Reading the engine's own /metrics; undefined: off. */
  readonly upstreamMetrics?: Omit<EngineScraperOptions, 'ownNames'>;
  /** Distinct model_name values kept (default 100). */
  readonly maxModels?: number;
  /** The upstream's /v1/models: its models are always kept, looked up when the cap is reached. */
  readonly modelsUrl?: URL;
  /** With INFERMETER_WORKERS > 1: the workers' event-loop delay, added up (from their last flush). */
  readonly workersLoopDelay?: () => LoopDelayReading;
  /** With INFERMETER_WORKERS > 1: each live worker's process families (from its last flush), by slot. */
  readonly workersProcess?: () => ReadonlyArray<readonly [slot: string, reading: ProcessReading]>;
  /** Per-tenant metering (INFERMETER_TENANT on); undefined: off, no tenant families. */
  readonly tenants?: TenantMetering | undefined;
  /** Goodput's SLO classes (closed with the metrics); undefined: no goodput families. */
  readonly slo?: SloPolicy | undefined;
  /** A stream whose longest silence reached this many seconds stalled (INFERMETER_STALL_SECONDS; default 30). */
  readonly stallSeconds?: number;
  /** TTFT per prompt band too (INFERMETER_PROMPT_BANDS). */
  readonly promptBands?: boolean;
}

interface TenantMetering {
  /** Distinct tenant values kept besides the aliased ones, `none` and `other` (INFERMETER_MAX_TENANTS). */
  readonly max: number;
  /** The alias file's mapping: its names are always kept, also after a reload. */
  readonly aliases: { current(): ReadonlyMap<string, string>; onChange(listener: (aliases: ReadonlyMap<string, string>) => void): void };
}

export function createMetrics(options: MetricsOptions): Metrics {
  const { Counter, Registry } = prometheus();
  const registry = new Registry();
  const overflowed = new Counter({
    name: 'infermeter_model_label_overflow_total',
    help: 'Inference requests counted under model_name="other" because INFERMETER_MAX_MODELS distinct models were already kept.',
    registers: [],
  });
  let lastListing = Number.NEGATIVE_INFINITY;
  let listing: Promise<void> = Promise.resolve();
  const guard = createLabelGuard(options.maxModels ?? 100, () => {
    overflowed.inc();
    // The cap is reached: ask the upstream which models it really serves (at most once a minute),
    // so that those get their own label from now on.
    const now = options.clock();
    if (options.modelsUrl === undefined || now - lastListing < 60_000) return;
    lastListing = now;
    // An unreachable upstream or a listing that is not JSON leaves the cap as it is.
    listing = fetchText(options.modelsUrl, 5000, 1024 * 1024)
      .then((text) => {
        const data = (JSON.parse(text) as { data?: unknown }).data;
        if (!Array.isArray(data)) return;
        guard.admitListed(data.map((m: { id?: unknown } | null) => m?.id).filter((id): id is string => typeof id === 'string'));
      })
      .catch(() => undefined);
  });
  const tenantOverflowed = new Counter({
    name: 'infermeter_tenant_label_overflow_total',
    help: 'Inference requests counted under tenant="other" because INFERMETER_MAX_TENANTS distinct tenants were already kept.',
    registers: [],
  });
  const tenants = options.tenants;
  const tenantGuard = tenants === undefined ? undefined : createLabelGuard(tenants.max, () => tenantOverflowed.inc(), [NO_TENANT, UNAUTHENTICATED_TENANT]);
  if (tenants !== undefined && tenantGuard !== undefined) {
    tenantGuard.admitListed(tenants.aliases.current().values());
    tenants.aliases.onChange((aliases) => tenantGuard.admitListed(aliases.values()));
  }
  const recorder = createRecorder(options.clock, options.throughputWindowSeconds, guard, tenantGuard);
  let scraper: EngineScraper | undefined;
  const apis = options.apiTable === undefined ? REAL_APIS : inferenceApis(options.apiTable);
  const context: DialectContext = {
    buckets: options.buckets,
    apis,
    openConnections: options.openConnections ?? (() => 0),
    engine: () => scraper?.view(),
  };
  const dialects = dialectRows(options.dialects, options.dialectTable).map((row) => row.create(registry, recorder.state, context, options));
  for (const dialect of dialects) recorder.addObserver(dialect);
  // A pass-through request is addressed to the dialect whose labels it carries.
  const httpObservers = new Map(dialects.filter((d) => d.httpRequest !== undefined).map((d) => [d.name, d]));
  const proxy: ProxyFamilies = {
    ...createProxyFamilies(registry, options.version, options.heldBodyBytes),
    httpRequest:
      httpObservers.size === 0
        ? undefined
        : (dialect, route, method, status, seconds) => httpObservers.get(dialect)?.httpRequest?.(route, method, status, seconds),
  };
  const loopDelay = createLoopDelayMonitor();
  registerLoopDelay(registry, () => {
    const workers = options.workersLoopDelay?.();
    return workers === undefined
      ? [['main', loopDelay.read()]]
      : [
          ['main', loopDelay.read()],
          ['workers', workers],
        ];
  });
  // process_* and nodejs_*: this process's, and the workers' by slot; in every dialect's scrape.
  registerProcessFamilies(registry, processMetrics(), options.workersProcess);
  registry.registerMetric(overflowed);
  if (tenantGuard !== undefined) {
    recorder.addObserver(createTenantFamilies(registry, options.buckets));
    registry.registerMetric(tenantOverflowed);
  }
  recorder.addObserver(createFailureFamilies(registry, recorder.state));
  // After the tenant families: a verdict's model and tenant are the bounded labels.
  let goodput: Goodput | undefined;
  if (options.slo !== undefined) {
    const families = createGoodputFamilies(registry, options.slo, tenantGuard !== undefined, apis);
    recorder.addObserver(families);
    goodput = families;
  }
  const goodputWindow =
    goodput === undefined
      ? undefined
      : createGoodputWindow(options.jsonWindow ?? 1000, options.throughputWindowSeconds, options.clock, recorder.state.windowCoverage);
  if (goodputWindow !== undefined) goodput?.onJudged((_, j) => goodputWindow.add(j));
  recorder.addObserver(createUsageDetailFamilies(registry, tenantGuard !== undefined));
  recorder.addObserver(createFirstOutputFamilies(registry, options.buckets, tenantGuard !== undefined));
  recorder.addObserver(createOverheadFamily(registry, options.buckets));
  recorder.addObserver(createStreamHealthFamilies(registry, options.buckets, { stallSeconds: options.stallSeconds ?? 30, tenants: tenantGuard !== undefined }));
  if (options.promptBands === true) recorder.addObserver(createPromptBandFamilies(registry, options.buckets));
  registerAccountingFamilies(registry, recorder.state, recorder.addObserver, () => guard.distinct, apis);
  const recent = createRecentRequests(options.jsonWindow ?? 1000);
  recorder.addObserver({
    finished: (s) => recent.add(s.ttft === undefined ? undefined : s.ttft * 1000, s.tpot === undefined ? undefined : s.tpot.seconds * 1000),
  });
  const engineFirst = new Set(dialects.flatMap((d) => d.engineFirst ?? []));
  let ownNames: Set<string> | undefined;
  if (options.upstreamMetrics !== undefined) {
    scraper = createEngineScraper(
      {
        ...options.upstreamMetrics,
        proxyInFlight: () => {
          const out = new Map<string, number>();
          for (const m of recorder.state.models.values()) out.set(m.model, m.waiting + m.running);
          return out;
        },
        // Every series name infermeter itself may emit: a relayed family must not reuse one.
        ownNames: () => {
          ownNames ??= new Set(
            registry.getMetricsAsArray().flatMap((m) => {
              if (engineFirst.has(m.name)) return [];
              const { name, type } = m as unknown as { name: string; type: FamilyType };
              return [name, ...seriesNames(name, type)];
            }),
          );
          return ownNames;
        },
      },
      registry,
    );
  }

  const renderPieces = createRenderPieces(registry, () => scraper, engineFirst);

  return {
    registry,
    sink: recorder.sink,
    state: recorder.state,
    proxy,
    dialects,
    apis,
    goodput,
    addObserver: recorder.addObserver,
    modelLabel: (model) => guard.model(model),
    // As the recorder labels the request's events, never counting an overflow.
    tenantLabel: (tenant, accepted) => (tenantGuard === undefined ? tenant : tenantLabelOf(tenantGuard, tenant, accepted)),
    modelsListed: () => listing,
    scrapeStarted() {
      const done = dialects.map((d) => d.scrapeStarted?.()).filter((f) => f !== undefined);
      return (bytes) => {
        for (const f of done) f(bytes);
      };
    },
    async render(openMetrics = false) {
      let out = '';
      for await (const piece of renderPieces(openMetrics)) out += piece;
      return out;
    },
    renderPieces,
    contentType: registry.contentType,
    openMetricsContentType: OPENMETRICS_CONTENT_TYPE,
    recentAverages: () => recent.averages(),
    recentGoodput() {
      if (goodputWindow === undefined) return undefined;
      const rates = goodputWindow.rates();
      return { attainment: goodputWindow.attainment(), requestsPerSecond: rates.requests, tokensPerSecond: rates.tokens };
    },
    engineView: () => scraper?.view(),
    engineScraper: scraper,
    start() {
      scraper?.start();
    },
    close() {
      options.slo?.close();
      loopDelay.close();
      scraper?.stop();
      for (const d of dialects) d.close?.();
    },
  };
}
