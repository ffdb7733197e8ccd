// npm run bench:instructions: the instructions a proxy executes per request, counted by
// valgrind's callgrind, in the kept-alive round trip (one-token requests at concurrency 1,
// clients without include_usage: the bench's `round trip`; `--tokens=N`: N-token streams, whose
// difference from one token's, per token, is what an event costs; `--gap-ms=N`: the counted
// requests' upstream waits N ms between tokens, so that each event is a read of its own, as in the
// latency scenario (with none, events coalesce into fewer reads, the more so under valgrind's
// slowdown: 10 ms keeps them apart there; the warm-up has no gap); `--prompt-bytes=N`: a user
// message of N bytes of prose instead of one sentence). Time on these machines varies
// by tens of percent from one minute to the next; an instruction count much less (two runs of one
// build agreed within about 1 % after 300 requests of warm-up, within 7 % after 15,000: when V8
// recompiles then varies from run to run), so a change to the per-request path is measured here
// before and after on a busy machine too. Node runs with --single-threaded, so that the garbage collector's
// and the compiler's work is counted with the rest, on the one thread; the last column is what
// V8's optimizing compilers took of it. Each target: started under callgrind, warmed up
// (`--warm=N`, 15,000 requests: V8 optimizes code called once a request only after thousands of
// calls, and after 3,000 its compilers still took 99,000 of infermeter's 637,000 instructions a
// request; after 15,000, none), its counters dumped and so zeroed, then `--requests=N` (300)
// requests, dumped again: that second dump is the figure. Targets: the
// bench's bare Node pass-through, and infermeter with its defaults but the engine's metrics (read
// on a timer, so charged to each request about 50 times over under valgrind's slowdown);
// BENCH_COMPARE=<another checkout, with its node_modules> adds that build (several,
// comma-separated); `--env=NAME=VALUE,...` runs infermeter with those variables too (one more
// target); `--by-function=N`: for each target beside the pass-through, the N functions whose own
// instructions differ most from the pass-through's (JavaScript named from Node's --perf-basic-prof
// map). Needs Debian's `valgrind` (not the test suite: about four minutes a target).
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
const warm = count('warm', 15_000);
const requests = count('requests', 300);
const tokens = count('tokens', 1);
const gapMs = arg('gap-ms') === undefined ? 0 : count('gap-ms', 10);
const promptBytes = arg('prompt-bytes') === undefined ? undefined : count('prompt-bytes', 1);
const extraEnv = arg('env');
const byFunction = arg('by-function') === undefined ? undefined : count('by-function', 20);
const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));

if (spawnSync('valgrind', ['--version']).status !== 0) {
  process.stdout.write('valgrind is not installed (Debian: apt-get install valgrind): nothing measured\n');
  process.exit(0);
}

const shape = (n: number, gap = 0): Scenario => ({ name: 'round trip', requests: n, concurrency: 1, tokens, ttftMs: 0, gapMs: gap, promptBytes });

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

/** V8's optimizing compilers' functions (TurboFan's, Turboshaft's, Maglev's), by their C++ namespace. */
const COMPILER = /\b(?:compiler|maglev|turboshaft)::/;

/**
 * Each function's own instructions in a callgrind dump: its cost lines summed (a `calls=` line's
 * next line is its callee's inclusive cost: skipped). A function is named once, where its id first
 * appears (`fn=(id) name` or a call's `cfn=(id) name`), then by its id; JIT code has no symbol and
 * is named by its address.
 */
function selfCosts(dump: string): Map<string, number> {
  const names = new Map<string, string>();
  const costs = new Map<string, number>();
  let fn = '';
  let skip = false;
  for (const line of dump.split('\n')) {
    if (line.startsWith('fn=') || line.startsWith('cfn=')) {
      const m = /^c?fn=\((\d+)\)(?: (.*))?$/.exec(line);
      if (m === null) continue;
      if (m[2] !== undefined) names.set(m[1]!, m[2]);
      if (line.startsWith('fn=')) fn = names.get(m[1]!) ?? '';
    } else if (line.startsWith('calls=')) skip = true;
    else if (/^[\d+*-]/.test(line)) {
      if (skip) skip = false;
      else costs.set(fn, (costs.get(fn) ?? 0) + Number(line.split(' ')[1] ?? 0));
    }
  }
  return costs;
}

/**
 * `--by-function`: the costs by function with JIT code named from Node's `--perf-basic-prof` map
 * (/tmp/perf-<pid>.map: start, size and name of each piece of code V8 made), JavaScript as
 * `name file:line` (src/ and node: modules), the rest by their symbol.
 */
