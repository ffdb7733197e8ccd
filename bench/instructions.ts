// npm run bench:instructions: the instructions a proxy executes per request, counted by
// valgrind's callgrind, in the kept-alive round trip (one-token requests at concurrency 1,
// clients without include_usage: the bench's `round trip`; `--tokens=N`: N-token streams, whose
// difference from one token's, per token, is what an event costs). Time on these machines varies
// by tens of percent from one minute to the next; an instruction count does not (two runs of one
// build agree within about 1 %), so a change to the per-request path is measured here before and
// after on a busy machine too. Node runs with --single-threaded, so that the garbage collector's
// and the compiler's work is counted with the rest, on the one thread. Each target: started under
// callgrind, warmed up (`--warm=N`, 300 requests), its counters dumped and so zeroed, then
// `--requests=N` (300) requests, dumped again: that second dump is the figure. Targets: the
// bench's bare Node pass-through, and infermeter with its defaults but the engine's metrics (read
// on a timer, so charged to each request about 50 times over under valgrind's slowdown);
// BENCH_COMPARE=<another checkout, with its node_modules> adds that build (several,
// comma-separated); `--env=NAME=VALUE,...` runs infermeter with those variables too (one more
// target). Needs Debian's `valgrind` (not the test suite: about a minute a target).
import http from 'node:http';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad, type Scenario } from './load.ts';
import { INFERMETER_FLAGS, infermeterEnv, lineMatching, startUpstream } from './targets.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const count = (name: string, fallback: number): number => {
  const n = Number(arg(name) ?? fallback);
  if (!Number.isInteger(n) || n < 1 || n > 100_000) throw new Error(`--${name}: expected an integer from 1 to 100000`);
  return n;
};
const warm = count('warm', 300);
const requests = count('requests', 300);
const tokens = count('tokens', 1);
const extraEnv = arg('env');
const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));

if (spawnSync('valgrind', ['--version']).status !== 0) {
  process.stdout.write('valgrind is not installed (Debian: apt-get install valgrind): nothing measured\n');
  process.exit(0);
}

const shape = (n: number): Scenario => ({ name: 'round trip', requests: n, concurrency: 1, tokens, ttftMs: 0, gapMs: 0 });

/** callgrind's dump of its counters so far (which zeroes them); resolves once the dump's file exists. */
async function dump(pid: number, file: string): Promise<void> {
  spawnSync('callgrind_control', ['--dump', String(pid)]);
  for (let waited = 0; !existsSync(file) && waited < 60_000; waited += 100) await new Promise((r) => setTimeout(r, 100));
  if (!existsSync(file)) throw new Error(`callgrind wrote no ${file}`);
  await new Promise((r) => setTimeout(r, 500)); // its write done
}

interface Target {
  readonly name: string;
  readonly script: string;
  readonly args: string[];
  readonly env: Record<string, string>;
  readonly flags: string[];
  readonly ready: RegExp;
  /** Where it says it listens. */
  readonly stream: 'stdout' | 'stderr';
  readonly url: (line: string) => string;
}

async function instructionsPerRequest(target: Target, dir: string, index: number): Promise<number> {
  const out = join(dir, `${index}.out`);
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      `--callgrind-out-file=${out}`,
      '--smc-check=all-non-file',
      process.execPath,
      '--single-threaded',
      ...target.flags,
      target.script,
      ...target.args,
    ],
    { env: { PATH: process.env.PATH ?? '', ...target.env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  try {
    const url = target.url(await lineMatching(child, target.stream, target.ready));
    const agent = new http.Agent({ keepAlive: true });
    await runLoad(url, shape(warm), agent);
    await dump(child.pid!, `${out}.1`);
    const r = await runLoad(url, shape(requests), agent);
    await dump(child.pid!, `${out}.2`);
    agent.destroy();
    if (r.errors > 0) throw new Error(`${target.name}: ${r.errors} requests failed`);
    const summary = /^summary: (\d+)$/m.exec(readFileSync(`${out}.2`, 'utf8'));
    if (summary === null) throw new Error(`${target.name}: no summary in callgrind's dump`);
    return Number(summary[1]) / requests;
  } finally {
    child.kill('SIGKILL');
  }
}

const dir = mkdtempSync(join(tmpdir(), 'infermeter-instructions-'));
const up = await startUpstream();
try {
  // The engine's metrics are read on a timer: valgrind runs a process about 50 times slower, so
  // each request would carry 50 times its share of that (measured: 55,000 instructions a request).
  const env = { ...infermeterEnv(up.url), INFERMETER_UPSTREAM_METRICS: 'off' };
  const flags = INFERMETER_FLAGS.split(' ');
  const infermeter = (name: string, root: string, extra: Record<string, string> = {}): Target => ({
    name,
    script: join(root, 'src/cli.ts'),
    args: [],
    env: { ...env, ...extra },
    flags,
    ready: /"infermeter started"/,
    stream: 'stderr',
    url: (line) => (JSON.parse(line) as { data: string }).data,
  });
  const targets: Target[] = [
    {
      name: 'node pass-through',
      script: here('passthrough.ts'),
      args: [up.url],
      env: {},
      flags: [],
      ready: /"port"/,
      stream: 'stdout',
      url: (line) => `http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}`,
    },
    infermeter('infermeter', here('..')),
  ];
  for (const root of process.env.BENCH_COMPARE?.split(',') ?? []) targets.push(infermeter(`infermeter @ ${root}`, root));
  if (extraEnv !== undefined) {
    const vars = Object.fromEntries(
      extraEnv.split(',').map((pair) => {
        const at = pair.indexOf('=');
        if (at < 1) throw new Error(`--env: expected NAME=VALUE pairs, comma-separated; got ${pair}`);
        return [pair.slice(0, at), pair.slice(at + 1)];
      }),
    );
    targets.push(infermeter(`infermeter, ${extraEnv}`, here('..'), vars));
  }
  const results: Array<[string, number]> = [];
  for (const [i, t] of targets.entries()) results.push([t.name, await instructionsPerRequest(t, dir, i)]);
  const floor = results[0]![1];
  process.stdout.write(
    `round trip, kept alive, ${tokens} token${tokens === 1 ? '' : 's'} a request: instructions per request (callgrind, node --single-threaded; infermeter without engine scraping; ${warm} requests to warm up, ${requests} counted)\n\n| target | instructions per request | × node pass-through |\n|---|---|---|\n`,
  );
  for (const [name, n] of results) process.stdout.write(`| ${name} | ${Math.round(n).toLocaleString('en-US')} | ${(n / floor).toFixed(2)} |\n`);
} finally {
  up.child.kill();
  rmSync(dir, { recursive: true, force: true });
}
