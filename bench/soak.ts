// npm run soak: infermeter as a child process (src/cli.ts, the flags npm start uses) in front of
// the soak upstream (bench/soak-upstream.ts), driven for minutes by a fixed number of clients
// with a bounded mix of normal, aborted and faulty streams, across more model names than
// INFERMETER_MAX_MODELS, while /metrics is scraped every second. The resident set (from /proc)
// and the V8 heap after a full collection (asked over IPC, bench/soak-child.ts) are read after a
// warm-up, periodically and at the end; at the end /metrics must add up and nothing may be left
// in flight. Exits 1 if memory grew beyond the bounds below, the counters do not add up, a
// client saw something other than what its kind should give, or infermeter died.
//
//   npm run soak                      3 minutes
//   npm run soak -- --minutes 10      any length
//   npm run soak -- --quick           about 20 s, a smoke run
//   npm run soak -- --write           also write the summary into docs/soak.md
//
// Not part of npm test. Loopback only; every loop is bounded in count and in time.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseExposition } from '../test/helpers/exposition.ts';
import { seededRandom } from '../test/helpers/random.ts';
import { cpuSeconds, rssBytes } from './proc.ts';
import { INFERMETER_FLAGS } from './targets.ts';
import { KIND_DESCRIPTIONS, MALFORMED_BODY, SOAK_KINDS, startSoakUpstream, type SoakKind, type SoakUpstream } from './soak-upstream.ts';

// ---- settings ----------------------------------------------------------------------------

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(name);
const option = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i === -1 ? undefined : argv[i + 1];
};
const quick = flag('--quick');
const write = flag('--write');
const minutes = quick ? 20 / 60 : Number(option('--minutes') ?? 3);
const concurrency = Number(option('--concurrency') ?? 32);
const seed = Number(option('--seed') ?? 1);
if (
  !(minutes >= (quick ? 0 : 0.25) && minutes <= 24 * 60) ||
  !(Number.isInteger(concurrency) && concurrency >= 1 && concurrency <= 1024) ||
  !Number.isFinite(seed)
) {
  process.stderr.write('usage: node bench/soak.ts [--quick | --minutes N (0.25 <= N <= 1440)] [--concurrency C (1-1024)] [--seed S] [--write]\n');
  process.exit(2);
}

const DURATION_MS = Math.round(minutes * 60_000);
/** Memory is read from the end of the warm-up: the first 10 % of the run, at least 10 s (5 s quick). */
const WARMUP_MS = quick ? 5_000 : Math.max(10_000, DURATION_MS * 0.1);
/** Readings between the warm-up and the end. */
const READINGS = quick ? 4 : 10;
/** Growth from the warm-up's reading to the end's that fails the run. */
const RSS_BOUND_MB = 20;
const HEAP_BOUND_MB = 5;

const MAX_MODELS = 20;
const MODELS = Array.from({ length: 50 }, (_, i) => `soak-model-${String(i).padStart(2, '0')}`);
/** Listed by the upstream's /v1/models: admitted even after the cap is reached. */
const LISTED = MODELS.slice(45);

/** Share of each kind in the mix. */
const WEIGHTS: Readonly<Record<SoakKind, number>> = { normal: 0.5, json: 0.15, abort: 0.12, reset: 0.08, malformed: 0.08, error: 0.07 };

const REQUEST_TIMEOUT_MS = 30_000;
/** A hard cap on requests, whatever the duration (a bound, not a target). */
const MAX_REQUESTS = 50_000_000;
const SCRAPE_EVERY_MS = 1_000;

const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));
const mb = (bytes: number) => bytes / (1024 * 1024);
const f = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ---- infermeter as a child process ---------------------------------------------------------

interface MemoryUsage {
  readonly rss: number;
  readonly heapTotal: number;
  readonly heapUsed: number;
  readonly external: number;
  readonly arrayBuffers: number;
}

