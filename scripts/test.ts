// `npm test`: the static checks (types, format, lint, unused exports) run beside the test suite,
// not before it, so the suite's wall time is not theirs plus its own. The suite runs in
// processes side by side, each running its files one after another (scripts/run-group.ts): the
// in-process tests (test/unit, test/streams) in one, the tests that spawn and wait on processes
// (every other folder) in batches, four at a time (see batches()). Several processes' output is
// printed whole, each when it ends; one's (files named) as it comes. Then the slowest files of
// all, and the summaries (`ℹ tests N` ...) added up, last. The exit code is non-zero when any of
// them failed. Arguments name the files to run in place of every test file (e.g.
// `node scripts/test.ts test/unit/*.test.ts`).
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { globSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const bin = (name: string) => join(root, 'node_modules', '.bin', name);
/** A positive number from the variable `name`, or `fallback` when it is unset. */
function positive(name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!(value > 0)) throw new Error(`${name}: expected a number above 0, got ${process.env[name]}`);
  return value;
}
// Four batches of spawning files at a time: at four, the two cores were busy 96 % of a run
// (docs/testing.md#time); a batch of short files at most this many seconds of recorded time.
const CONCURRENCY = positive('TEST_CONCURRENCY', 4);
const BATCH_SECONDS = positive('TEST_BATCH_SECONDS', 15);
// The shortest the last batches get: a process more costs about half a second of CPU.
const MIN_BATCH_SECONDS = 3;
const files = process.argv.slice(2);
// Node's compile cache (the sources with their types stripped, compiled) for the test files'
// processes and the infermeters they spawn (test/helpers/child-process.ts passes it on): each
// process of the suite loads much the same modules. Checked against the sources, so never stale.
const COMPILE_CACHE = process.env.NODE_COMPILE_CACHE ?? join(tmpdir(), 'infermeter-test-compile-cache');
// Each file's time in the last recorded run (TEST_RECORD_DURATIONS=1 npm test writes it): what
// the spawning files' batches are made by. A stale or missing entry only balances them worse.
const DURATIONS = join(root, 'scripts', 'test-durations.json');
// The batches' own V8 flags: a young generation of 16 MiB from the start, not grown by
// scavenges, for processes that load the sources and run tests for seconds (in two pairs of runs
// side by side, 1 to 3 s of the suite's 190 s of CPU less). The processes the tests spawn run as
// they would anywhere.
const BATCH_FLAGS = ['--min-semi-space-size=16'];
// Where each run's reporter leaves its files' times (scripts/slowest-files-reporter.ts).
const timesDir = mkdtempSync(join(tmpdir(), 'infermeter-test-times-'));

// TEST_CHECKS=0: the tests alone (test/integration/test-runner.test.ts runs the runner so).
const checks: Array<{ name: string; command: string; args: string[] }> =
  process.env.TEST_CHECKS === '0'
    ? []
    : [
        { name: 'tsc --noEmit', command: bin('tsc'), args: ['--noEmit'] },
        { name: 'biome format', command: bin('biome'), args: ['format'] },
        { name: 'biome lint', command: bin('biome'), args: ['lint', '--error-on-warnings'] },
        { name: 'knip', command: bin('knip'), args: [] },
      ];
/** Folders whose tests run in the runner's own process: no process spawned, nothing global left behind. */
const IN_PROCESS = /^test\/(unit|streams)\//;
const all = globSync('test/**/*.test.ts', { cwd: root }).sort();

/**
 * The spawning files in batches, each batch one process that runs its files one after another:
 * a file of BATCH_SECONDS or more alone, shorter ones together (the longest first, each into the
 * first batch it fits), by each file's recorded time (a file not recorded counts as the median).
 * A batch holds up to BATCH_SECONDS, or a CONCURRENCY-th of the time still to place when it
 * began if that is less (at least MIN_BATCH_SECONDS): the last batches are the shortest. A
 * process a file cost about half a second of CPU, Node's start and infermeter's modules, mostly
 * for files that run for a second or two; a process a batch keeps that for the few. The
 * batches, longest first, run CONCURRENCY at a time, each taken as one ends: a long file never
 * waits behind a fixed group's queue, and the last batches, the shortest, leave the cores idle
 * for less at the end.
 */
