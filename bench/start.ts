// npm run bench:start [DIR ...]: the CPU one start of infermeter takes, from its spawn to its
// "infermeter started" line (all its threads, from /proc: module loading, compiling, the
// configuration, the listeners), with Node's compile cache filled as the suite fills it. Each
// DIR (a checkout with its node_modules; default this one) starts in turn, interleaved, 20 times;
// the median and the quartiles per DIR. What a change to the modules a start loads saves is read
// side by side: this checkout against a worktree of the commit before it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuSeconds } from './proc.ts';
import { startNode } from './targets.ts';

const STARTS = Number(process.env.BENCH_STARTS ?? 20);
const dirs = process.argv.slice(2).length > 0 ? process.argv.slice(2).map((d) => resolve(d)) : [fileURLToPath(new URL('..', import.meta.url))];
const env = {
  INFERMETER_UPSTREAM: 'http://127.0.0.1:9',
  INFERMETER_PORT: '0',
  INFERMETER_MANAGEMENT_PORT: '0',
  INFERMETER_METRICS_PORT: '0',
  INFERMETER_UPSTREAM_METRICS: 'off',
};

async function startMs(dir: string, cache: string): Promise<number> {
  const { child } = await startNode(join(dir, 'src', 'cli.ts'), [], { ...env, NODE_COMPILE_CACHE: cache }, /"infermeter started"/, 'stderr');
  const ms = cpuSeconds([child.pid!]) * 1000;
  // SIGTERM drains and exits normally, which writes the compile cache (a SIGKILL would not).
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
  return ms;
}

const caches = dirs.map(() => mkdtempSync(join(tmpdir(), 'infermeter-bench-start-')));
try {
  // One start each fills its cache.
  for (const [i, dir] of dirs.entries()) await startMs(dir, caches[i]!);
  const times = dirs.map((): number[] => []);
  for (let n = 0; n < STARTS; n++) for (const [i, dir] of dirs.entries()) times[i]!.push(await startMs(dir, caches[i]!));
  for (const [i, dir] of dirs.entries()) {
    const t = times[i]!.sort((a, b) => a - b);
    const q = (p: number) => t[Math.min(t.length - 1, Math.floor(p * t.length))]!.toFixed(0);
    process.stdout.write(`${dir}: ${q(0.5)} ms of CPU a start (quartiles ${q(0.25)} and ${q(0.75)}, ${t.length} starts)\n`);
  }
} finally {
  for (const c of caches) rmSync(c, { recursive: true, force: true });
}