interface MemoryReply {
  readonly before: MemoryUsage;
  /** After a full collection. */
  readonly after: MemoryUsage;
  /** Whether the collection ran (the child needs --expose-gc). */
  readonly gc: boolean;
  /** Bytes of V8's code and trusted spaces (compiled code, bytecode) after it. */
  readonly code: number;
}

interface Child {
  readonly process: ChildProcess;
  readonly pid: number;
  readonly dataUrl: string;
  readonly metricsUrl: string;
  /** Set when the process exited. */
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  /** Log lines by level and message (bounded), and the last lines it wrote. */
  readonly logCounts: Map<string, number>;
  readonly tail: string[];
  memory(): Promise<MemoryReply>;
}

async function startChild(upstream: string): Promise<Child> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    INFERMETER_UPSTREAM: upstream,
    INFERMETER_PORT: '0',
    INFERMETER_MANAGEMENT_PORT: '0',
    INFERMETER_METRICS_PORT: '0',
    INFERMETER_DIALECTS: 'mindie,aom',
    INFERMETER_MAX_MODELS: String(MAX_MODELS),
    INFERMETER_LOG_LEVEL: 'info',
    INFERMETER_DRAIN_TIMEOUT_MS: '5000',
    // The AOM period gauges roll over every 5 s instead of 30: more rollovers in a run, and their
    // series exist before the warm-up ends.
    INFERMETER_AOM_PERIOD_SECONDS: '5',
  };
  const proc = spawn(process.execPath, [...INFERMETER_FLAGS.split(' '), '--expose-gc', here('soak-child.ts')], {
    env,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const logCounts = new Map<string, number>();
  const tail: string[] = [];
  let partial = '';
  let started: ((line: string) => void) | undefined;
  const startedLine = new Promise<string>((resolve) => (started = resolve));
  const onLine = (line: string) => {
    if (line === '') return;
    tail.push(line);
    if (tail.length > 20) tail.shift();
    let key = 'output that is not a JSON log line';
    try {
      const entry = JSON.parse(line) as { level?: string; msg?: string };
      key = `${entry.level ?? '?'}: ${entry.msg ?? '?'}`;
    } catch {
      // kept as is
    }
    if (logCounts.has(key) || logCounts.size < 100) logCounts.set(key, (logCounts.get(key) ?? 0) + 1);
    if (started !== undefined && line.includes('"infermeter started"')) {
      started(line);
      started = undefined;
    }
  };
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (text: string) => {
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? '';
    if (partial.length > 65_536) partial = partial.slice(-65_536);
    for (const line of lines) onLine(line);
  });
  proc.stdout!.setEncoding('utf8');
  proc.stdout!.on('data', (text: string) => {
    for (const line of text.split('\n')) onLine(line);
  });
  proc.on('error', () => {});

  let nextId = 0;
  const pending = new Map<number, (reply: MemoryReply) => void>();
  proc.on('message', (m: MemoryReply & { type?: string; id?: number }) => {
    if (m.type !== 'memory' || m.id === undefined) return;
    pending.get(m.id)?.(m);
    pending.delete(m.id);
  });

  const child: Child = {
    process: proc,
    pid: proc.pid ?? 0,
    dataUrl: '',
    metricsUrl: '',
    exit: undefined,
    logCounts,
    tail,
    memory() {
      const id = ++nextId;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error('infermeter did not answer the memory request within 10 s'));
        }, 10_000);
        pending.set(id, (reply) => {
          clearTimeout(timer);
          resolve(reply);
        });
        if (!proc.connected || !proc.send({ type: 'memory', id })) {
          // send() returning false only means it queued; a closed channel is what fails.
          if (!proc.connected) {
            clearTimeout(timer);
            pending.delete(id);
            reject(new Error('the IPC channel to infermeter is closed'));
          }
        }
      });
    },
  };
  const exited = new Promise<never>((_, reject) =>
    proc.once('exit', (code, signal) => {
      child.exit = { code, signal };
      reject(new Error(`infermeter exited (code ${code}, signal ${signal}) before it started:\n${tail.join('\n')}`));
    }),
  );
  exited.catch(() => {});
  const timeout = sleep(20_000).then(() => {
    throw new Error('infermeter did not start within 20 s');
  });
  let line: string;
  try {
    line = await Promise.race([startedLine, exited, timeout]);
  } catch (error) {
    proc.kill('SIGKILL');
    throw error;
  }
  const fields = JSON.parse(line) as { data: string; metrics: string };
  return Object.assign(child, { dataUrl: fields.data, metricsUrl: fields.metrics });
}

