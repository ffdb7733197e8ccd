// npm run bench:cpu-split: where a proxy's CPU per event goes, by thread and by user/kernel
// time, side by side in one run: infermeter (its defaults, clients without include_usage),
// the bench's Node floor (node:http, bench/passthrough.ts, the head written at once), the same
// pass-through on undici (bench/undici-passthrough.ts) and a raw TCP relay
// (bench/tcp-relay.ts: the same sockets and the same bytes, no HTTP). The relay against the
// pass-through is what Node's HTTP machinery costs per event (the client's parser, the
// response's stream, the chunked write); infermeter against the pass-through, what measuring
// costs. BENCH_COMPARE=<another checkout, with its node_modules> adds that build's infermeter
// (several, comma-separated).
// `--scenario=latency|throughput|round trip` (default latency), `--reps=N` (default 6, each
// target once a repetition, the order rotated), `--warm=N` (default 1: unmeasured runs of the
// scenario per target first; V8 optimizes a request's own code only after thousands of
// requests, "Where the CPU goes" in docs/performance.md), `--path=P`
// (the same requests on another path: on one infermeter does not measure, such as
// `/v1/unmeasured`, its proxying alone, against the measured route). Bounded: a fixed number of requests per
// repetition, a fixed number of repetitions.
import http from 'node:http';
import { readdirSync, readFileSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad, type Scenario } from './load.ts';
import { INFERMETER_FLAGS, infermeterEnv, startNode, startUpstream } from './targets.ts';

const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));
const SHAPES: Record<string, Scenario> = {
  latency: { name: 'latency', requests: 192, concurrency: 32, tokens: 128, ttftMs: 50, gapMs: 10 },
  throughput: { name: 'throughput', requests: 512, concurrency: 16, tokens: 512, ttftMs: 0, gapMs: 0 },
  'round trip': { name: 'round trip', requests: 1500, concurrency: 1, tokens: 1, ttftMs: 0, gapMs: 0 },
};
const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const shape = SHAPES[arg('scenario') ?? 'latency'];
if (shape === undefined) throw new Error(`--scenario: expected one of ${Object.keys(SHAPES).join(', ')}`);
const path = arg('path');
if (path !== undefined && !path.startsWith('/')) throw new Error('--path: expected a path beginning with /');
const scenario: Scenario = path === undefined ? shape : { ...shape, path };
const reps = Number(arg('reps') ?? 6);
if (!Number.isInteger(reps) || reps < 1 || reps > 50) throw new Error('--reps: expected an integer from 1 to 50');
const warm = Number(arg('warm') ?? 1);
if (!Number.isInteger(warm) || warm < 0 || warm > 50) throw new Error('--warm: expected an integer from 0 to 50');

const TICK_MS = 10; // /proc/<pid>/stat's utime and stime are in clock ticks (CLK_TCK 100)

/** CPU ms so far: per thread (the main thread, V8's workers, libuv's), and user and kernel time. */
function cpu(pid: number): Map<string, number> {
  const m = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = tid === String(pid) ? 'main thread' : readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const ms = Number(/se\.sum_exec_runtime\s*:\s*([\d.]+)/.exec(readFileSync(`/proc/${pid}/task/${tid}/sched`, 'utf8'))?.[1] ?? 0);
      m.set(name, (m.get(name) ?? 0) + ms);
    } catch {
      // a thread that ended meanwhile
    }
  }
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  m.set('user', Number(fields[11]) * TICK_MS);
  m.set('kernel', Number(fields[12]) * TICK_MS);
  return m;
}

interface Process {
  readonly name: string;
  readonly url: string;
  readonly child: ChildProcess;
}

const up = await startUpstream();
const started: Process[] = [];
const infermeter = async (name: string, cli: string) => {
  const { child, line } = await startNode(cli, [], infermeterEnv(up.url), /"infermeter started"/, 'stderr', INFERMETER_FLAGS.split(' '));
  started.push({ name, url: (JSON.parse(line) as { data: string }).data, child });
};
const plain = async (name: string, script: string, args: string[] = []) => {
  const { child, line } = await startNode(here(script), [up.url, ...args], {}, /"port"/, 'stdout');
  started.push({ name, url: `http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}`, child });
};
try {
  await infermeter('infermeter', here('../src/cli.ts'));
  for (const root of process.env.BENCH_COMPARE?.split(',').filter((r) => r !== '') ?? []) await infermeter(`infermeter @ ${root}`, join(root, 'src/cli.ts'));
  await plain('node pass-through, head at once', 'passthrough.ts', ['--head-at-once']);
  await plain('undici pass-through, head at once', 'undici-passthrough.ts');
  await plain('raw TCP relay', 'tcp-relay.ts');
  const agents = new Map(started.map((p) => [p.name, new http.Agent({ keepAlive: true, maxSockets: 64 })]));
  for (let w = 0; w < warm; w++) for (const p of started) await runLoad(p.url, scenario, agents.get(p.name)!);
  const totals = new Map<string, { events: number; cpu: Map<string, number> }>(started.map((p) => [p.name, { events: 0, cpu: new Map() }]));
  for (let rep = 0; rep < reps; rep++) {
    const k = rep % started.length;
    for (const p of [...started.slice(k), ...started.slice(0, k)]) {
      const before = cpu(p.child.pid!);
      const r = await runLoad(p.url, scenario, agents.get(p.name)!);
      const after = cpu(p.child.pid!);
      const total = totals.get(p.name)!;
      total.events += r.events;
      for (const [key, ms] of after) total.cpu.set(key, (total.cpu.get(key) ?? 0) + ms - (before.get(key) ?? 0));
    }
  }
  for (const a of agents.values()) a.destroy();
  const us = (ms: number | undefined, events: number) => (((ms ?? 0) * 1000) / events).toFixed(2);
  console.log(
    `${scenario.name}${path === undefined ? '' : ` on ${path}`}: ${scenario.requests} requests, concurrency ${scenario.concurrency}, ${scenario.tokens} tokens, ${scenario.gapMs} ms between tokens; ${warm} unmeasured and ${reps} interleaved repetitions; CPU µs per event`,
  );
  console.log('\n| target | all threads | main thread | V8 workers | user | kernel |\n|---|---|---|---|---|---|');
  for (const [name, { events, cpu: c }] of totals) {
    const threads = [...c].filter(([k]) => k !== 'user' && k !== 'kernel').reduce((s, [, v]) => s + v, 0);
    console.log(
      `| ${name} | ${us(threads, events)} | ${us(c.get('main thread'), events)} | ${us(c.get('V8Worker'), events)} | ${us(c.get('user'), events)} | ${us(c.get('kernel'), events)} |`,
    );
  }
} finally {
  for (const p of started) p.child.kill('SIGTERM');
  up.child.kill();
}