function batches(files: readonly string[]): Array<{ files: string[]; seconds: number }> {
  let recorded: Record<string, number> = {};
  try {
    recorded = JSON.parse(readFileSync(DURATIONS, 'utf8')) as Record<string, number>;
  } catch {}
  const known = files
    .map((f) => recorded[f])
    .filter((s): s is number => typeof s === 'number')
    .sort((a, b) => a - b);
  const median = known[Math.floor(known.length / 2)] ?? 1;
  const out: Array<{ files: string[]; seconds: number; cap: number }> = [];
  const timed = files.map((f) => [f, recorded[f] ?? median] as const).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  let left = timed.reduce((sum, [, seconds]) => sum + seconds, 0);
  for (const [file, seconds] of timed) {
    let batch = seconds < BATCH_SECONDS ? out.find((b) => b.seconds + seconds <= b.cap) : undefined;
    // What is left too little for a process of its own: with the shortest batch.
    if (batch === undefined && left < MIN_BATCH_SECONDS && out.length > 0) batch = out.reduce((a, b) => (b.seconds < a.seconds ? b : a));
    if (batch === undefined) {
      batch = { files: [], seconds: 0, cap: Math.min(BATCH_SECONDS, Math.max(MIN_BATCH_SECONDS, left / CONCURRENCY)) };
      out.push(batch);
    }
    batch.files.push(file);
    batch.seconds += seconds;
    left -= seconds;
  }
  return out.sort((a, b) => b.seconds - a.seconds);
}

// The files named, or every test file: the in-process ones in one process, the others in batches.
const chosen = files.length > 0 ? files : all;
const inProcess = chosen.filter((f) => IN_PROCESS.test(f));
const spawning = batches(chosen.filter((f) => !IN_PROCESS.test(f)));
const suites = [
  ...(inProcess.length > 0 ? [{ name: 'node --test (in process)', files: inProcess, pooled: false }] : []),
  ...spawning.map((batch, i) => ({
    name: `node --test (spawning, batch ${i + 1} of ${spawning.length}: ${batch.files.map((f) => f.replace(/^test\//, '')).join(', ')})`,
    files: batch.files,
    pooled: true,
  })),
];

/** Runs `task`s at most `n` at a time, each started as soon as one ended, in the order given. */
function pool(n: number): <T>(task: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: Array<() => void> = [];
  return async (task) => {
    if (running >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    else running++;
    try {
      return await task();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}

function run(
  command: string,
  args: string[],
  options: { live?: (text: string) => void; env?: Record<string, string> } = {},
): Promise<{ code: number; output: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...options.env, NODE_COMPILE_CACHE: COMPILE_CACHE, FORCE_COLOR: process.env.FORCE_COLOR ?? '0' },
    });
    let output = '';
    let partial = '';
    const take = (chunk: Buffer) => {
      const text = chunk.toString();
      if (!options.live) {
        output += text;
        return;
      }
      // Whole lines only, so that a check's output never lands inside a line of the suite's.
      partial += text;
      const end = partial.lastIndexOf('\n');
      if (end < 0) return;
      options.live(partial.slice(0, end + 1));
      partial = partial.slice(end + 1);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', (err) => {
      output += `${err.message}\n`;
    });
    child.on('close', (code, signal) => {
      if (partial) options.live?.(`${partial}\n`);
      resolve({ code: code ?? (signal ? 1 : 0), output, ms: performance.now() - started });
    });
  });
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
// Each suite's lines from its closing summary (`ℹ tests N`) on are held back: the summaries are
// added up and printed last, after the slowest files of all the suites.
const isSummary = (line: string): boolean => line.startsWith('ℹ ');
function splitTail(text: string, tail: string[]): string {
  let body = '';
  for (const line of text.split(/(?<=\n)/)) {
    if (tail.length > 0 || line.startsWith('ℹ tests ')) tail.push(line);
    else body += line;
  }
  return body;
}
const tails = suites.map((): string[] => []);
// One suite (files named): its output as it comes. Several: each one's whole, when it ends.
const live = suites.length === 1;
const pooled = pool(CONCURRENCY);
const suiteStarted = performance.now();
const results = await Promise.all([
  ...checks.map(async (check) => {
    const { code, output, ms } = await run(check.command, check.args);
    process.stdout.write(`\n── ${check.name}: ${code === 0 ? 'ok' : `FAILED (exit ${code})`} in ${seconds(ms)}\n${code === 0 ? '' : output}`);
    return { name: check.name, code };
  }),
  ...suites.map(async (suite, i) => {
    const tail = tails[i]!;
    const start = () =>
      run(process.execPath, [...BATCH_FLAGS, join(root, 'scripts', 'run-group.ts')], {
        ...(live ? { live: (text: string) => process.stdout.write(splitTail(text, tail)) } : {}),
        env: { TEST_GROUP_FILES: JSON.stringify(suite.files), TEST_FILE_TIMES: join(timesDir, `${i}.json`) },
      });
    const { code, output, ms } = await (suite.pooled ? pooled(start) : start());
    process.stdout.write(`\n── ${suite.name}: ${code === 0 ? 'ok' : `FAILED (exit ${code})`} in ${seconds(ms)}\n${live ? '' : splitTail(output, tail)}`);
    return { name: suite.name, code };
  }),
]);
const failed = results.filter((r) => r.code !== 0).map((r) => r.name);
// What a run printed after its summary: the failing tests with their errors (the spec
// reporter's closing list), a process that outlived its tests and what it holds.
for (const [i, tail] of tails.entries()) {
  const details = tail.filter((line) => !isSummary(line)).join('');
  if (details.trim() !== '') process.stdout.write(suites.length > 1 ? `\n── ${suites[i]!.name}:${details}` : details);
}
if (failed.length > 0) {
  process.stdout.write(`\nnpm test failed: ${failed.join(', ')}\n`);
  process.exitCode = 1;
}

