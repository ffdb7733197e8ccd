// GET /metrics: the Prometheus exposition, rendered at scrape time in pieces that give the event
// loop back between them (metrics.renderPieces), and sent as those pieces. Scrapes that come
// while a render is under way share it: a flood of scrapes costs one render at a time. MindIE's
// switch MIES_SERVICE_MONITOR_MODE can turn it off, as it does on MindIE itself.
import { Hono } from 'hono';
import type { Metrics } from '../metrics/metrics.ts';
import { wantsOpenMetrics } from '../metrics/openmetrics.ts';
import { requireBearer } from './bearer-token.ts';

/** `beforeScrape` is awaited first: with workers, their batched events reach the primary. */
export function createMetricsApp(metrics: Metrics, enabled: boolean, beforeScrape?: () => Promise<void>, token?: string): Hono {
  const app = new Hono();
  // One shared render per format: [Prometheus text, OpenMetrics].
  const rendering: [Promise<Buffer[]> | undefined, Promise<Buffer[]> | undefined] = [undefined, undefined];
  const renderBuffers = async (openMetrics: boolean): Promise<Buffer[]> => {
    const pieces: Buffer[] = [];
    for await (const piece of metrics.renderPieces(openMetrics)) pieces.push(Buffer.from(piece));
    return pieces;
  };
  if (token !== undefined) app.use('*', requireBearer(token));
  app.get('/metrics', async (c) => {
    if (!enabled) return c.text('metrics are disabled: MIES_SERVICE_MONITOR_MODE is set to a value other than 1\n', 404);
    await beforeScrape?.();
    const served = metrics.scrapeStarted();
    // OpenMetrics (with exemplars) to a scraper that prefers it, as Prometheus does.
    const om = wantsOpenMetrics(c.req.header('accept'));
    const slot = om ? 1 : 0;
    const pieces = await (rendering[slot] ??= renderBuffers(om).finally(() => (rendering[slot] = undefined)));
    let bytes = 0;
    for (const piece of pieces) bytes += piece.length;
    served(bytes);
    let next = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (next < pieces.length) controller.enqueue(pieces[next++]!);
        else controller.close();
      },
    });
    return c.body(body, 200, { 'content-type': om ? metrics.openMetricsContentType : metrics.contentType, 'content-length': String(bytes) });
  });
  return app;
}
