// The management port: /health answers while the process serves, /ready only while the data
// plane accepts traffic (a load balancer stops sending at 503), /metrics-json the spec's
// rolling averages, /dashboard the live page (dashboard-app.ts).
import { Hono } from 'hono';
import type { Metrics } from '../metrics/metrics.ts';
import { requireBearer } from './bearer-token.ts';
import { isDashboardShell, registerDashboard, type DashboardRouteOptions } from './dashboard-app.ts';
import { metricsJson, type MetricsJsonOptions } from './metrics-json.ts';

export interface ManagementOptions extends MetricsJsonOptions {
  readonly ready: () => boolean;
  readonly metrics: Metrics;
  /** Awaited before the figures are read (with workers: their batched events arrive first). */
  readonly beforeScrape?: (() => Promise<void>) | undefined;
  /** Bearer token required for everything but /health and /ready. */
  readonly token?: string | undefined;
  /** GET /dashboard and its data; none: no dashboard routes. */
  readonly dashboard?: DashboardRouteOptions | undefined;
}

export function createManagementApp(options: ManagementOptions): Hono {
  const app = new Hono();
  const dashboard = options.dashboard;
  if (options.token !== undefined) app.use('*', requireBearer(options.token, dashboard === undefined ? undefined : isDashboardShell));
  app.get('/health', (c) => c.json({ status: 'healthy' }));
  app.get('/ready', (c) => (options.ready() ? c.json({ status: 'ready' }) : c.json({ status: 'not ready' }, 503)));
  app.get('/metrics-json', async (c) => {
    await options.beforeScrape?.();
    return c.json(metricsJson(options.metrics, options));
  });
  if (dashboard !== undefined) registerDashboard(app, dashboard);
  return app;
}