// Every file's time (each run's reporter left them in timesDir), the slowest listed, then the
// summaries added up (durations: the longest), last of all, where CI and a reader look for them.
const times: Record<string, number> = {};
for (const i of suites.keys()) {
  try {
    Object.assign(times, JSON.parse(readFileSync(join(timesDir, `${i}.json`), 'utf8')) as Record<string, number>);
  } catch {} // a run that ended before its reporter did: its failure is said above
}
rmSync(timesDir, { recursive: true, force: true });
// TEST_SLOWEST_FILES=N shows N files instead of ten (to see where a suite's time goes).
const shown = Number(process.env.TEST_SLOWEST_FILES ?? 10) || 10;
const slowest = Object.entries(times)
  .sort((a, b) => b[1] - a[1])
  .slice(0, shown);
const total = Object.values(times).reduce((a, b) => a + b, 0);
if (slowest.length > 0) {
  process.stdout.write(`\nThe slowest ${slowest.length} of ${Object.keys(times).length} test files (${seconds(total)} of file time in all):\n`);
  for (const [file, ms] of slowest) process.stdout.write(`${seconds(ms).padStart(10)}  ${file}\n`);
}
if (process.env.TEST_RECORD_DURATIONS === '1' && files.length === 0) {
  const record = Object.fromEntries(
    Object.entries(times)
      .filter(([file]) => !IN_PROCESS.test(file))
      .sort((a, b) => a[0].localeCompare(b[0]))
      .map(([file, ms]) => [file, Math.round(ms / 100) / 10]),
  );
  writeFileSync(DURATIONS, `${JSON.stringify(record, null, 2)}\n`);
  process.stdout.write(`Each file's time written to ${DURATIONS}: the spawning files' batches are made by it.\n`);
}
const totals = new Map<string, number>();
for (const tail of tails) {
  for (const line of tail.filter(isSummary)) {
    const [, key, value] = /^ℹ (\w+) ([\d.]+)/.exec(line) ?? [];
    if (key === undefined) continue;
    totals.set(key, (totals.get(key) ?? 0) + Number(value));
  }
}
// The suite's duration is its own, from start to end, not a sum or the longest of its processes.
if (totals.has('duration_ms')) totals.set('duration_ms', Math.round(performance.now() - suiteStarted));
for (const [key, value] of totals) process.stdout.write(`ℹ ${key} ${value}\n`);
