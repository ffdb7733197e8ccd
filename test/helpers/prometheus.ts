// Starts a real Prometheus server (Debian package prometheus; .ci/run installs it) for one test:
// its own config file and TSDB folder in a temporary directory, a free port on 127.0.0.1, a 1 s
// scrape and evaluation interval, and the scrape targets the test gives. The test queries it
// through the HTTP API; everything is stopped and removed in t.after.
//
// Policy where prometheus is missing (as for promtool): the test is skipped, saying so, except
// under CI, where it fails. PROMETHEUS_BIN names another binary than `prometheus` on the PATH.
//
// Prometheus (2.42 here) hands its first targets to the scrape manager about 5 s after start
// (its discovery manager's fixed update interval), so the first scrape comes 5-6 s in.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { freePort } from './listen.ts';

const BINARY = process.env.PROMETHEUS_BIN ?? 'prometheus';

const probe = spawnSync(BINARY, ['--version'], { encoding: 'utf8' });
/** Whether a prometheus binary runs here. */
export const prometheusAvailable = probe.status === 0;
/** The version line prometheus prints, for messages. */
export const prometheusVersion = prometheusAvailable ? (probe.stdout || probe.stderr).split('\n')[0]!.trim() : undefined;
/** For `describe(..., { skip })`: a reason to skip where prometheus is missing, never under CI. */
export const prometheusSkip: string | false =
  prometheusAvailable || process.env.CI ? false : 'prometheus not installed (Debian package prometheus; .ci/run installs it)';

export interface PrometheusOptions {
  /** Scrape targets as URLs, e.g. an infermeter's `metricsUrl` (http://127.0.0.1:PORT/metrics). */
  readonly targets: readonly string[];
  /** Seconds between scrapes and between rule evaluations; default 1. */
  readonly intervalSeconds?: number;
  /** Job name of the scrape config; default `infermeter`. */
  readonly job?: string;
  /** Bound on the start (process up and /-/ready answering 200); default 30 s. */
  readonly startTimeoutMs?: number;
  /** Feature flags (`--enable-feature=`), e.g. `exemplar-storage`. */
  readonly features?: readonly string[];
}

/** The `data` of a successful /api/v1/query answer. */
export type QueryData =
  | { readonly resultType: 'vector'; readonly result: ReadonlyArray<VectorSample> }
  | { readonly resultType: 'matrix'; readonly result: ReadonlyArray<{ readonly metric: Labels; readonly values: ReadonlyArray<[number, string]> }> }
  | { readonly resultType: 'scalar' | 'string'; readonly result: [number, string] };

export type Labels = Readonly<Record<string, string>>;

export interface VectorSample {
  readonly metric: Labels;
  readonly value: [number, string];
}

export interface Prometheus {
  /** Base URL, e.g. http://127.0.0.1:40123 */
  readonly url: string;
  /** Instant query; throws (naming the query and Prometheus' error) unless status is success. */
  query(promql: string): Promise<QueryData>;
  /** Range query from `start` to `end` (Unix seconds) at `step` seconds; the matrix's series. */
  queryRange(
    promql: string,
    start: number,
    end: number,
    step: number,
  ): Promise<ReadonlyArray<{ readonly metric: Labels; readonly values: ReadonlyArray<[number, string]> }>>;
  /** GET of a path of the HTTP API (e.g. /api/v1/label/job/values?match[]=up); its `data`. */
  api(path: string): Promise<unknown>;
  /** An instant query whose answer must be a vector; its samples with numeric values. */
  vector(promql: string): Promise<Array<{ metric: Labels; value: number }>>;
  /**
   * Polls the instant query (every 200 ms) until `predicate` holds for its answer, and resolves
   * with that answer; throws after `timeoutMs` with the last answer (or error) in the message.
   */
  waitFor(promql: string, predicate: (data: QueryData) => boolean, timeoutMs: number): Promise<QueryData>;
  /** Polls until every target is scraped with health "up" (bounded). */
  waitForTargetsUp(timeoutMs: number): Promise<void>;
  /** The last lines Prometheus logged, for failure messages. */
  log(): string;
  /** SIGTERM, then SIGKILL after a bound; removes the temporary directory. Idempotent. */
  stop(): Promise<void>;
}

