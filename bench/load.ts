// The load client: streams N requests at concurrency C and measures, per request on the
// client side, time to first token (first body bytes after the headers), end-to-end time and
// the events received.
import http from 'node:http';

export interface Scenario {
  readonly name: string;
  readonly requests: number;
  readonly concurrency: number;
  readonly tokens: number;
  readonly ttftMs: number;
  readonly gapMs: number;
}

export interface LoadResult {
  readonly ttftMs: number[];
  readonly e2eMs: number[];
  readonly events: number;
  readonly wallSeconds: number;
  readonly errors: number;
}

const BODY = JSON.stringify({
  model: 'bench-model',
  stream: true,
  stream_options: { include_usage: true },
  messages: [{ role: 'user', content: 'Measure the hop, not the model.' }],
});

function countEvents(chunk: Buffer): number {
  let n = 0;
  let i = chunk.indexOf('\n\n');
  while (i !== -1) {
    n++;
    i = chunk.indexOf('\n\n', i + 2);
  }
  return n;
}

export async function runLoad(baseUrl: string, scenario: Scenario, agent: http.Agent): Promise<LoadResult> {
  const url = new URL('/v1/chat/completions', baseUrl);
  const ttftMs: number[] = [];
  const e2eMs: number[] = [];
  let events = 0;
  let errors = 0;
  let next = 0;
  const headers = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(BODY)),
    'x-bench-tokens': String(scenario.tokens),
    'x-bench-ttft-ms': String(scenario.ttftMs),
    'x-bench-gap-ms': String(scenario.gapMs),
  };
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      let first: number | undefined;
      const req = http.request(url, { method: 'POST', agent, headers }, (res) => {
        res.on('data', (chunk: Buffer) => {
          first ??= performance.now();
          events += countEvents(chunk);
        });
        res.on('end', () => {
          const end = performance.now();
          ttftMs.push((first ?? end) - t0);
          e2eMs.push(end - t0);
          resolve();
        });
        res.on('error', () => {
          errors++;
          resolve();
        });
      });
      req.on('error', () => {
        errors++;
        resolve();
      });
      req.end(BODY);
    });
  const start = performance.now();
  await Promise.all(
    Array.from({ length: scenario.concurrency }, async () => {
      while (next < scenario.requests) {
        next++;
        await one();
      }
    }),
  );
  return { ttftMs, e2eMs, events, wallSeconds: (performance.now() - start) / 1000, errors };
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}
