// The exposer_* families of MindIE's Chinese spec edition: how /metrics itself is used. The bytes and
// latency of a scrape are counted once it is served, so a scrape shows those of the scrapes
// before it; exposer_scrapes_total includes the scrape being served.
import type { Registry } from '@prometheus-io/client';
import { prometheus } from '../../prometheus-parts.ts';

export interface Exposer {
  /** Call when a scrape starts; returns the function to call with the size of what was sent. */
  scrapeStarted(): (bytes: number) => void;
  readonly metricNames: readonly string[];
}

export function createExposer(registry: Registry, now: () => number = () => performance.now()): Exposer {
  const { Counter, Summary } = prometheus();
  const bytes = new Counter({
    name: 'exposer_transferred_bytes_total',
    help: 'Transferred bytes to metrics services',
    registers: [registry],
  });
  const scrapes = new Counter({
    name: 'exposer_scrapes_total',
    help: 'Number of times metrics were scraped',
    registers: [registry],
  });
  const latencies = new Summary({
    name: 'exposer_request_latencies',
    help: 'Latencies of serving scrape requests, in microseconds',
    percentiles: [0.5, 0.9, 0.99],
    maxAgeSeconds: 600,
    ageBuckets: 5,
    registers: [registry],
  });
  return {
    metricNames: ['exposer_transferred_bytes_total', 'exposer_scrapes_total', 'exposer_request_latencies'],
    scrapeStarted() {
      const start = now();
      scrapes.inc();
      return (sent) => {
        bytes.inc(sent);
        latencies.observe((now() - start) * 1000);
      };
    },
  };
}