async function stopChild(child: Child): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number } | undefined> {
  if (child.exit !== undefined) return undefined;
  const t0 = performance.now();
  const exited = new Promise<void>((resolve) => child.process.once('exit', () => resolve()));
  child.process.kill('SIGTERM');
  const inTime = await Promise.race([exited.then(() => true), sleep(10_000).then(() => false)]);
  if (!inTime) {
    child.process.kill('SIGKILL');
    await Promise.race([exited, sleep(2_000)]);
  }
  // Set by the exit listener meanwhile (TypeScript keeps the narrowing from the first line).
  const exit = child.exit as Child['exit'];
  return exit === undefined ? undefined : { ...exit, ms: performance.now() - t0 };
}

// ---- the clients -------------------------------------------------------------------------

type Outcome = 'complete' | 'status 500' | 'cut' | 'aborted' | 'timeout' | 'request error' | 'wrong status' | 'wrong body';

/** What a client should see for each kind. */
const EXPECTED: Readonly<Record<SoakKind, Outcome>> = {
  normal: 'complete',
  json: 'complete',
  malformed: 'complete',
  error: 'status 500',
  reset: 'cut',
  abort: 'aborted',
};

interface Plan {
  readonly kind: SoakKind;
  readonly path: string;
  readonly body: string;
  readonly abortAfterMs: number;
}

function planner(next: () => number): () => Plan {
  const kinds = SOAK_KINDS.map((k) => [k, WEIGHTS[k]] as const);
  const total = kinds.reduce((a, [, w]) => a + w, 0);
  return () => {
    let r = next() * total;
    let kind: SoakKind = 'normal';
    for (const [k, w] of kinds) {
      if (r < w) {
        kind = k;
        break;
      }
      r -= w;
    }
    const model = MODELS[Math.floor(next() * MODELS.length)]!;
    const chat = kind === 'reset' || kind === 'malformed' || next() < 0.75;
    const stream = kind === 'json' ? false : kind === 'error' ? next() < 0.5 : true;
    const body: Record<string, unknown> = { model, stream };
    if (chat) body.messages = [{ role: 'user', content: `Soak request: ${kind}.` }];
    else body.prompt = `Soak request: ${kind}.`;
    if (kind === 'normal' || kind === 'json') body.max_tokens = 8 + Math.floor(next() * 25);
    // Half the streams ask for usage; infermeter injects it into the others (and strips it).
    if (stream && next() < 0.5) body.stream_options = { include_usage: true };
    return { kind, path: chat ? '/v1/chat/completions' : '/v1/completions', body: JSON.stringify(body), abortAfterMs: Math.floor(next() * 100) };
  };
}

