// The management port: /health answers while the process serves, /ready only while the data
// plane accepts traffic and the upstream can be reached (a load balancer stops sending at 503), /metrics-json the spec's
// rolling averages, /dashboard the live page (dashboard-app.ts). GET / answers an index of what
// is served where, and so does /metrics when the metrics have a port of their own: a newcomer
// who tries the wrong port is told the right one.
import { Hono } from 'hono';
import type { Metrics } from '../metrics/metrics.ts';
import { requireBearer } from '../bearer-token.ts';
import { isDashboardShell, registerDashboard, type DashboardRouteOptions } from './dashboard-app.ts';
import { metricsJson, type MetricsJsonOptions } from './metrics-json.ts';

export interface ManagementOptions extends MetricsJsonOptions {
  readonly ready: () => boolean;
  /** Whether the upstream can be reached (upstream-readiness.ts); none: /ready does not follow it. */
  readonly upstreamReachable?: (() => boolean | Promise<boolean>) | undefined;
  readonly metrics: Metrics;
  /** Awaited before the figures are read (with workers: their batched events arrive first). */
  readonly beforeScrape?: (() => Promise<void>) | undefined;
  /** Bearer token required for everything but /health and /ready. */
  readonly token?: string | undefined;
  /** GET /dashboard and its data; none: no dashboard routes. */
  readonly dashboard?: DashboardRouteOptions | undefined;
  /** The index of GET /; none: no index. */
  readonly where?: ServiceWhere | undefined;
}

interface ServiceWhere {
  /** Whether /metrics is served on this listener too (the ports are the same). */
  readonly metricsHere: boolean;
  /** Where each plane listens, read when asked (ports of 0 are known once bound). */
  index(): { readonly version: string; readonly data: string; readonly management: string; readonly metrics: string | undefined };
}

function serviceIndex(where: ServiceWhere, dashboard: boolean): Record<string, unknown> {
  const at = where.index();
  return {
    service: 'infermeter',
    version: at.version,
    data: { url: at.data, serves: "the model server's API for clients (base URL for OpenAI clients: this + /v1), measured" },
    management: {
      url: at.management,
      serves: {
        '/health': 'liveness',
        '/ready': 'readiness (503 while starting, draining, or the model server cannot be reached)',
        '/metrics-json': "MindIE's JSON metrics",
        ...(dashboard ? { '/dashboard': 'the live dashboard' } : {}),
      },
    },
    metrics: at.metrics ?? 'disabled (MIES_SERVICE_MONITOR_MODE)',
  };
}

export function createManagementApp(options: ManagementOptions): Hono {
  const app = new Hono();
  const dashboard = options.dashboard;
  if (options.token !== undefined) app.use('*', requireBearer(options.token, dashboard === undefined ? undefined : isDashboardShell));
  app.get('/health', (c) => c.json({ status: 'healthy' }));
  app.get('/ready', async (c) => {
    if (!options.ready()) return c.json({ status: 'not ready' }, 503);
    if ((await options.upstreamReachable?.()) === false) return c.json({ status: 'not ready', reason: 'the model server cannot be reached' }, 503);
    return c.json({ status: 'ready' });
  });
  app.get('/metrics-json', async (c) => {
    await options.beforeScrape?.();
    return c.json(metricsJson(options.metrics, options));
  });
  if (dashboard !== undefined) registerDashboard(app, dashboard);
  const where = options.where;
  if (where !== undefined) {
    app.get('/', (c) => c.json(serviceIndex(where, dashboard !== undefined)));
    // Not found here, but where it is: the status stays 404 for scrapers pointed at this port.
    if (!where.metricsHere)
      app.get('/metrics', (c) =>
        c.json(
          {
            error: `/metrics is served on the metrics port: ${where.index().metrics ?? 'disabled (MIES_SERVICE_MONITOR_MODE)'}`,
            ...serviceIndex(where, dashboard !== undefined),
          },
          404,
        ),
      );
  }
  return app;
}
