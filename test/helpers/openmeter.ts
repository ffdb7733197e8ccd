// A local stand-in for OpenMeter's ingest API, as the usage sink meets it: `POST /api/v1/events`
// with `application/cloudevents-batch+json` (a JSON array of CloudEvents), 204 when taken,
// de-duplicated by (id, source) as OpenMeter does; a batch holding an event it refuses (here:
// `data.model` "refuse-me", or no `id`) answered 400 as a whole, as OpenMeter validates a batch.
// `down` makes it answer 503 (or another status) until set back.
import http from 'node:http';
import type { TestContext } from 'node:test';
import type { UsageEvent } from '../../src/ledger/usage-event.ts';
import { listen } from './listen.ts';

export interface OpenMeterStandIn {
  readonly url: string;
  /** The events taken, de-duplicated by (id, source), in arrival order. */
  readonly events: UsageEvent[];
  /** Every event in every accepted batch, duplicates included. */
  received: number;
  /** Requests answered, by status. */
  readonly statuses: Map<number, number>;
  /** The Authorization headers seen. */
  readonly authorizations: Set<string | undefined>;
  /** A status to answer every request with (503: down), or undefined (up). */
  down: number | undefined;
  /** Resolves once `n` distinct events were taken. */
  taken(n: number): Promise<void>;
  close(): Promise<void>;
}

export async function startOpenMeter(t: Pick<TestContext, 'after'>): Promise<OpenMeterStandIn> {
  const seen = new Set<string>();
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const answer = (status: number, body = ''): void => {
        om.statuses.set(status, (om.statuses.get(status) ?? 0) + 1);
        res.writeHead(status, { 'content-type': 'application/problem+json' }).end(body);
      };
      om.authorizations.add(req.headers.authorization);
      if (om.down !== undefined) return answer(om.down, '{"title":"unavailable"}');
      if (req.method !== 'POST' || req.url !== '/api/v1/events') return answer(404);
      if (req.headers['content-type'] !== 'application/cloudevents-batch+json') return answer(415);
      let batch: UsageEvent[];
      try {
        batch = JSON.parse(Buffer.concat(chunks).toString()) as UsageEvent[];
      } catch {
        return answer(400, '{"title":"Bad Request","detail":"invalid JSON"}');
      }
      if (!Array.isArray(batch) || batch.some((e) => typeof e.id !== 'string' || (e.data as { model?: string })?.model === 'refuse-me')) {
        return answer(400, '{"title":"Bad Request","detail":"invalid event"}');
      }
      for (const e of batch) {
        om.received++;
        const key = `${e.id}\u0000${e.source}`;
        if (seen.has(key)) continue;
        seen.add(key);
        om.events.push(e);
      }
      for (const w of waiters.splice(0)) (om.events.length >= w.n ? w.resolve : () => waiters.push(w))();
      answer(204);
    });
  });
  const listening = await listen(t, server);
  const om: OpenMeterStandIn = {
    url: `${listening.url}/api/v1/events`,
    events: [],
    received: 0,
    statuses: new Map(),
    authorizations: new Set(),
    down: undefined,
    taken: (n) => (om.events.length >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }))),
    close: () => listening.close(),
  };
  return om;
}
