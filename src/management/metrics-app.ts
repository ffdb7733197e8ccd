// GET /metrics: the Prometheus exposition, rendered at scrape time. MindIE's switch
// MIES_SERVICE_MONITOR_MODE can turn it off, as it does on MindIE itself.
import { Hono } from 'hono';
import type { Metrics } from '../metrics/metrics.ts';
import { requireBearer } from './bearer-token.ts';

/** `beforeScrape` is awaited first: with workers, their batched events reach the primary. */
export function createMetricsApp(metrics: Metrics, enabled: boolean, beforeScrape?: () => Promise<void>, token?: string): Hono {
  const app = new Hono();
  if (token !== undefined) app.use('*', requireBearer(token));
  app.get('/metrics', async (c) => {
    if (!enabled) return c.text('metrics are disabled: MIES_SERVICE_MONITOR_MODE is set to a value other than 1\n', 404);
    await beforeScrape?.();
    const served = metrics.scrapeStarted();
    const body = await metrics.render();
    served(Buffer.byteLength(body));
    return c.body(body, 200, { 'content-type': metrics.contentType });
  });
  return app;
}
