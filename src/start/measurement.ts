// The measurement side of a process: the metrics and what hangs on them (the readiness of the
// upstream, the tenant aliases, the SLO classes, the prices and their cost families, the usage
// ledger's spool, the OTLP export). One process builds it beside its data plane; the primary of
// INFERMETER_WORKERS > 1 builds it alone and feeds it from the workers' bus (start/root.ts).
import type { Config } from '../config/config.ts';
import { startPrices, type Prices } from '../chargeback/start.ts';
import { createSloPolicy, type SloPolicy } from '../goodput/slo-policy.ts';
import { startLedger, type Ledger } from '../ledger/ledger.ts';
import type { Logger } from '../log.ts';
import { sameAddress, upstreamReadiness, withReadinessNews, type UpstreamReadiness } from '../management/upstream-readiness.ts';
import { monotonicClock, type Clock } from '../measure/clock.ts';
import type { ContainerSamplerOptions } from '../metrics/container/container-sampler.ts';
import type { DialectRow } from '../metrics/dialects/index.ts';
import type { InferenceApiRow } from '../measure/inference-apis.ts';
import type { OtelOptions } from '../metrics/dialects/otel.ts';
import { startOtlpExport, type OtlpExport } from '../metrics/export/otlp-export.ts';
import { createMetrics, type Metrics, type MetricsOptions } from '../metrics/metrics.ts';
import type { HeldBodyBytes, ProxyEvents } from '../metrics/own/proxy-families.ts';
import { createTenantAliases, type TenantAliases } from '../tenants/tenant-aliases.ts';
import type { LifecycleViolation } from '../data-plane/lifecycle.ts';
import { VERSION } from '../version.ts';

/** The custom-metric limit of ModelArts: a relayed exposition larger than this is refused. */
const RELAY_MAX_BYTES = 240 * 1024;

export interface StartOptions {
  readonly log: Logger;
  readonly clock?: Clock;
  /** Sources of the AOM container metrics (tests pass fixtures). */
  readonly container?: ContainerSamplerOptions;
  /** An impossible move of a request's lifecycle (default: logged as an error; tests fail on it). */
  readonly lifecycleViolation?: (error: LifecycleViolation) => void;
  /** The stale race's window (upstream-attempt.ts): tests whose upstream shares their process widen it. */
  readonly staleRaceMs?: number;
  /**
   * The dialect table `config.dialects` was validated against (default: DIALECTS; a test adds a
   * dialect of its own). In one process only: a worker builds its data plane with DIALECTS.
   */
  readonly dialectTable?: readonly DialectRow[];
  /**
   * The inference APIs: which routes are measured and what each API's traits are (default:
   * INFERENCE_APIS; a test adds an API of its own). In one process only, as the dialect table.
   */
  readonly apiTable?: readonly InferenceApiRow[];
}

/** What the metrics read of the data plane (of every worker, with workers) at scrape time. */
export interface DataPlaneReadings {
  /** Client connections open now. */
  connections(): number;
  /** Bytes held in memory now against the budgets. */
  heldBodyBytes(): HeldBodyBytes;
  /** The workers' event-loop delay and process families (with workers only). */
  readonly workersLoopDelay?: MetricsOptions['workersLoopDelay'];
  readonly workersProcess?: MetricsOptions['workersProcess'];
}

export interface Measurement {
  readonly metrics: Metrics;
  /** The proxy families, with a request that could not connect told to the readiness too. */
  readonly events: ProxyEvents;
  /** /ready's view of the upstream (INFERMETER_READY_FOLLOWS_UPSTREAM). */
  readonly readiness: UpstreamReadiness | undefined;
  /** The tenant aliases (INFERMETER_TENANT): the measurement's keep the labels. */
  readonly aliases: TenantAliases | undefined;
  /** The prices and, on these metrics, the cost families (INFERMETER_PRICES_FILE). */
  readonly prices: Prices | undefined;
  /** The usage ledger's spool (INFERMETER_USAGE_DIR): this process's records and the workers'. */
  readonly ledger: Ledger | undefined;
}

export function requireUpstream(config: Config): URL {
  if (config.upstream === undefined) throw new Error('INFERMETER_UPSTREAM is required to start the proxy');
  return config.upstream;
}

/**
 * The live alias table of per-tenant metering (watching its file), when INFERMETER_TENANT is on;
 * every process that reads tenants or keeps their labels has its own.
 */
