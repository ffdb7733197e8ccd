// The composition root: builds the metrics, the data plane and the management and metrics
// servers from one validated Config, starts them, and stops them. Used by the CLI, the demo
// and the tests alike, so what the tests exercise is what runs. With INFERMETER_WORKERS > 1 the
// same pieces are split between a primary (metrics, management) and workers (data plane): see
// cluster/.
// Over 300 lines: the one place every part is wired to the others, start and stop in order.
import type { Config } from './config/config.ts';
import { exposureWarnings } from './config/exposure-warnings.ts';
import { containerEvidence } from './metrics/container/in-container.ts';
import { openAccessLog, type AccessLog } from './access-log.ts';
import { createDataPlane, type DataPlane } from './data-plane/data-plane.ts';
import type { LifecycleViolation } from './data-plane/lifecycle.ts';
import { createInjectionSwitch } from './data-plane/usage-injection.ts';
import type { Logger } from './log.ts';
import { sameAddress, upstreamReadiness, withReadinessNews, type UpstreamReadiness } from './management/upstream-readiness.ts';
import { startedFields } from './started-fields.ts';
import { startManagement, type Management } from './management/start-management.ts';
import { listen, urlOf, type ListenPolicy } from './management/listen.ts';
import { monotonicClock, type Clock } from './measure/clock.ts';
import type { MeasurementSink } from './measure/request-timer.ts';
import type { InferenceApiRow } from './measure/inference-apis.ts';
import type { ContainerSamplerOptions } from './metrics/container/container-sampler.ts';
import { createMetrics, type Metrics, type MetricsOptions } from './metrics/metrics.ts';
import type { OtelOptions } from './metrics/dialects/otel.ts';
import { DIALECTS, dialectRows, passThroughReport, type DialectRow } from './metrics/dialects/index.ts';
import { startOtlpExport, type OtlpExport } from './metrics/export/otlp-export.ts';
import type { HeldBodyBytes, ProxyEvents } from './metrics/own/proxy-families.ts';
import { createTenantAliases, type TenantAliases } from './tenants/tenant-aliases.ts';
import { createTenantOf } from './tenants/tenant-of.ts';
import { createSloPolicy, type SloPolicy } from './goodput/slo-policy.ts';
import { startUsageLedger, type UsageWriter } from './ledger/ledger.ts';
import { startPrices } from './chargeback/start.ts';
import { VERSION } from './version.ts';

/** The custom-metric limit of ModelArts: a relayed exposition larger than this is refused. */
const RELAY_MAX_BYTES = 240 * 1024;

export interface Infermeter {
  /** Base URL clients use instead of the model server's. */
  readonly dataUrl: string;
  readonly managementUrl: string;
  /** URL of GET /metrics, or undefined when MIES_SERVICE_MONITOR_MODE turned it off. */
  readonly metricsUrl: string | undefined;
  readonly metrics: Metrics;
  /** The data plane's listener, in this process (tests watch its requests); none in workers mode. */
  readonly dataServer?: DataPlane['server'];
  /** The data plane itself, in this process (tests read its connection counts); none in workers mode. */
  readonly dataPlane?: DataPlane;
  /** Reads INFERMETER_TENANT_ALIASES again (SIGHUP); a bad file keeps the mapping in use, with a warning. */
  reloadTenantAliases(): void;
  /** Reads INFERMETER_SLO_FILE again (SIGHUP); a bad file keeps the classes in use, with a warning. */
  reloadSlo(): void;
  /** Reads INFERMETER_PRICES_FILE again (SIGHUP); a bad file keeps the prices in use, with a warning naming the key. */
  reloadPrices(): void;
  /** Opens INFERMETER_ACCESS_LOG's file again at its path (SIGHUP, after a rotation moved it). */
  reopenAccessLog(): void;
  /** Stops accepting and closes the listeners. */
  close(): Promise<void>;
  /**
   * The graceful stop of SIGTERM/SIGINT: /ready answers 503 at once, the data plane stops
   * accepting, requests in flight finish (up to INFERMETER_DRAIN_TIMEOUT_MS), then everything
   * closes. /metrics answers throughout, so the last scrape sees every finished request.
   */
  drain(): Promise<void>;
}

