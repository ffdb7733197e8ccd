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
  /**
   * The client asks for usage (`stream_options.include_usage`). Without it (the default, what
   * most clients send) infermeter's default config injects the field and strips the usage chunk
   * on the way back: the path users run.
   */
  readonly includeUsage?: boolean;
  /** A new connection per request, closed after it (curl, most scripts), instead of the agent's pool. */
  readonly freshConnections?: boolean;
  /** The user message's text in bytes, prose (default: one short sentence; real prompts run to many KB). */
  readonly promptBytes?: number;
  /** The request's path (default `/v1/chat/completions`); another sends the same request on a route infermeter does not measure. */
  readonly path?: string;
}

export interface LoadResult {
  readonly ttftMs: number[];
  readonly e2eMs: number[];
  readonly events: number;
  readonly wallSeconds: number;
  readonly errors: number;
  /** What each error was, with how many: see `failureKind`. */
  readonly failures: ReadonlyMap<string, number>;
}

/** Prose of `bytes` bytes, with the quotes and newlines a prompt has (escaped in its JSON). */
const prose = (bytes: number): string =>
  'Measure the hop, not the model: a "quoted" phrase, a list,\n- and an item.\n'.repeat(Math.ceil(bytes / 70)).slice(0, bytes);

const body = (includeUsage: boolean, promptBytes: number | undefined) =>
  JSON.stringify({
    model: 'bench-model',
    stream: true,
    ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
    messages: [{ role: 'user', content: promptBytes === undefined ? 'Measure the hop, not the model.' : prose(promptBytes) }],
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

const DONE = Buffer.from('data: [DONE]\n\n');
/** A request whose connection is silent this long is given up (the scenarios' gaps are at most 50 ms). */
const STALL_MS = 30_000;

/**
 * An error named so that its cause can be told apart afterwards: the socket error's code, when
 * it came (before the response's head, or in its body), and whether the agent had reused a
 * kept-alive connection for it (the race of a request sent on a connection the server is
 * closing shows as a reset on a reused socket, before the response).
 */
function failureKind(error: NodeJS.ErrnoException, phase: 'before the response' | 'in the body', reused: boolean): string {
  return `${error.code ?? error.message} ${phase}, ${reused ? 'reused' : 'new'} connection`;
}

/** A JSON request's headers for the bench's upstream (bench/upstream.ts): the stream's shape it is to answer with. */
export function benchHeaders(payload: string, shape: Pick<Scenario, 'tokens' | 'ttftMs' | 'gapMs'>, id?: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(payload)),
    ...(id === undefined ? {} : { 'x-request-id': id }),
    'x-bench-tokens': String(shape.tokens),
    'x-bench-ttft-ms': String(shape.ttftMs),
    'x-bench-gap-ms': String(shape.gapMs),
  };
}

export async function runLoad(baseUrl: string, scenario: Scenario, agent: http.Agent): Promise<LoadResult> {
  const url = new URL(scenario.path ?? '/v1/chat/completions', baseUrl);
  const ttftMs: number[] = [];
  const e2eMs: number[] = [];
  let events = 0;
  let errors = 0;
  const failures = new Map<string, number>();
  const fail = (kind: string) => {
    errors++;
    failures.set(kind, (failures.get(kind) ?? 0) + 1);
  };
  let next = 0;
  const BODY = body(scenario.includeUsage === true, scenario.promptBytes);
  const via = scenario.freshConnections === true ? false : agent;
  const headers = benchHeaders(BODY, scenario);
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      let first: number | undefined;
      let settled = false;
      const settle = (kind?: string) => {
        if (settled) return;
        settled = true;
        if (kind !== undefined) fail(kind);
        resolve();
      };
      const req = http.request(url, { method: 'POST', agent: via, headers }, (res) => {
        // The stream's last bytes: a response that ends without [DONE] was cut short.
        let tail: Buffer | undefined;
        res.on('data', (chunk: Buffer) => {
          first ??= performance.now();
          events += countEvents(chunk);
          tail = chunk.length >= DONE.length || tail === undefined ? chunk : Buffer.concat([tail, chunk]);
        });
        res.on('end', () => {
          const end = performance.now();
          ttftMs.push((first ?? end) - t0);
          e2eMs.push(end - t0);
          if (res.statusCode !== 200) settle(`status ${res.statusCode}`);
          else if (tail === undefined || tail.length < DONE.length || !tail.subarray(tail.length - DONE.length).equals(DONE)) settle('ended without [DONE]');
          else settle();
        });
        res.on('error', (error: NodeJS.ErrnoException) => settle(failureKind(error, 'in the body', req.reusedSocket)));
        res.on('close', () => settle(res.complete ? undefined : `closed in the body, ${req.reusedSocket ? 'reused' : 'new'} connection`));
      });
      req.on('error', (error: NodeJS.ErrnoException) => settle(failureKind(error, 'before the response', req.reusedSocket)));
      // A request that stalls is a failure counted, not a run that never ends (a full run once
      // waited on a reference target's stalled response for good).
      req.setTimeout(STALL_MS, () => {
        settle(`no bytes for ${STALL_MS / 1000} s, ${req.reusedSocket ? 'reused' : 'new'} connection`);
        req.destroy();
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
  return { ttftMs, e2eMs, events, wallSeconds: (performance.now() - start) / 1000, errors, failures };
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
