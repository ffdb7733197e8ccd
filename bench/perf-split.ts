// npm run bench:perf: where a proxy's CPU goes by Linux perf's sampling (cpu-clock, so no hardware
// counters are needed), beside the Node floor (the pass-through writing the head at once) under
// the same load: per event, the kernel's part, the node binary's (V8's runtime and builtins,
// libuv, Node's C++), the JIT's (JavaScript and wasm, named by --perf-basic-prof) and the C
// library's. V8's own profiler (bench:profile) sees JavaScript only; this sees the syscalls'
// kernel time too. `--owners=N` (call graphs, `-g`): the N JavaScript functions that cost the most
// with what they call in native code (builtins, the runtime, the kernel under a syscall) charged
// to them, callees in JavaScript apart; call graphs cost the sampled process time of their own,
// so compare owners within a target, not totals across targets, when they are on.
// `--scenario=latency` (default; a token every 10 ms, one event a read), `roundtrip` (one-token
// requests one at a time, kept alive), `throughput`; `--target=infermeter` one target alone.
// Needs Debian's `linux-perf` and the right to profile another process (root, or
// kernel.perf_event_paranoid at most 1); without them it says so and measures nothing.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad, type Scenario } from './load.ts';
import { INFERMETER_FLAGS, infermeterEnv, startNode, startUpstream } from './targets.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));

const SHAPES: Record<string, { scenario: Scenario; warm: number }> = {
  latency: { scenario: { name: 'latency', requests: 640, concurrency: 32, tokens: 128, ttftMs: 50, gapMs: 10 }, warm: 640 },
  roundtrip: { scenario: { name: 'round trip', requests: 20_000, concurrency: 1, tokens: 1, ttftMs: 0, gapMs: 0 }, warm: 15_000 },
  throughput: { scenario: { name: 'throughput', requests: 1500, concurrency: 16, tokens: 512, ttftMs: 0, gapMs: 0 }, warm: 500 },
};
const shapeName = arg('scenario') ?? 'latency';
const shape = SHAPES[shapeName];
if (shape === undefined) throw new Error(`--scenario=${shapeName}: expected one of ${Object.keys(SHAPES).join(', ')}`);
const owners = arg('owners') === undefined ? 0 : Number(arg('owners'));
if (!Number.isInteger(owners) || owners < 0 || owners > 500) throw new Error('--owners: expected an integer from 0 to 500');
const only = arg('target');
if (only !== undefined && only !== 'infermeter' && only !== 'passthrough') throw new Error(`--target=${only}: expected infermeter or passthrough`);
const FREQUENCY = 4000;

if (spawnSync('perf', ['--version']).status !== 0) {
  process.stdout.write('perf is not installed (Debian: apt-get install linux-perf): nothing measured\n');
  process.exit(0);
}

interface Sampled {
  readonly name: string;
  readonly events: number;
  /** Samples by where they landed: kernel, node, jit, libc, other. */
  readonly byPart: Map<string, number>;
  /** JavaScript owner → samples (with --owners). */
  readonly byOwner: Map<string, number>;
}

/** Which part a sample's shared object is (perf script names JIT code by its map file, /tmp/perf-<pid>.map). */
const PART = (dso: string): string =>
  dso.includes('kernel')
    ? 'kernel'
    : dso.startsWith('[JIT]') || /^perf-\d+\.map$/.test(dso)
      ? 'jit'
      : dso === 'node'
        ? 'node'
        : dso.startsWith('libc')
          ? 'libc'
          : 'other';