export interface StartOptions {
  readonly log: Logger;
  readonly clock?: Clock;
  /** Sources of the AOM container metrics (tests pass fixtures). */
  readonly container?: ContainerSamplerOptions;
  /** An impossible move of a request's lifecycle (default: logged as an error; tests fail on it). */
  readonly lifecycleViolation?: (error: LifecycleViolation) => void;
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

function requireUpstream(config: Config): URL {
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

/** What the metrics read of the data plane (of every worker, with workers) at scrape time. */
export interface DataPlaneReadings {
  /** Client connections open now. */
  connections(): number;
  /** Bytes held in memory now against the budgets. */
  heldBodyBytes(): HeldBodyBytes;
}

/** The metrics of one infermeter (the primary's, with workers). */
export function buildMetrics(
  config: Config,
  options: StartOptions,
  plane: DataPlaneReadings,
  aliases?: TenantAliases,
  workersLoopDelay?: MetricsOptions['workersLoopDelay'],
  readiness?: UpstreamReadiness,
  workersProcess?: MetricsOptions['workersProcess'],
): Metrics {
  const upstream = requireUpstream(config);
  const clock = options.clock ?? monotonicClock;
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
    modelsUrl: new URL(`${upstream.pathname.replace(/\/$/, '')}/v1/models`, upstream.origin),
    ...(config.upstreamMetrics === undefined
      ? {}
      : {
          upstreamMetrics: {
            metricsUrl: config.upstreamMetrics,
            jsonUrl: config.upstreamMetricsJson,
            modelsUrl: new URL(`${upstream.pathname.replace(/\/$/, '')}/v1/models`, upstream.origin),
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
    ...(workersLoopDelay === undefined ? {} : { workersLoopDelay }),
    ...(workersProcess === undefined ? {} : { workersProcess }),
  });
  // A request the upstream answered (its head came): a connection that worked.
  if (readiness !== undefined) metrics.addObserver(readiness); // a request answered: a connection that worked
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

/** The data plane of one process, reporting to `sink` and `events`. */
export function buildDataPlane(
  config: Config,
  log: Logger,
  clock: Clock,
  sink: MeasurementSink,
  events: ProxyEvents,
  lifecycleViolation?: (error: LifecycleViolation) => void,
  aliases?: TenantAliases,
  dialectTable: readonly DialectRow[] = DIALECTS,
  usage?: UsageWriter,
  apiTable?: readonly InferenceApiRow[],
): { dataPlane: DataPlane; accessLog: AccessLog | undefined } {
  const accessLog = config.accessLog === undefined ? undefined : openAccessLog(config.accessLog, log, events.accessLogDropped);
  const usageInjection = createInjectionSwitch(
    config.injectUsage,
    { active: events.injectionActive, injected: events.usageInjected, stripped: events.usageStripped },
    (msg) => log.warn(msg),
    config.continuousUsage,
  );
  const dataPlane = createDataPlane({
    upstream: requireUpstream(config),
    clock,
    sink,
    log,
    maxInspectBytes: config.maxInspectBytes,
    maxHeldBodyBytes: config.maxHeldBodyBytes,
    maxHeldBodyBytesPerClient: config.maxHeldBodyBytesPerClient,
    bodyUnheld: events.bodyUnheld,
    maxResponseInspectBytes: config.maxResponseInspectBytes,
    maxHeldAnswerBytes: config.maxHeldAnswerBytes,
    maxEventBytes: config.maxEventBytes,
    uninspected: events.uninspected,
    tapProblem: events.tapProblem,
    proxyError: events.proxyError,
    retried: events.retried,
    usageInjection: config.injectUsage ? usageInjection : undefined,
    accessLog,
    usage,
    tls: config.security.dataTls,
    upstreamCa: config.security.upstreamCa,
    upstreamConnections: config.upstreamConnections,
    limits: config.limits,
    rejected: events.rejected,
    clientError: events.clientError,
    httpRequest: passThroughReport(dialectRows(config.dialects, dialectTable), events),
    lifecycleViolation,
    apiTable,
    tenantOf: aliases === undefined ? undefined : createTenantOf(config.tenant.source, aliases.current),
  });
  return { dataPlane, accessLog };
}

/**
 * What the configuration says at start without refusing it: certificates outside their
 * validity, an exposure the operator may not mean (exposure-warnings.ts). `container`: the
 * evidence of running in one (tests pass theirs).
 */
export function logStartWarnings(config: Config, log: Logger, container = containerEvidence({ root: '/', procRoot: '/proc', env: process.env })): void {
  for (const w of config.security.warnings) log.warn(w.msg, w.fields);
  for (const w of exposureWarnings(config, container)) log.warn(w.msg, w.fields);
}

/** How the data port's host may be bound (INFERMETER_ALLOW_ALL_ZERO_IP). */
// A default address (the image's INFERMETER_DEFAULT_HOST) may be every address: see Config.
export const dataPolicy = (config: Config): ListenPolicy => ({ allowAll: config.security.allowAllZeroIp || config.hostDefaulted, variable: 'INFERMETER_HOST' });

/**
 * Drains the data plane and logs how it ended. The data plane's drain resolves when its last
 * connection closed, or at the timeout right after cutting the rest: the connections still
 * counted then are the ones cut (their close events come later), each with its one request.
 */
export async function drainAndSay(plane: Pick<DataPlane, 'drain'>, timeoutMs: number, log: Logger): Promise<void> {
  const started = performance.now();
  // The connections still open at the drain timeout, cut: one request each under HTTP/1.
  const cut = await plane.drain(timeoutMs);
  const fields = { duration_ms: Math.round(performance.now() - started), timeout_ms: timeoutMs };
  if (cut === 0) log.info('drained: every request in flight finished', fields);
  else log.warn('drain timed out: requests still in flight were cut', { ...fields, requests_cut: cut });
}

/** One process: data plane, metrics and management together. */
export async function startInfermeter(config: Config, options: StartOptions): Promise<Infermeter> {
  const { log } = options;
  logStartWarnings(config, log);
  const clock = options.clock ?? monotonicClock;
  let dataPlane: DataPlane | undefined;
  const aliases = tenantAliases(config, log);
  const readiness = upstreamReadiness(config, log, clock);
  const metrics = buildMetrics(
    config,
    options,
    { connections: () => dataPlane?.connections() ?? 0, heldBodyBytes: () => dataPlane?.heldBodyBytes() ?? { request: 0, answer: 0 } },
    aliases,
    undefined,
    readiness,
  );
  const events = withReadinessNews(metrics.proxy, readiness);
  const prices = startPrices(config, log, { metrics, clock });
  const usage = startUsageLedger(config.usage, metrics.registry, log, prices?.recordPrice);
  const built = buildDataPlane(
    config,
    log,
    clock,
    metrics.sink,
    events,
    options.lifecycleViolation,
    aliases,
    options.dialectTable,
    usage?.writer,
    options.apiTable,
  );
  dataPlane = built.dataPlane;
  const plane = dataPlane;
  let management: Management | undefined;
  let otlp: OtlpExport | undefined;
  try {
    // Before the first request: the export hears every finished one.
    otlp = await startExport(config, metrics, log);
    const dataAddress = await listen(plane.server, config.host, config.port, dataPolicy(config));
    const dataUrl = urlOf(dataAddress, config.security.dataTls === undefined ? 'http' : 'https');
    management = await startManagement(config, metrics, dataUrl, undefined, readiness);
    metrics.start();
    management.setReady(true);
    log.info('infermeter started', startedFields(config, dataUrl, management));
    const m = management;
    const exporting = otlp;
    const close = async (): Promise<void> => {
      m.setReady(false);
      readiness?.close();
      aliases?.close();
      prices?.book.close();
      // A scrape in progress is answered whole before the metrics stop.
      await Promise.all([plane.close(), m.close()]);
      metrics.close();
      await built.accessLog?.close();
      await usage?.close();
      // Every request has finished: the last export carries them all (bounded).
      await exporting?.close();
    };
    return {
      dataUrl,
      managementUrl: m.managementUrl,
      metricsUrl: m.metricsUrl,
      metrics,
      dataServer: plane.server,
      dataPlane: plane,
      reloadTenantAliases: () => void aliases?.reload(),
      reloadSlo: () => void metrics.goodput?.policy.reload(),
      reloadPrices: () => void prices?.book.reload(),
      reopenAccessLog: () => built.accessLog?.reopen(),
      close,
      async drain() {
        m.setReady(false);
        await drainAndSay(plane, config.limits.drainTimeoutMs, log);
        await close();
      },
    };
  } catch (error) {
    readiness?.close();
    aliases?.close();
    prices?.book.close();
    metrics.close();
    await Promise.all([plane.close(), management?.close(), otlp?.close(), usage?.close()]);
    throw error;
  }
}
