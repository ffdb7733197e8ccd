// GET /metrics: the Prometheus exposition, rendered at scrape time in pieces that give the event
// loop back between them (metrics.renderPieces), and sent as those pieces. Scrapes that come
// while a render is under way share it: a flood of scrapes costs one render at a time. MindIE's
// switch MIES_SERVICE_MONITOR_MODE can turn it off, as it does on MindIE itself.
import { Hono } from 'hono';
import type { Metrics } from '../metrics/metrics.ts';
import { requireBearer } from './bearer-token.ts';

/** `beforeScrape` is awaited first: with workers, their batched events reach the primary. */
export function createMetricsApp(metrics: Metrics, enabled: boolean, beforeScrape?: () => Promise<void>, token?: string): Hono {
  const app = new Hono();
  let rendering: Promise<Buffer[]> | undefined;
  const renderBuffers = async (): Promise<Buffer[]> => {
    const pieces: Buffer[] = [];
    for await (const piece of metrics.renderPieces()) pieces.push(Buffer.from(piece));
    return pieces;
  };
  if (token !== undefined) app.use('*', requireBearer(token));
  app.get('/metrics', async (c) => {
    if (!enabled) return c.text('metrics are disabled: MIES_SERVICE_MONITOR_MODE is set to a value other than 1\n', 404);
    await beforeScrape?.();
    const served = metrics.scrapeStarted();
    rendering ??= renderBuffers().finally(() => (rendering = undefined));
    const pieces = await rendering;
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
    return c.body(body, 200, { 'content-type': metrics.contentType, 'content-length': String(bytes) });
  });
  return app;
}