const POLL_MS = 200;

/** Starts Prometheus scraping `options.targets`; stopped and cleaned up in `t.after`. */
export async function startPrometheus(t: TestContext, options: PrometheusOptions): Promise<Prometheus> {
  if (!prometheusAvailable) throw new Error(`prometheus cannot be run (${BINARY} --version failed): install the Debian package prometheus`);
  const interval = `${options.intervalSeconds ?? 1}s`;
  const dir = await mkdtemp(join(tmpdir(), 'infermeter-prometheus-'));
  const configFile = join(dir, 'prometheus.yml');
  // JSON is YAML: no YAML writer needed, and quoting is exact.
  const config = {
    global: { scrape_interval: interval, scrape_timeout: interval, evaluation_interval: interval },
    scrape_configs: [
      {
        job_name: options.job ?? 'infermeter',
        static_configs: [{ targets: options.targets.map((u) => new URL(u).host) }],
        metrics_path: pathOf(options.targets),
        scheme: 'http',
      },
    ],
  };
  await writeFile(configFile, JSON.stringify(config, null, 2));

  let stopped = false;
  let current: Running | undefined;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    if (current !== undefined) await current.kill();
    await rm(dir, { recursive: true, force: true });
  };
  t.after(stop);

  const deadline = Date.now() + (options.startTimeoutMs ?? 30_000);
  let attempt = 0;
  for (;;) {
    attempt++;
    const port = await freePort();
    const running = launch(dir, configFile, port, options.features ?? []);
    current = running;
    const outcome = await running.ready(deadline);
    if (outcome === 'ready') break;
    await running.kill();
    // Another process took the port between our probe and Prometheus' bind: try another one.
    if (outcome === 'address-in-use' && attempt < 5 && Date.now() < deadline) continue;
    await stop();
    throw new Error(`prometheus did not become ready (${outcome}) on attempt ${attempt}; its log:\n${running.log()}`);
  }
  const running = current;
  const url = running.url;

  const post = async (path: string, promql: string, params: Record<string, string> = {}): Promise<QueryData> => {
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ query: promql, ...params }).toString(),
    });
    const text = await res.text();
    let body: { status?: string; data?: QueryData; errorType?: string; error?: string };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      throw new Error(`prometheus answered ${res.status} with non-JSON for ${promql}: ${text.slice(0, 500)}`);
    }
    if (body.status !== 'success' || body.data === undefined) {
      throw new Error(`prometheus query failed (HTTP ${res.status}, ${body.errorType ?? '?'}: ${body.error ?? text.slice(0, 500)}) for: ${promql}`);
    }
    return body.data;
  };
  const query = (promql: string): Promise<QueryData> => post('/api/v1/query', promql);
  const queryRange = async (promql: string, start: number, end: number, step: number) => {
    const data = await post('/api/v1/query_range', promql, { start: String(start), end: String(end), step: String(step) });
    if (data.resultType !== 'matrix') throw new Error(`expected a matrix from ${promql}, got ${data.resultType}`);
    return data.result;
  };
  const api = async (path: string): Promise<unknown> => {
    const res = await fetch(`${url}${path}`);
    const body = (await res.json()) as { status?: string; data?: unknown; error?: string };
    if (body.status !== 'success') throw new Error(`prometheus ${path}: HTTP ${res.status} ${body.error ?? ''}`);
    return body.data;
  };

  const vector = async (promql: string): Promise<Array<{ metric: Labels; value: number }>> => {
    const data = await query(promql);
    if (data.resultType !== 'vector') throw new Error(`expected a vector from ${promql}, got ${data.resultType}`);
    return data.result.map((s) => ({ metric: s.metric, value: Number(s.value[1]) }));
  };

  const waitFor = async (promql: string, predicate: (data: QueryData) => boolean, timeoutMs: number): Promise<QueryData> => {
    const end = Date.now() + timeoutMs;
    let last = 'no answer yet';
    for (;;) {
      try {
        const data = await query(promql);
        if (predicate(data)) return data;
        last = JSON.stringify(data.result);
      } catch (error) {
        last = (error as Error).message;
      }
      if (Date.now() >= end) throw new Error(`waited ${timeoutMs} ms for a condition on ${promql}; last answer: ${last.slice(0, 2000)}`);
      await delay(POLL_MS);
    }
  };

  const waitForTargetsUp = async (timeoutMs: number): Promise<void> => {
    const end = Date.now() + timeoutMs;
    let last = '';
    for (;;) {
      const body = (await (await fetch(`${url}/api/v1/targets?state=active`)).json()) as {
        data: { activeTargets: Array<{ scrapeUrl: string; health: string; lastError: string }> };
      };
      const targets = body.data.activeTargets;
      if (targets.length === options.targets.length && targets.every((x) => x.health === 'up')) return;
      last = JSON.stringify(targets.map((x) => [x.scrapeUrl, x.health, x.lastError]));
      if (Date.now() >= end) throw new Error(`targets not all up after ${timeoutMs} ms: ${last}`);
      await delay(POLL_MS);
    }
  };

  return { url, query, queryRange, api, vector, waitFor, waitForTargetsUp, log: running.log, stop };
}