function send(baseUrl: string, agent: http.Agent, plan: Plan): Promise<Outcome> {
  return new Promise((resolve) => {
    const controller = new AbortController();
    let why: 'abort' | 'timeout' | undefined;
    let abortTimer: NodeJS.Timeout | undefined;
    let settled = false;
    const done = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(abortTimer);
      resolve(outcome);
    };
    const interrupted = (otherwise: Outcome): Outcome => (why === 'timeout' ? 'timeout' : why === 'abort' ? 'aborted' : otherwise);
    const timer = setTimeout(() => {
      why = 'timeout';
      controller.abort();
    }, REQUEST_TIMEOUT_MS);
    const headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(plan.body)), 'x-soak-kind': plan.kind };
    const req = http.request(new URL(plan.path, baseUrl), { method: 'POST', agent, headers, signal: controller.signal }, (res) => {
      // Kept: the whole body while it is small (json, malformed, error), else the last bytes.
      const parts: Buffer[] = [];
      let size = 0;
      let last: Buffer = Buffer.alloc(0);
      res.on('data', (chunk: Buffer) => {
        if (plan.kind === 'abort' && abortTimer === undefined && why === undefined) {
          abortTimer = setTimeout(() => {
            why ??= 'abort';
            controller.abort();
          }, plan.abortAfterMs);
        }
        if (size < 65_536) parts.push(chunk);
        size += chunk.length;
        last = chunk.length >= 32 ? chunk : Buffer.concat([last, chunk]).subarray(-32);
      });
      res.on('error', () => {});
      res.on('close', () => {
        if (!res.complete) done(interrupted('cut'));
      });
      res.on('end', () => {
        if (why !== undefined) return done(interrupted('cut'));
        const status = res.statusCode ?? 0;
        if (status === 500) return done(plan.kind === 'error' ? 'status 500' : 'wrong status');
        if (status !== 200) return done('wrong status');
        const body = size <= 65_536 ? Buffer.concat(parts) : undefined;
        if (plan.kind === 'malformed') return done(body?.equals(MALFORMED_BODY) === true ? 'complete' : 'wrong body');
        if (plan.kind === 'json') {
          try {
            const usage = (JSON.parse(body?.toString('utf8') ?? '') as { usage?: { completion_tokens?: number } }).usage;
            return done(typeof usage?.completion_tokens === 'number' ? 'complete' : 'wrong body');
          } catch {
            return done('wrong body');
          }
        }
        if (plan.kind === 'normal') return done(last.toString('latin1').endsWith('data: [DONE]\n\n') ? 'complete' : 'wrong body');
        done('complete');
      });
    });
    req.on('error', () => done(interrupted('request error')));
    req.end(plan.body);
  });
}

interface Tally {
  sent: number;
  outcomes: Map<Outcome, number>;
}

// ---- the run -----------------------------------------------------------------------------

interface Reading {
  readonly label: string;
  readonly elapsedS: number;
  readonly requests: number;
  readonly rss: number;
  readonly heapUsed: number;
  readonly heapTotal: number;
  readonly code: number;
  readonly external: number;
  readonly arrayBuffers: number;
  readonly cpuS: number;
  readonly metricsLines: number;
}

interface Check {
  readonly what: string;
  readonly met: boolean;
  readonly measured: string;
}