/** `perf script`'s samples: each a block of frames, leaf first, `<ip> <symbol> (<dso>)`. */
function readSamples(file: string, withOwners: boolean): Pick<Sampled, 'byPart' | 'byOwner'> {
  const fields = withOwners ? 'ip,sym,dso' : 'ip,dso';
  const out = spawnSync('perf', ['script', '-i', file, '-F', fields], { encoding: 'utf8', maxBuffer: 1 << 30 }).stdout;
  const byPart = new Map<string, number>();
  const byOwner = new Map<string, number>();
  const add = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  if (!withOwners) {
    for (const line of out.split('\n')) {
      const dso = /\(([^)]*)\)\s*$/.exec(line)?.[1];
      if (dso !== undefined) add(byPart, PART(dso.replace(/^.*\//, '')));
    }
    return { byPart, byOwner };
  }
  for (const block of out.split('\n\n')) {
    const frames = block
      .split('\n')
      .map((l) => /^\s*[0-9a-f]+\s+(.*?)\s+\(([^)]*)\)\s*$/.exec(l))
      .filter((m) => m !== null);
    if (frames.length === 0) continue;
    add(byPart, PART(frames[0]![2]!.replace(/^.*\//, '')));
    const js = frames.find((f) => f[1]!.startsWith('JS:') && !f[1]!.includes('wasm'));
    add(
      byOwner,
      js === undefined
        ? `(no JavaScript frame) ${frames[0]![1]}`
        : js[1]!.replace(/^JS:[*+~^]?'?/, '').replace(/(?:file:\/\/)?\/[^ ]*?\/(src|node_modules)\//, '$1/'),
    );
  }
  return { byPart, byOwner };
}

async function measure(target: 'passthrough' | 'infermeter', upstream: string, dir: string): Promise<Sampled> {
  const flags = ['--perf-basic-prof'];
  const started =
    target === 'passthrough'
      ? await startNode(here('passthrough.ts'), [upstream, '--head-at-once'], {}, /"port"/, 'stdout', flags)
      : await startNode(here('../src/cli.ts'), [], infermeterEnv(upstream), /"infermeter started"/, 'stderr', [...INFERMETER_FLAGS.split(' '), ...flags]);
  const { child, line } = started;
  try {
    const url = target === 'passthrough' ? `http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}` : (JSON.parse(line) as { data: string }).data;
    const agent = new http.Agent({ keepAlive: true, maxSockets: shape!.scenario.concurrency });
    await runLoad(url, { ...shape!.scenario, requests: shape!.warm }, agent);
    const file = join(dir, `${target}.data`);
    const perf = spawn('perf', ['record', '-e', 'cpu-clock', '-F', String(FREQUENCY), ...(owners > 0 ? ['-g'] : []), '-p', String(child.pid), '-o', file], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let said = '';
    perf.stderr.on('data', (c: Buffer) => (said += c.toString()));
    const closed = new Promise((resolve) => perf.once('close', resolve));
    await new Promise((resolve) => setTimeout(resolve, 1000)); // attached
    const load = await runLoad(url, shape!.scenario, agent);
    perf.kill('SIGINT');
    await closed;
    agent.destroy();
    if (load.errors > 0) throw new Error(`${target}: ${load.errors} requests failed`);
    const sampled = readSamples(file, owners > 0);
    if (sampled.byPart.size === 0) throw new Error(`perf recorded nothing for ${target}: ${said.trim()}`);
    return { name: target === 'passthrough' ? 'node pass-through, head at once' : 'infermeter', events: load.events, ...sampled };
  } finally {
    child.kill();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'infermeter-perf-'));
const up = await startUpstream();
try {
  const targets = only === undefined ? (['passthrough', 'infermeter'] as const) : ([only] as const);
  const results: Sampled[] = [];
  for (const t of targets) results.push(await measure(t, up.url, dir));
  const usPerEvent = (samples: number, events: number) => ((samples * 1e6) / FREQUENCY / events).toFixed(2);
  const parts = ['kernel', 'node', 'jit', 'libc', 'other'];
  process.stdout.write(
    `${shape.scenario.name}: ${shape.scenario.requests} requests at concurrency ${shape.scenario.concurrency}, ${shape.scenario.tokens} token${shape.scenario.tokens === 1 ? '' : 's'} each; sampled CPU (perf, cpu-clock at ${FREQUENCY} Hz${owners > 0 ? ', with call graphs' : ''}) in µs per event\n\n| target | ${parts.join(' | ')} | all |\n|---|${parts.map(() => '---|').join('')}---|\n`,
  );
  for (const r of results) {
    const all = [...r.byPart.values()].reduce((a, b) => a + b, 0);
    process.stdout.write(`| ${r.name} | ${parts.map((p) => usPerEvent(r.byPart.get(p) ?? 0, r.events)).join(' | ')} | ${usPerEvent(all, r.events)} |\n`);
  }
  if (owners > 0) {
    for (const r of results) {
      process.stdout.write(
        `\n${r.name}: the ${owners} JavaScript functions that cost the most, with the native code they call (µs per event)\n\n| µs | function |\n|---|---|\n`,
      );
      for (const [k, v] of [...r.byOwner].sort((a, b) => b[1] - a[1]).slice(0, owners)) process.stdout.write(`| ${usPerEvent(v, r.events)} | \`${k}\` |\n`);
    }
  }
} finally {
  up.child.kill();
  rmSync(dir, { recursive: true, force: true });
}