function namedCosts(costs: Map<string, number>, pid: number): Map<string, number> {
  const map = `/tmp/perf-${pid}.map`;
  const code = existsSync(map)
    ? readFileSync(map, 'utf8')
        .split('\n')
        .map((line) => line.split(' '))
        .filter((parts) => parts.length >= 3)
        .map(([start, size, ...name]) => ({ start: Number.parseInt(start!, 16), size: Number.parseInt(size!, 16), name: name.join(' ') }))
        .sort((x, y) => x.start - y.start)
    : [];
  rmSync(map, { force: true });
  const jsName = (address: number): string => {
    let lo = 0;
    let hi = code.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (code[mid]!.start <= address) lo = mid + 1;
      else hi = mid - 1;
    }
    const at = code[hi];
    if (at === undefined || address >= at.start + at.size) return '(JIT code, unnamed)';
    return `JS ${at.name.replace(/^JS:[*+~^']*/, '').replace(/file:\/\/\/.*?\/(src|bench)\//, '$1/')}`;
  };
  const named = new Map<string, number>();
  for (const [fn, n] of costs) {
    const name = /^0x[0-9a-f]+$/.test(fn) ? jsName(Number.parseInt(fn, 16)) : fn.replaceAll('(anonymous namespace)', '(anonymous)').replace(/(?<=\w)\(.*$/, '');
    named.set(name, (named.get(name) ?? 0) + n);
  }
  return named;
}

interface Count {
  readonly total: number;
  readonly compiler: number;
  /** `--by-function`: each function's own instructions, per request. */
  readonly byFunction: Map<string, number> | undefined;
}

async function instructionsPerRequest(target: Target, dir: string, index: number): Promise<Count> {
  const out = join(dir, `${index}.out`);
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      `--callgrind-out-file=${out}`,
      '--smc-check=all-non-file',
      process.execPath,
      '--single-threaded',
      ...(byFunction === undefined ? [] : ['--perf-basic-prof']),
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
    const r = await runLoad(url, shape(requests, gapMs), agent);
    await dump(child.pid!, `${out}.2`);
    agent.destroy();
    if (r.errors > 0) throw new Error(`${target.name}: ${r.errors} requests failed`);
    const text = readFileSync(`${out}.2`, 'utf8');
    const summary = /^summary: (\d+)$/m.exec(text);
    if (summary === null) throw new Error(`${target.name}: no summary in callgrind's dump`);
    const costs = selfCosts(text);
    let compiler = 0;
    for (const [fn, n] of costs) if (COMPILER.test(fn)) compiler += n;
    const perRequest = (m: Map<string, number>) => new Map([...m].map(([fn, n]) => [fn, n / requests]));
    return {
      total: Number(summary[1]) / requests,
      compiler: compiler / requests,
      byFunction: byFunction === undefined ? undefined : perRequest(namedCosts(costs, child.pid!)),
    };
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
  const results: Array<[string, Count]> = [];
  for (const [i, t] of targets.entries()) results.push([t.name, await instructionsPerRequest(t, dir, i)]);
  const floor = results[0]![1].total;
  process.stdout.write(
    `round trip, kept alive, ${tokens} token${tokens === 1 ? '' : 's'} a request${gapMs === 0 ? '' : `, ${gapMs} ms between them`}${promptBytes === undefined ? '' : `, a ${promptBytes}-byte prompt`}: instructions per request (callgrind, node --single-threaded; infermeter without engine scraping; ${warm} requests to warm up, ${requests} counted)\n\n| target | instructions per request | × node pass-through | of which V8's optimizing compilers |\n|---|---|---|---|\n`,
  );
  const figure = (n: number) => Math.round(n).toLocaleString('en-US');
  for (const [name, n] of results) process.stdout.write(`| ${name} | ${figure(n.total)} | ${(n.total / floor).toFixed(2)} | ${figure(n.compiler)} |\n`);
  if (byFunction !== undefined) {
    // Each target beside the pass-through: the functions whose own instructions differ most.
    const [floorName, floorCount] = results[0]!;
    for (const [name, n] of results.slice(1)) {
      const a = floorCount.byFunction!;
      const b = n.byFunction!;
      const rows = [...new Set([...a.keys(), ...b.keys()])]
        .map((fn) => [fn, a.get(fn) ?? 0, b.get(fn) ?? 0] as const)
        .sort((x, y) => Math.abs(y[2] - y[1]) - Math.abs(x[2] - x[1]))
        .slice(0, byFunction);
      process.stdout.write(
        `\n${name} against ${floorName}: the ${byFunction} functions whose own instructions per request differ most\n\n| function | ${floorName} | ${name} | difference |\n|---|---|---|---|\n`,
      );
      for (const [fn, x, y] of rows) process.stdout.write(`| \`${fn.slice(0, 120)}\` | ${figure(x)} | ${figure(y)} | ${figure(y - x)} |\n`);
    }
  }
} finally {
  up.child.kill();
  rmSync(dir, { recursive: true, force: true });
}