async function main(): Promise<number> {
  const out: string[] = [];
  const say = (line = '') => {
    out.push(line);
    process.stdout.write(`${line}\n`);
  };
  const note = (line: string) => process.stderr.write(`soak: ${line}\n`);

  let upstream: SoakUpstream | undefined;
  let child: Child | undefined;
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency * 2 });
  const scrapeAgent = new http.Agent({ keepAlive: true, maxSockets: 2 });
  try {
    upstream = await startSoakUpstream({ models: MODELS, listed: LISTED });
    child = await startChild(upstream.url);
    const c = child;
    note(`infermeter pid ${c.pid} at ${c.dataUrl}, /metrics at ${c.metricsUrl}; upstream ${upstream.url}; ${f(minutes, 2)} min, concurrency ${concurrency}`);

    const t0 = performance.now();
    const elapsed = () => performance.now() - t0;
    const deadline = DURATION_MS;
    const tallies = new Map<SoakKind, Tally>(SOAK_KINDS.map((k) => [k, { sent: 0, outcomes: new Map() }]));
    let requests = 0;
    let diedDuringRun: string | undefined;
    let stopping = false;
    c.process.once('exit', (code, signal) => {
      if (!stopping) diedDuringRun = `exited with code ${code}, signal ${signal} at ${f(elapsed() / 1000)} s`;
    });
    const alive = () => c.exit === undefined;

    // Clients: each sends one request after another until the deadline.
    const plan = planner(seededRandom(seed));
    const client = async () => {
      for (let n = 0; n < MAX_REQUESTS && elapsed() < deadline && alive(); n++) {
        const p = plan();
        const tally = tallies.get(p.kind)!;
        tally.sent++;
        requests++;
        const outcome = await send(c.dataUrl, agent, p);
        tally.outcomes.set(outcome, (tally.outcomes.get(outcome) ?? 0) + 1);
      }
    };

    // Prometheus: GET /metrics every second.
    let scrapes = 0;
    let scrapeFailures = 0;
    let lastMetricsLines = 0;
    const scrapeOnce = () =>
      new Promise<string | undefined>((resolve) => {
        const req = http.get(c.metricsUrl, { agent: scrapeAgent, timeout: 10_000 }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (s: string) => (text += s));
          res.on('end', () => resolve(res.statusCode === 200 ? text : undefined));
          res.on('error', () => resolve(undefined));
        });
        req.on('timeout', () => req.destroy());
        req.on('error', () => resolve(undefined));
      });
    const scraper = async () => {
      const most = Math.ceil(deadline / SCRAPE_EVERY_MS) + 1;
      for (let n = 0; n < most && elapsed() < deadline && alive(); n++) {
        const started = elapsed();
        const text = await scrapeOnce();
        scrapes++;
        if (text === undefined) scrapeFailures++;
        else lastMetricsLines = countLines(text);
        await sleep(Math.max(0, SCRAPE_EVERY_MS - (elapsed() - started)));
      }
    };

    // Memory: after the warm-up, READINGS times, the last one just before the deadline.
    const readings: Reading[] = [];
    let gcAvailable = true;
    const read = async (label: string): Promise<void> => {
      if (!alive()) return;
      const rss = rssBytes([c.pid]);
      const cpuS = cpuSeconds([c.pid]);
      const m = await c.memory();
      gcAvailable &&= m.gc;
      const r: Reading = {
        label,
        elapsedS: elapsed() / 1000,
        requests,
        rss,
        heapUsed: m.after.heapUsed,
        heapTotal: m.after.heapTotal,
        code: m.code,
        external: m.after.external,
        arrayBuffers: m.after.arrayBuffers,
        cpuS,
        metricsLines: lastMetricsLines,
      };
      readings.push(r);
      note(
        `${label.padEnd(8)} ${f(r.elapsedS).padStart(6)} s  ${String(requests).padStart(8)} requests  RSS ${f(mb(rss))} MB  heap after GC ${f(mb(r.heapUsed), 2)} MB (total ${f(mb(r.heapTotal))})  external ${f(mb(r.external), 2)} MB  /metrics ${r.metricsLines} lines`,
      );
    };
    const sampler = async () => {
      const end = deadline - 1_000;
      const step = (end - WARMUP_MS) / READINGS;
      for (let i = 0; i <= READINGS && alive(); i++) {
        const at = WARMUP_MS + i * step;
        await sleep(Math.max(0, at - elapsed()));
        await read(i === 0 ? 'start' : i === READINGS ? 'end' : `${Math.round((100 * at) / deadline)} %`).catch((e: unknown) => note(String(e)));
      }
    };

    await Promise.all([...Array.from({ length: concurrency }, client), scraper(), sampler()]);
    const loadSeconds = elapsed() / 1000;

    // After the load: let infermeter settle, then read once more and check its counters.
    await sleep(2_000);
    await read('idle').catch((e: unknown) => note(String(e)));
    const finalText = alive() ? await scrapeOnce() : undefined;
    const m = finalText === undefined ? undefined : parseExposition(finalText);
    stopping = true;
    const drained = await stopChild(c);

    // ---- the report ----
    const sum = (name: string) => m?.sum(name) ?? Number.NaN;
    const received = sum('request_received_total');
    const success = sum('request_success_total');
    const failed = sum('request_failed_total');
    const cancelled = sum('request_cancelled_total');
    const running = m?.series('num_requests_running') ?? [];
    const waiting = m?.series('num_requests_waiting') ?? [];
    const busy = [...running, ...waiting].filter((s) => s.value !== 0);
    const byKind = (kinds: SoakKind[]) => kinds.reduce((a, k) => a + tallies.get(k)!.sent, 0);
    const unexpected = [...tallies].reduce((a, [k, t]) => a + [...t.outcomes].filter(([o]) => o !== EXPECTED[k]).reduce((b, [, n]) => b + n, 0), 0);
    const start = readings.find((r) => r.label === 'start');
    const end = readings.find((r) => r.label === 'end');
    const idle = readings.find((r) => r.label === 'idle');
    // Under load: from the warm-up's reading to the end's. Growth is counted from the lowest
    // reading (at most the start's), so that a one-time fall (V8 flushing the bytecode of
    // start-up code lowers the heap by about 5 MB once, within the first half-minute) cannot
    // hide growth after it.
    const measured = readings.filter((r) => r.label !== 'idle');
    const lowest = (pick: (r: Reading) => number) => Math.min(...measured.map(pick));
    const rssGrowth = start && end ? mb(end.rss - lowest((r) => r.rss)) : Number.NaN;
    const heapGrowth = start && end ? mb(end.heapUsed - lowest((r) => r.heapUsed)) : Number.NaN;
    const late = measured.slice(Math.floor(measured.length / 2));
    const heapSlope = slope(late.map((r) => [r.elapsedS / 60, mb(r.heapUsed)]));
    const rssSlope = slope(late.map((r) => [r.elapsedS / 60, mb(r.rss)]));
    const labels = new Set((m?.series('request_received_total') ?? []).map((s) => s.labels.model_name));

    const checks: Check[] = [
      {
        what: 'infermeter ran to the end',
        met: diedDuringRun === undefined && m !== undefined,
        measured: diedDuringRun ?? (m === undefined ? 'final /metrics scrape failed' : 'yes'),
      },
      {
        what: `RSS: the end's reading at most ${RSS_BOUND_MB} MB above the lowest from the warm-up's on`,
        met: rssGrowth <= RSS_BOUND_MB,
        measured: `${signed(rssGrowth)} MB`,
      },
      {
        what: `heap used after a full GC: the end's reading at most ${HEAP_BOUND_MB} MB above the lowest from the warm-up's on`,
        met: gcAvailable && heapGrowth <= HEAP_BOUND_MB,
        measured: gcAvailable ? `${signed(heapGrowth, 2)} MB` : 'no gc()',
      },
      {
        what: 'request_received_total = success + failed + cancelled (sums over all series)',
        met: received === success + failed + cancelled,
        measured: `${received} = ${success} + ${failed} + ${cancelled}`,
      },
      {
        what: 'num_requests_running and num_requests_waiting all 0 after the run',
        met: m !== undefined && busy.length === 0,
        measured:
          m === undefined
            ? 'no final scrape'
            : busy.length === 0
              ? `${running.length} + ${waiting.length} series, all 0`
              : busy.map((s) => `${s.labels.model_name}=${s.value}`).join(', '),
      },
      { what: 'request_received_total = requests the clients sent', met: received === requests, measured: `${received} vs ${requests}` },
      {
        what: 'success = normal + json + malformed; failed = reset + error; cancelled = abort',
        met: success === byKind(['normal', 'json', 'malformed']) && failed === byKind(['reset', 'error']) && cancelled === byKind(['abort']),
        measured: `${success}/${byKind(['normal', 'json', 'malformed'])}, ${failed}/${byKind(['reset', 'error'])}, ${cancelled}/${byKind(['abort'])}`,
      },
      { what: 'every client saw what its kind should give', met: unexpected === 0, measured: `${unexpected} other outcomes` },
      {
        what: `model labels capped: ${MAX_MODELS} kept + the ${LISTED.length} listed + "other"`,
        met: labels.has('other') && labels.size <= MAX_MODELS + LISTED.length + 2,
        measured: `${labels.size} model_name values`,
      },
      { what: 'every /metrics scrape answered 200', met: scrapeFailures === 0 && scrapes > 0, measured: `${scrapes - scrapeFailures} of ${scrapes}` },
      {
        what: 'SIGTERM afterwards: drained and exited 0',
        met: drained?.code === 0,
        measured: drained === undefined ? 'had already exited' : `code ${drained.code}, signal ${drained.signal}, ${f(drained.ms, 0)} ms`,
      },
    ];

    const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.versions.node}`;
    say(`## Soak run (${new Date().toISOString().slice(0, 10)}${quick ? ', quick' : ''})`);
    say();
    say(
      `Machine: ${machine}. ${f(loadSeconds / 60, 2)} minutes of load, ${concurrency} clients, seed ${seed}; ${MODELS.length} model names with \`INFERMETER_MAX_MODELS=${MAX_MODELS}\` (${LISTED.length} of them listed by the upstream's /v1/models); /metrics scraped every second (${scrapes} scrapes). infermeter: \`node ${INFERMETER_FLAGS} --expose-gc bench/soak-child.ts\` (src/cli.ts), dialects mindie,aom with \`INFERMETER_AOM_PERIOD_SECONDS=5\`, engine scraping on. Warm-up: the first ${f(WARMUP_MS / 1000, 0)} s.`,
    );
    say();
    say(
      `${requests.toLocaleString('en')} requests, ${f(requests / loadSeconds, 0)} per second; infermeter used ${f(end && start ? (100 * (end.cpuS - start.cpuS)) / (end.elapsedS - start.elapsedS) : Number.NaN, 0)} % of a core between the first and last readings.`,
    );
    say();
    say('### Memory of the infermeter process');
    say();
    say(
      "RSS from /proc/<pid>/status (VmRSS), read just before the heap; heap figures from `process.memoryUsage()` in infermeter right after a full `gc()`; code and bytecode: V8's code and trusted spaces then.",
    );
    say();
    say(
      '| reading | at s | requests so far | RSS MB | heap used MB | of which code and bytecode MB | heap total MB | external MB | array buffers MB | /metrics lines |',
    );
    say('|---|---|---|---|---|---|---|---|---|---|');
    for (const r of readings) {
      say(
        `| ${r.label} | ${f(r.elapsedS)} | ${r.requests.toLocaleString('en')} | ${f(mb(r.rss))} | ${f(mb(r.heapUsed), 2)} | ${f(mb(r.code), 2)} | ${f(mb(r.heapTotal))} | ${f(mb(r.external), 2)} | ${f(mb(r.arrayBuffers), 2)} | ${r.metricsLines} |`,
      );
    }
    say();
    say(
      `From the warm-up's reading ("start") to the last one under load ("end"): RSS ${signed(start && end ? mb(end.rss - start.rss) : Number.NaN)} MB, heap used after GC ${signed(start && end ? mb(end.heapUsed - start.heapUsed) : Number.NaN, 2)} MB; ` +
        `from the lowest reading to the end's: RSS ${signed(rssGrowth)} MB, heap ${signed(heapGrowth, 2)} MB. ` +
        `Least-squares slope over the second half of the readings under load: RSS ${signed(rssSlope, 2)} MB/min, heap ${signed(heapSlope, 3)} MB/min.` +
        (idle ? ` After the load ("idle", 2 s later): RSS ${f(mb(idle.rss))} MB, heap ${f(mb(idle.heapUsed), 2)} MB.` : ''),
    );
    say();
    say('### Requests by kind');
    say();
    say('| kind | what the upstream does | sent | expected client outcome | as expected | other outcomes |');
    say('|---|---|---|---|---|---|');
    for (const k of SOAK_KINDS) {
      const t = tallies.get(k)!;
      const others = [...t.outcomes].filter(([o]) => o !== EXPECTED[k]).map(([o, n]) => `${o}: ${n}`);
      say(
        `| ${k} | ${KIND_DESCRIPTIONS[k]} | ${t.sent.toLocaleString('en')} | ${EXPECTED[k]} | ${(t.outcomes.get(EXPECTED[k]) ?? 0).toLocaleString('en')} | ${others.length === 0 ? '-' : others.join(', ')} |`,
      );
    }
    say();
    say("### infermeter's counters after the run");
    say();
    say('| series (summed over labels) | value |');
    say('|---|---|');
    const shown: Array<[string, number | undefined]> = [
      ['request_received_total', received],
      ['request_success_total', success],
      ['request_failed_total', failed],
      ['request_cancelled_total{phase="before_first_token"}', m?.sum('request_cancelled_total', { phase: 'before_first_token' })],
      ['request_cancelled_total{phase="decoding"}', m?.sum('request_cancelled_total', { phase: 'decoding' })],
      ['request_received_total{model_name="other"}', m?.sum('request_received_total', { model_name: 'other' })],
      ['infermeter_model_label_overflow_total', m?.sum('infermeter_model_label_overflow_total')],
      ['infermeter_model_labels', m?.sum('infermeter_model_labels')],
      ['infermeter_upstream_errors_total{kind="upstream_reset"}', m?.sum('infermeter_upstream_errors_total', { kind: 'upstream_reset' })],
      ['infermeter_stream_tap_problems_total{kind="malformed_event"}', m?.sum('infermeter_stream_tap_problems_total', { kind: 'malformed_event' })],
      ['infermeter_usage_injected_total', m?.sum('infermeter_usage_injected_total')],
      ['infermeter_usage_chunks_stripped_total', m?.sum('infermeter_usage_chunks_stripped_total')],
      ['infermeter_upstream_metrics_up', m?.sum('infermeter_upstream_metrics_up')],
    ];
    for (const [name, value] of shown) say(`| \`${name}\` | ${value ?? 'absent'} |`);
    say();
    const upstreamServed = SOAK_KINDS.map((k) => `${k} ${upstream!.served[k]}`).join(', ');
    say(
      `The upstream answered: ${upstreamServed}. infermeter's log during the run: ${[...c.logCounts].map(([k, n]) => `"${k}" × ${n}`).join('; ') || 'nothing'}.`,
    );
    say();
    say('### Checks');
    say();
    say('| check | met | measured |');
    say('|---|---|---|');
    for (const check of checks) say(`| ${check.what} | ${check.met ? 'yes' : '**no**'} | ${check.measured} |`);
    say();

    if (diedDuringRun !== undefined) note(`infermeter's last output:\n${c.tail.join('\n')}`);
    const ok = checks.every((x) => x.met);
    if (write) {
      const path = fileURLToPath(new URL('../docs/soak.md', import.meta.url));
      writeFileSync(path, withSection(readDoc(path), out.join('\n')));
      note(`wrote ${path}`);
    }
    note(ok ? 'all checks met' : 'some checks NOT met');
    return ok ? 0 : 1;
  } finally {
    agent.destroy();
    scrapeAgent.destroy();
    if (child !== undefined && child.exit === undefined) {
      child.process.kill('SIGKILL');
      await sleep(100);
    }
    await upstream?.close();
  }
}

function countLines(text: string): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

function slope(points: ReadonlyArray<readonly [number, number]>): number {
  if (points.length < 2) return Number.NaN;
  const mx = points.reduce((a, [x]) => a + x, 0) / points.length;
  const my = points.reduce((a, [, y]) => a + y, 0) / points.length;
  const num = points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0);
  const den = points.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  return den === 0 ? Number.NaN : num / den;
}

function signed(n: number, digits = 1): string {
  return Number.isFinite(n) ? `${n >= 0 ? '+' : ''}${n.toFixed(digits)}` : 'n/a';
}

const BEGIN = '<!-- soak:begin (written by npm run soak -- --write) -->';
const END = '<!-- soak:end -->';

function readDoc(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '# Soak test\n\n';
  }
}

/** The doc with the generated section between the markers replaced (or appended). */
function withSection(doc: string, section: string): string {
  const b = doc.indexOf(BEGIN);
  const e = doc.indexOf(END);
  const block = `${BEGIN}\n\n${section}\n${END}`;
  if (b !== -1 && e > b) return doc.slice(0, b) + block + doc.slice(e + END.length);
  return `${doc.trimEnd()}\n\n${block}\n`;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`soak: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