/** The value of a vector answer with exactly one sample (e.g. `sum(...)`); NaN when empty. */
export function single(data: QueryData): number {
  if (data.resultType === 'scalar') return Number(data.result[1]);
  if (data.resultType !== 'vector') throw new Error(`expected a vector, got ${data.resultType}`);
  if (data.result.length === 0) return Number.NaN;
  if (data.result.length > 1) throw new Error(`expected one sample, got ${data.result.length}: ${JSON.stringify(data.result)}`);
  return Number(data.result[0]!.value[1]);
}

interface Running {
  readonly url: string;
  ready(deadline: number): Promise<'ready' | 'address-in-use' | string>;
  kill(): Promise<void>;
  log(): string;
}

function launch(dir: string, configFile: string, port: number, features: readonly string[]): Running {
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    BINARY,
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(dir, `data-${port}`)}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=info',
      ...(features.length === 0 ? [] : [`--enable-feature=${features.join(',')}`]),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  // Keep the last 64 KiB of its output (and read it all, so that it never blocks on a pipe).
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-65_536);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  let exitInfo: string | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exitInfo = `exited with ${signal ?? code}`;
      resolve();
    });
    child.once('error', (error) => {
      exitInfo = `could not start: ${error.message}`;
      resolve();
    });
  });

  const ready = async (deadline: number): Promise<string> => {
    for (;;) {
      if (exitInfo !== undefined) return /address already in use/.test(output) ? 'address-in-use' : exitInfo;
      try {
        const res = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) });
        await res.arrayBuffer();
        if (res.status === 200) return 'ready';
      } catch {
        // not listening yet
      }
      if (Date.now() >= deadline) return 'timeout';
      await within(exited, 100);
    }
  };

  const kill = async (): Promise<void> => {
    if (exitInfo !== undefined) return;
    child.kill('SIGTERM');
    if (!(await within(exited, 5000))) {
      child.kill('SIGKILL');
      await within(exited, 5000);
    }
  };

  return { url, ready, kill, log: () => output };
}

/** All targets must share one metrics path (one scrape config). */
function pathOf(targets: readonly string[]): string {
  const paths = new Set(targets.map((u) => new URL(u).pathname));
  if (paths.size !== 1) throw new Error(`targets must share one metrics path, got ${[...paths].join(', ')}`);
  return [...paths][0]!;
}

/** Whether `promise` settled within `ms`; the timer is cleared either way. */
async function within(promise: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
