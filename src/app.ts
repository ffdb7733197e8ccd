// The composition root: builds the metrics, the data plane and the management and metrics
// servers from one validated Config, starts them, and stops them. Used by the CLI, the demo
// and the tests alike, so what the tests exercise is what runs. With INFERMETER_WORKERS > 1 the
// same pieces are split between a primary (metrics, management) and workers (data plane): see
// cluster/.
import type { Server } from 'node:http';
import { Hono } from 'hono';
import type { Config } from './config/config.ts';
import { createAccessLog, type AccessLog } from './access-log.ts';
import { createDataPlane, type DataPlane } from './data-plane/data-plane.ts';
import type { LifecycleViolation } from './data-plane/lifecycle.ts';
import { createInjectionSwitch } from './data-plane/usage-injection.ts';
import type { Logger } from './log.ts';
import { createManagementApp } from './management/management-app.ts';
import { loadDashboardAssets } from './management/dashboard-app.ts';
import { createDashboardFeed } from './management/dashboard-feed.ts';
import { createMetricsApp } from './management/metrics-app.ts';
import type { LoopDelayReading } from './metrics/loop-delay.ts';
import { closeServer, createAppServer, hostPort, listen, urlOf, type ListenPolicy } from './management/listen.ts';
import { monotonicClock, type Clock } from './measure/clock.ts';
import type { MeasurementSink } from './measure/request-timer.ts';
import type { ContainerSamplerOptions } from './metrics/container/container-sampler.ts';
import { createMetrics, type Metrics } from './metrics/metrics.ts';
import type { OtelOptions } from './metrics/dialects/otel.ts';
import { startOtlpExport, type OtlpExport } from './metrics/otlp-export.ts';
import type { ProxyEvents } from './metrics/proxy-families.ts';
import { VERSION } from './version.ts';

/** Access log bytes that may wait for the writer before lines are dropped. */
const ACCESS_LOG_MAX_PENDING_BYTES = 4 * 1024 * 1024;

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
}

function requireUpstream(config: Config): URL {
  if (config.upstream === undefined) throw new Error('INFERMETER_UPSTREAM is required to start the proxy');
  return config.upstream;
}

/** The metrics of one infermeter (the primary's, with workers). */
export function buildMetrics(config: Config, options: StartOptions, openConnections: () => number, workersLoopDelay?: () => LoopDelayReading): Metrics {
  const upstream = requireUpstream(config);
  const clock = options.clock ?? monotonicClock;
  return createMetrics({
    clock,
    throughputWindowSeconds: config.throughputWindowSeconds,
    version: VERSION,
    dialects: config.dialects,
    buckets: config.buckets,
    aom: config.aom,
    openConnections,
    jsonWindow: config.jsonWindow,
    maxModels: config.security.maxModels,
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
          },
        }),
    ...(options.container === undefined ? {} : { container: options.container }),
    otel: otelOptions(config),
    ...(workersLoopDelay === undefined ? {} : { workersLoopDelay }),
  });
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
): { dataPlane: DataPlane; accessLog: AccessLog | undefined } {
  const accessLog =
    config.accessLog === undefined
      ? undefined
      : createAccessLog({ target: config.accessLog, maxPendingBytes: ACCESS_LOG_MAX_PENDING_BYTES, dropped: events.accessLogDropped });
  const usageInjection = createInjectionSwitch(
    config.injectUsage,
    { active: events.injectionActive, injected: events.usageInjected, stripped: events.usageStripped },
    (msg) => log.warn(msg),
  );
  const dataPlane = createDataPlane({
    upstream: requireUpstream(config),
    clock,
    sink,
    log,
    maxInspectBytes: config.maxInspectBytes,
    maxResponseInspectBytes: config.maxResponseInspectBytes,
    maxEventBytes: config.maxEventBytes,
    uninspected: events.uninspected,
    tapProblem: events.tapProblem,
    proxyError: events.proxyError,
    usageInjection: config.injectUsage ? usageInjection : undefined,
    accessLog,
    tls: config.security.dataTls,
    upstreamCa: config.security.upstreamCa,
    limits: config.security,
    rejected: events.rejected,
    clientError: events.clientError,
    lifecycleViolation,
  });
  return { dataPlane, accessLog };
}

export interface Management {
  readonly managementUrl: string;
  readonly metricsUrl: string | undefined;
  setReady(ready: boolean): void;
  close(): Promise<void>;
}