export function tenantAliases(config: Config, log: Logger): TenantAliases | undefined {
  const { tenant } = config;
  if (tenant.source.kind === 'off') return undefined;
  return createTenantAliases({ file: tenant.aliasesFile, initial: tenant.aliases, log });
}

/** Goodput's live SLO classes (watching INFERMETER_SLO_FILE), when an SLO is configured; the metrics close it. */
function sloPolicy(config: Config, log: Logger): SloPolicy | undefined {
  if (config.slo.classes.length === 0 && config.slo.file === undefined) return undefined;
  return createSloPolicy({ config: config.slo, log });
}

/** The measurement of one infermeter (the primary's, with workers), reading the data plane through `plane`. */
export function createMeasurement(config: Config, options: StartOptions, plane: DataPlaneReadings): Measurement {
  const { log } = options;
  const clock = options.clock ?? monotonicClock;
  const aliases = tenantAliases(config, log);
  const readiness = upstreamReadiness(config, log, clock);
  const metrics = buildMetrics(config, options, plane, aliases, readiness);
  const prices = startPrices(config, log, { metrics, clock });
  const ledger = config.usage === undefined ? undefined : startLedger(config.usage, metrics.registry, log);
  return { metrics, events: withReadinessNews(metrics.proxy, readiness), readiness, aliases, prices, ledger };
}

function buildMetrics(config: Config, options: StartOptions, plane: DataPlaneReadings, aliases?: TenantAliases, readiness?: UpstreamReadiness): Metrics {
  const upstream = requireUpstream(config);
  const clock = options.clock ?? monotonicClock;
  const modelsUrl = new URL(`${upstream.pathname.replace(/\/$/, '')}/v1/models`, upstream.origin);
  const metrics = createMetrics({
    clock,
    throughputWindowSeconds: config.throughputWindowSeconds,
    version: VERSION,
    dialects: config.dialects,
    ...(options.dialectTable === undefined ? {} : { dialectTable: options.dialectTable }),
    apiTable: options.apiTable,
    buckets: config.buckets,
    aom: config.aom,
    openConnections: plane.connections,
    heldBodyBytes: plane.heldBodyBytes,
    jsonWindow: config.jsonWindow,
    stallSeconds: config.stallSeconds,
    promptBands: config.promptBands,
    maxModels: config.limits.maxModels,
    modelsUrl,
    ...(config.upstreamMetrics === undefined
      ? {}
      : {
          upstreamMetrics: {
            metricsUrl: config.upstreamMetrics,
            jsonUrl: config.upstreamMetricsJson,
            modelsUrl,
            intervalMs: config.upstreamMetricsIntervalSeconds * 1000,
            timeoutMs: config.upstreamMetricsTimeoutMs,
            relay: { enabled: config.relayUpstreamMetrics, intervalMs: config.relayIntervalSeconds * 1000, maxBytes: RELAY_MAX_BYTES },
            log: options.log,
            now: clock,
            // The scraper's news is the upstream's only when it reads the upstream's own address.
            reached: sameAddress(config.upstreamMetrics, upstream) ? readiness?.heard : undefined,
          },
        }),
    ...(options.container === undefined ? {} : { container: options.container }),
    otel: otelOptions(config),
    tenants: aliases === undefined ? undefined : { max: config.tenant.max, aliases },
    slo: sloPolicy(config, options.log),
    ...(plane.workersLoopDelay === undefined ? {} : { workersLoopDelay: plane.workersLoopDelay }),
    ...(plane.workersProcess === undefined ? {} : { workersProcess: plane.workersProcess }),
  });
  // A request the upstream answered (its head came): a connection that worked.
  if (readiness !== undefined) metrics.addObserver(readiness);
  return metrics;
}

/** The otel dialect's and the OTLP export's constant attributes: the provider and the upstream's address. */
function otelOptions(config: Config): OtelOptions {
  const upstream = requireUpstream(config);
  const port = upstream.port === '' ? (upstream.protocol === 'https:' ? 443 : 80) : Number(upstream.port);
  return { providerName: config.otel.providerName, serverAddress: upstream.hostname.replace(/^\[(.*)\]$/, '$1'), serverPort: port };
}

/** The OTLP export of the otel measurements, when an endpoint is configured (the SDK is loaded only then). */
export async function startExport(config: Config, metrics: Metrics, log: Logger): Promise<OtlpExport | undefined> {
  if (config.otel.export === undefined) return undefined;
  return startOtlpExport({ config: config.otel.export, otel: otelOptions(config), buckets: config.buckets, metrics, log });
}
