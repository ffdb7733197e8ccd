// The management listener (/, /health, /ready, /metrics-json, /dashboard) and the metrics
// listener (/metrics), or one listener for both when their ports are the same fixed port: built
// from the Config and the metrics, for one process and for a primary alike.
import type { Server } from 'node:http';
import { Hono } from 'hono';
import type { Config } from '../config/config.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { VERSION } from '../version.ts';
import { loadDashboardAssets } from './dashboard-app.ts';
import { createDashboardFeed } from './dashboard-feed.ts';
import { closeServer, createAppServer, hostPort, listen, urlOf, type ListenPolicy } from './listen.ts';
import { createManagementApp } from './management-app.ts';
import { createMetricsApp, METRICS_MAX_CONNECTIONS } from './metrics-app.ts';
import type { UpstreamReadiness } from './upstream-readiness.ts';

export interface Management {
  readonly managementUrl: string;
  readonly metricsUrl: string | undefined;
  setReady(ready: boolean): void;
  close(): Promise<void>;
}

/** The management listener (/health, /ready, /metrics-json, /dashboard) and the metrics listener (/metrics). */
export async function startManagement(
  config: Config,
  metrics: Metrics,
  dataUrl: string,
  beforeScrape?: () => Promise<void>,
  upstream?: UpstreamReadiness,
): Promise<Management> {
  let ready = false;
  let instance = `${config.managementHost}:${config.managementPort}`;
  const { metricsToken: token, managementTls, metricsTls } = config.security;
  // The live page's snapshots (one a second, off the request path); with workers, they flush first.
  const feed = createDashboardFeed({ metrics, beforeSnapshot: beforeScrape });
  const dashboard = { feed, assets: loadDashboardAssets(token !== undefined) };
  // One listener serves both when the ports are equal (and fixed); port 0 always means a listener of its own.
  const shared = config.metricsPort === config.managementPort && config.managementPort !== 0;
  const managementScheme = managementTls === undefined ? 'http' : 'https';
  let metricsUrl: string | undefined;
  const where = {
    metricsHere: shared,
    index: () => ({ version: VERSION, data: dataUrl, management: `${managementScheme}://${instance}`, metrics: metricsUrl }),
  };
  const management = createManagementApp({
    ready: () => ready,
    upstreamReachable: upstream?.check,
    metrics,
    job: config.jsonJob,
    instance: () => instance,
    beforeScrape,
    token,
    dashboard,
    where,
  });
  const metricsApp = createMetricsApp(metrics, config.metricsEnabled, beforeScrape, token);
  const servers: Server[] = [];
  try {
    let managementServer: Server;
    if (shared) {
      const both = new Hono();
      both.route('/', management);
      both.route('/', metricsApp);
      managementServer = createAppServer(both, managementTls);
      managementServer.maxConnections = METRICS_MAX_CONNECTIONS;
    } else {
      managementServer = createAppServer(management, managementTls);
    }
    servers.push(managementServer);
    const managementAddress = await listen(managementServer, config.managementHost, config.managementPort, managementPolicy(config));
    feed.start();
    instance = hostPort(managementAddress);
    if (shared) {
      if (config.metricsEnabled) metricsUrl = `${urlOf(managementAddress, managementScheme)}/metrics`;
    } else if (config.metricsEnabled) {
      const metricsServer = createAppServer(metricsApp, metricsTls);
      metricsServer.maxConnections = METRICS_MAX_CONNECTIONS;
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

const managementPolicy = (config: Config): ListenPolicy => ({
  allowAll: config.security.allowAllZeroIp || config.managementHostDefaulted,
  variable: 'INFERMETER_MANAGEMENT_HOST',
});
