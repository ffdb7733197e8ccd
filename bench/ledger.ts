// npm run bench:ledger: what the usage ledger costs the data plane, side by side in one run:
// infermeter with the ledger off, on (the spool alone), and on with an HTTP sink that is down
// (answering 503) through all the measured runs and at least `--down` seconds (default 60), then back.
// Per target: the client's TTFT and end-to-end latency (p50, p99 over all its requests) and
// infermeter's CPU per request (every thread, from /proc). The targets run the same streams in
// interleaved repetitions (the order rotated), so a machine's drift touches each alike. After
// the runs, the sink is back: how long the backlog took to drain, and whether every record
// arrived. Bounded: `--reps=N` (default 6) repetitions of a fixed number of requests, a bounded
// wait for the drain; loopback only.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { percentile, runLoad, type Scenario } from './load.ts';
import { INFERMETER_FLAGS, infermeterEnv, startNode, startUpstream } from './targets.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const reps = Number(arg('reps') ?? 6);
if (!Number.isInteger(reps) || reps < 1 || reps > 50) throw new Error('--reps: expected an integer from 1 to 50');
const downSeconds = Number(arg('down') ?? 60);
if (!Number.isFinite(downSeconds) || downSeconds < 0 || downSeconds > 600) throw new Error('--down: expected seconds from 0 to 600');
const scenario: Scenario = { name: 'ledger', requests: 256, concurrency: 16, tokens: 32, ttftMs: 20, gapMs: 5 };

/** CPU ms of every thread of `pid` so far. */
function cpuMs(pid: number): number {
  let ms = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ms += Number(/se\.sum_exec_runtime\s*:\s*([\d.]+)/.exec(readFileSync(`/proc/${pid}/task/${tid}/sched`, 'utf8'))?.[1] ?? 0);
    } catch {
      // a thread that ended meanwhile
    }
  }
  return ms;
}

// The sink: an ingest endpoint that answers 503 until `downUntil`, then 204 to every batch, counting distinct ids.
let downUntil = Number.POSITIVE_INFINITY;
const ids = new Set<string>();
const sinkServer = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (Date.now() < downUntil) return void res.writeHead(503).end();
    for (const e of JSON.parse(Buffer.concat(chunks).toString()) as Array<{ id: string }>) ids.add(e.id);
    res.writeHead(204).end();
  });
});
sinkServer.listen(0, '127.0.0.1');
await new Promise((r) => sinkServer.once('listening', r));
const sinkUrl = `http://127.0.0.1:${(sinkServer.address() as AddressInfo).port}/api/v1/events`;

interface Target {
  readonly name: string;
  readonly env: Record<string, string>;
  child?: ChildProcess;
  url?: string;
  metrics?: string;
  ttft: number[];
  e2e: number[];
  cpu: number;
  requests: number;
  errors: number;
}

const up = await startUpstream();
const dirs: string[] = [];
const dir = () => {
  const d = mkdtempSync(join(tmpdir(), 'infermeter-bench-ledger-'));
  dirs.push(d);
  return d;
};
const targets: Target[] = (
  [
    { name: 'ledger off', env: {} },
    { name: 'ledger on (spool only)', env: { INFERMETER_USAGE_DIR: dir() } },
    {
      name: `ledger on, sink down ${downSeconds} s`,
      env: { INFERMETER_USAGE_DIR: dir(), INFERMETER_USAGE_SINK: sinkUrl, INFERMETER_USAGE_SINK_BACKOFF_MAX_MS: '5000' },
    },
  ] as Array<{ name: string; env: Record<string, string> }>
).map((t) => ({ ...t, ttft: [], e2e: [], cpu: 0, requests: 0, errors: 0 }));

const scrape = async (t: Target, name: string): Promise<number> => {
  const text = await (await fetch(t.metrics!)).text();
  return Number(new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN);
};