/** The management listener (/health, /ready, /metrics-json, /dashboard) and the metrics listener (/metrics). */
export async function startManagement(config: Config, metrics: Metrics, beforeScrape?: () => Promise<void>): Promise<Management> {
  let ready = false;
  let instance = `${config.managementHost}:${config.managementPort}`;
  const { metricsToken: token, managementTls, metricsTls } = config.security;
  // The live page's snapshots (one a second, off the request path); with workers, they flush first.
  const feed = createDashboardFeed({ metrics, beforeSnapshot: beforeScrape });
  const dashboard = { feed, assets: loadDashboardAssets(token !== undefined) };
  const management = createManagementApp({ ready: () => ready, metrics, job: config.jsonJob, instance: () => instance, beforeScrape, token, dashboard });
  const metricsApp = createMetricsApp(metrics, config.metricsEnabled, beforeScrape, token);
  // One listener serves both when the ports are equal (and fixed); port 0 always means a listener of its own.
  const shared = config.metricsPort === config.managementPort && config.managementPort !== 0;
  const servers: Server[] = [];
  try {
    let managementServer: Server;
    if (shared) {
      const both = new Hono();
      both.route('/', management);
      both.route('/', metricsApp);
      managementServer = createAppServer(both, managementTls);
    } else {
      managementServer = createAppServer(management, managementTls);
    }
    servers.push(managementServer);
    const managementAddress = await listen(managementServer, config.managementHost, config.managementPort, managementPolicy(config));
    feed.start();
    instance = hostPort(managementAddress);
    const managementScheme = managementTls === undefined ? 'http' : 'https';
    let metricsUrl: string | undefined;
    if (shared) {
      if (config.metricsEnabled) metricsUrl = `${urlOf(managementAddress, managementScheme)}/metrics`;
    } else if (config.metricsEnabled) {
      const metricsServer = createAppServer(metricsApp, metricsTls);
      servers.push(metricsServer);
      metricsUrl = `${urlOf(await listen(metricsServer, config.managementHost, config.metricsPort, managementPolicy(config)), metricsTls === undefined ? 'http' : 'https')}/metrics`;
    }
    return {
      managementUrl: urlOf(managementAddress, managementScheme),
      metricsUrl,
      setReady: (r) => (ready = r),
      close: async () => {
        feed.stop();
        await Promise.all(servers.map(closeServer));
      },
    };
  } catch (error) {
    feed.stop();
    await Promise.all(servers.map(closeServer));
    throw error;
  }
}

/** What the configuration says at start without refusing it (certificates outside their validity). */
export function logStartWarnings(config: Config, log: Logger): void {
  for (const w of config.security.warnings) log.warn(w.msg, w.fields);
}

/** How the data port's host may be bound (INFERMETER_ALLOW_ALL_ZERO_IP). */
export const dataPolicy = (config: Config): ListenPolicy => ({ allowAll: config.security.allowAllZeroIp, variable: 'INFERMETER_HOST' });
const managementPolicy = (config: Config): ListenPolicy => ({ allowAll: config.security.allowAllZeroIp, variable: 'INFERMETER_MANAGEMENT_HOST' });

export function startedFields(config: Config, dataUrl: string, management: Management): Record<string, string | number> {
  const upstream = requireUpstream(config);
  return {
    version: VERSION,
    data: dataUrl,
    upstream: upstream.origin + upstream.pathname.replace(/\/$/, ''),
    management: management.managementUrl,
    metrics: management.metricsUrl ?? 'disabled',
    upstream_metrics: config.upstreamMetrics?.href ?? 'off',
  };
}

/** One process: data plane, metrics and management together. */
export async function startInfermeter(config: Config, options: StartOptions): Promise<Infermeter> {
  const { log } = options;
  logStartWarnings(config, log);
  const clock = options.clock ?? monotonicClock;
  let dataPlane: DataPlane | undefined;
  const metrics = buildMetrics(config, options, () => dataPlane?.connections() ?? 0);
  const built = buildDataPlane(config, log, clock, metrics.sink, metrics.proxy, options.lifecycleViolation);
  dataPlane = built.dataPlane;
  const plane = dataPlane;
  let management: Management | undefined;
  let otlp: OtlpExport | undefined;
  try {
    // Before the first request: the export hears every finished one.
    otlp = await startExport(config, metrics, log);
    const dataAddress = await listen(plane.server, config.host, config.port, dataPolicy(config));
    management = await startManagement(config, metrics);
    metrics.start();
    management.setReady(true);
    const dataUrl = urlOf(dataAddress, config.security.dataTls === undefined ? 'http' : 'https');
    log.info('infermeter started', startedFields(config, dataUrl, management));
    const m = management;
    const exporting = otlp;
    const close = async (): Promise<void> => {
      m.setReady(false);
      metrics.close();
      await Promise.all([plane.close(), m.close()]);
      await built.accessLog?.close();
      // Every request has finished: the last export carries them all (bounded).
      await exporting?.close();
    };
    return {
      dataUrl,
      managementUrl: m.managementUrl,
      metricsUrl: m.metricsUrl,
      metrics,
      dataServer: plane.server,
      close,
      async drain() {
        m.setReady(false);
        await plane.drain(config.security.drainTimeoutMs);
        await close();
      },
    };
  } catch (error) {
    metrics.close();
    await Promise.all([plane.close(), management?.close(), otlp?.close()]);
    throw error;
  }
}
