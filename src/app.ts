// The composition root: builds the metrics, the data plane and the management and metrics
// servers from one validated Config, starts them, and stops them. Used by the CLI, the demo
// and the tests alike, so what the tests exercise is what runs.
import type { Server } from 'node:http';
import type { Config } from './config/config.ts';
import { createAccessLog } from './access-log.ts';
import { createDataPlane, type DataPlane } from './data-plane/data-plane.ts';
import { createInjectionSwitch } from './data-plane/usage-injection.ts';
import type { Logger } from './log.ts';
import { createManagementApp } from './management/management-app.ts';
import { createMetricsApp } from './management/metrics-app.ts';
import { closeServer, createAppServer, hostPort, listen, urlOf } from './management/listen.ts';
import { monotonicClock, type Clock } from './measure/clock.ts';
import type { ContainerSamplerOptions } from './metrics/container/container-sampler.ts';
import { createMetrics, type Metrics } from './metrics/metrics.ts';
import { VERSION } from './version.ts';
import { Hono } from 'hono';

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
  /** Stops accepting and closes the listeners. */
  close(): Promise<void>;
}

export interface StartOptions {
  readonly log: Logger;
  readonly clock?: Clock;
  /** Sources of the AOM container metrics (tests pass fixtures). */
  readonly container?: ContainerSamplerOptions;
}

export async function startInfermeter(config: Config, options: StartOptions): Promise<Infermeter> {
  const { log } = options;
  const upstream = config.upstream;
  if (upstream === undefined) throw new Error('INFERMETER_UPSTREAM is required to start the proxy');
  const clock = options.clock ?? monotonicClock;
  let dataPlane: DataPlane | undefined;
  const metrics = createMetrics({
    clock,
    throughputWindowSeconds: config.throughputWindowSeconds,
    version: VERSION,
    dialects: config.dialects,
    buckets: config.buckets,
    aom: config.aom,
    openConnections: () => dataPlane?.connections() ?? 0,
    jsonWindow: config.jsonWindow,
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
            log,
            now: clock,
          },
        }),
    ...(options.container === undefined ? {} : { container: options.container }),
  });

  let ready = false;
  const accessLog =
    config.accessLog === undefined
      ? undefined
      : createAccessLog({ target: config.accessLog, maxPendingBytes: ACCESS_LOG_MAX_PENDING_BYTES, dropped: metrics.proxy.accessLogDropped });
  const usageInjection = createInjectionSwitch(
    config.injectUsage,
    { active: metrics.proxy.injectionActive, injected: metrics.proxy.usageInjected, stripped: metrics.proxy.usageStripped },
    (msg) => log.warn(msg),
  );
  dataPlane = createDataPlane({
    upstream,
    clock,
    sink: metrics.sink,
    log,
    maxInspectBytes: config.maxInspectBytes,
    maxResponseInspectBytes: config.maxResponseInspectBytes,
    maxEventBytes: config.maxEventBytes,
    uninspected: metrics.proxy.uninspected,
    tapProblem: metrics.proxy.tapProblem,
    proxyError: metrics.proxy.proxyError,
    usageInjection: config.injectUsage ? usageInjection : undefined,
    accessLog,
  });

  const plane = dataPlane;
  let instance = `${config.managementHost}:${config.managementPort}`;
  const management = createManagementApp({ ready: () => ready, metrics, job: config.jsonJob, instance: () => instance });
  const metricsApp = createMetricsApp(metrics, config.metricsEnabled);
  // One listener serves both when the ports are equal (and fixed); port 0 always means a listener of its own.
  const shared = config.metricsPort === config.managementPort && config.managementPort !== 0;
  const servers: Server[] = [];
  try {
    const dataAddress = await listen(plane.server, config.host, config.port);
    let managementServer: Server;
    if (shared) {
      const both = new Hono();
      both.route('/', management);
      both.route('/', metricsApp);
      managementServer = createAppServer(both);
    } else {
      managementServer = createAppServer(management);
    }
    servers.push(managementServer);
    const managementAddress = await listen(managementServer, config.managementHost, config.managementPort);
    instance = hostPort(managementAddress);
    let metricsUrl: string | undefined;
    if (shared) {
      if (config.metricsEnabled) metricsUrl = `${urlOf(managementAddress)}/metrics`;
    } else if (config.metricsEnabled) {
      const metricsServer = createAppServer(metricsApp);
      servers.push(metricsServer);
      metricsUrl = `${urlOf(await listen(metricsServer, config.managementHost, config.metricsPort))}/metrics`;
    }
    metrics.start();
    ready = true;
    const dataUrl = urlOf(dataAddress);
    const managementUrl = urlOf(managementAddress);
    log.info('infermeter started', {
      version: VERSION,
      data: dataUrl,
      upstream: upstream.origin + upstream.pathname.replace(/\/$/, ''),
      management: managementUrl,
      metrics: metricsUrl ?? 'disabled',
      upstream_metrics: config.upstreamMetrics?.href ?? 'off',
    });
    return {
      dataUrl,
      managementUrl,
      metricsUrl,
      metrics,
      async close() {
        ready = false;
        metrics.close();
        await Promise.all([plane.close(), ...servers.map(closeServer)]);
        await accessLog?.close();
      },
    };
  } catch (error) {
    metrics.close();
    await Promise.all([plane.close(), ...servers.map(closeServer)]);
    throw error;
  }
}