try {
  for (const t of targets) {
    const cli = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
    const { child, line } = await startNode(cli, [], { ...infermeterEnv(up.url), ...t.env }, /"infermeter started"/, 'stderr', INFERMETER_FLAGS.split(' '));
    const started = JSON.parse(line) as { data: string; metrics: string };
    t.child = child;
    t.url = started.data;
    t.metrics = started.metrics;
  }
  const agents = new Map(targets.map((t) => [t.name, new http.Agent({ keepAlive: true, maxSockets: 64 })]));
  for (const t of targets) await runLoad(t.url!, scenario, agents.get(t.name)!); // warm-up, unmeasured
  const measuredFrom = Date.now();
  // Down through every measured run, and at least `--down` seconds.
  downUntil = Number.POSITIVE_INFINITY;
  for (let rep = 0; rep < reps; rep++) {
    const k = rep % targets.length;
    for (const t of [...targets.slice(k), ...targets.slice(0, k)]) {
      const before = cpuMs(t.child!.pid!);
      const r = await runLoad(t.url!, scenario, agents.get(t.name)!);
      t.cpu += cpuMs(t.child!.pid!) - before;
      t.ttft.push(...r.ttftMs);
      t.e2e.push(...r.e2eMs);
      t.requests += scenario.requests;
      t.errors += r.errors;
    }
  }
  const measuredSeconds = (Date.now() - measuredFrom) / 1000;
  for (const a of agents.values()) a.destroy();

  // The sink comes back: the backlog drains.
  const sink = targets[2]!;
  const backlogAtEnd = await scrape(sink, 'infermeter_usage_backlog_records');
  const oldestAtEnd = await scrape(sink, 'infermeter_usage_backlog_oldest_seconds');
  downUntil = Math.max(Date.now(), measuredFrom + downSeconds * 1000);
  const downFor = (downUntil - measuredFrom) / 1000;
  let drainedAt: number | undefined;
  for (let i = 0; i < 6000 && drainedAt === undefined; i++) {
    if (Date.now() >= downUntil && (await scrape(sink, 'infermeter_usage_backlog_records')) === 0) drainedAt = Date.now();
    else await new Promise((r) => setTimeout(r, 50));
  }
  const spooled = await scrape(sink, 'infermeter_usage_records_total{state="spooled"}');
  const delivered = await scrape(sink, 'infermeter_usage_records_total{state="delivered"}');
  const lost = await scrape(sink, 'infermeter_usage_records_total{state="lost"}');

  const f = (ms: number) => ms.toFixed(1);
  console.log(
    `${scenario.requests} streamed requests, concurrency ${scenario.concurrency}, ${scenario.tokens} tokens, TTFT ${scenario.ttftMs} ms, ${scenario.gapMs} ms between tokens; 1 unmeasured and ${reps} interleaved repetitions (${measuredSeconds.toFixed(0)} s); the sink down through all of them (${downFor.toFixed(0)} s)`,
  );
  console.log('\n| target | TTFT p50 ms | TTFT p99 ms | e2e p50 ms | e2e p99 ms | CPU µs per request | errors |\n|---|---|---|---|---|---|---|');
  for (const t of targets) {
    console.log(
      `| ${t.name} | ${f(percentile(t.ttft, 50))} | ${f(percentile(t.ttft, 99))} | ${f(percentile(t.e2e, 50))} | ${f(percentile(t.e2e, 99))} | ${((t.cpu * 1000) / t.requests).toFixed(0)} | ${t.errors} |`,
    );
  }
  console.log(
    `\nsink: backlog ${backlogAtEnd} records, the oldest ${oldestAtEnd.toFixed(0)} s old, when it came back; ${drainedAt === undefined ? 'not drained within the bound' : `drained ${((drainedAt - downUntil) / 1000).toFixed(1)} s later`}; spooled ${spooled}, delivered ${delivered}, lost ${lost}, distinct ids at the sink ${ids.size}`,
  );
} finally {
  for (const t of targets) t.child?.kill('SIGTERM');
  up.child.kill();
  sinkServer.close();
  sinkServer.closeAllConnections();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}
