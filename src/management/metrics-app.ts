// GET /metrics: the Prometheus exposition, rendered at scrape time in pieces that give the event
// loop back between them (metrics.renderPieces) and streamed as those pieces, in rounds shared
// by the scrapes that wait for them, at the pace of their slowest reader (scrape-rounds.ts):
// a flood of scrapes costs one render at a time and a piece or two of memory, and a scraper
// that does not read is dropped. MindIE's switch MIES_SERVICE_MONITOR_MODE can turn it off, as
// it does on MindIE itself.
import { Hono } from 'hono';
import type { Metrics } from '../metrics/metrics.ts';
import { wantsOpenMetrics } from '../metrics/exposition/openmetrics.ts';
import { requireBearer } from '../bearer-token.ts';
import { createScrapeRounds, type ScrapeRoundOptions } from './scrape-rounds.ts';

/** Scrapes in progress or waiting at once (a Prometheus pair and then some); the rest get 503. */
const MAX_SCRAPES = 16;
/** A scraper that takes no piece of its answer for this long is dropped (ms). */
const SCRAPE_STALL_MS = 5000;
/** A scrape not done after this long, its wait for a round included, is dropped (ms). */
const SCRAPE_TOTAL_MS = 300_000;
/** Connections open at once on a listener that serves /metrics; Node closes those past it. */
export const METRICS_MAX_CONNECTIONS = 64;

const DEFAULT_ROUNDS: ScrapeRoundOptions = { maxScrapes: MAX_SCRAPES, stallMs: SCRAPE_STALL_MS, totalMs: SCRAPE_TOTAL_MS };

/** `beforeScrape` is awaited first: with workers, their batched events reach the primary. */
export function createMetricsApp(
  metrics: Metrics,
  enabled: boolean,
  beforeScrape?: () => Promise<void>,
  token?: string,
  rounds: ScrapeRoundOptions = DEFAULT_ROUNDS,
): Hono {
  const app = new Hono();
  // One round of scrapes per format: [Prometheus text, OpenMetrics].
  const scrapes = [createScrapeRounds(metrics, rounds, false), createScrapeRounds(metrics, rounds, true)] as const;
  if (token !== undefined) app.use('*', requireBearer(token));
  app.get('/metrics', async (c) => {
    if (!enabled) return c.text('metrics are disabled: MIES_SERVICE_MONITOR_MODE is set to a value other than 1\n', 404);
    // HEAD is routed here as GET and its body dropped unread: it must not join a round and hold it.
    if (c.req.raw.method === 'HEAD') return c.body(null, 200, { 'content-type': metrics.contentType });
    await beforeScrape?.();
    // OpenMetrics (with exemplars) to a scraper that prefers it, as Prometheus does.
    const om = wantsOpenMetrics(c.req.header('accept'));
    // Under node:http (@hono/node-server), a dropped scraper's connection is cut at once.
    const outgoing = (c.env as { outgoing?: { destroy(): void } } | undefined)?.outgoing;
    const body = scrapes[om ? 1 : 0].join(outgoing === undefined ? undefined : () => outgoing.destroy());
    if (body === undefined) return c.text(`${rounds.maxScrapes} scrapes are in progress or waiting; try again later\n`, 503, { 'retry-after': '1' });
    return c.body(body, 200, { 'content-type': om ? metrics.openMetricsContentType : metrics.contentType });
  });
  return app;
}
