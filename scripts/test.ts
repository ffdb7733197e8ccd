// `npm test`: the static checks (types, format, lint, unused exports) run beside the test suite,
// not before it, so the suite's wall time is not theirs plus its own. The suite is two runs of
// `node --test` side by side: the in-process tests (test/unit, test/streams) in one process
// (`--test-isolation=none`: a process per file cost more CPU than their tests), and the tests
// that spawn and wait on processes (every other folder) four files at a time, a process each.
// The second's output is streamed as it comes (the spec reporter, then the slowest files); the
// first's, like each check's, is printed whole, between two lines of the second's, when it ends.
// The two summaries (`ℹ tests N` ...) are added up and printed last. The exit code is non-zero
// when any of them failed. Arguments are passed to one `node --test` in place of the default
// (e.g. `node scripts/test.ts test/unit/*.test.ts`).
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { globSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const bin = (name: string) => join(root, 'node_modules', '.bin', name);
// Four files at a time: measured best on two cores, most files waiting on processes (docs/testing.md#time).
const CONCURRENCY = process.env.TEST_CONCURRENCY ?? '4';
const files = process.argv.slice(2);
// Node's compile cache (the sources with their types stripped, compiled) for the test files'
// processes and the infermeters they spawn (test/helpers/child-process.ts passes it on): each
// process of the suite loads much the same modules. Checked against the sources, so never stale.
const COMPILE_CACHE = process.env.NODE_COMPILE_CACHE ?? join(tmpdir(), 'infermeter-test-compile-cache');

const checks: Array<{ name: string; command: string; args: string[] }> = [
  { name: 'tsc --noEmit', command: bin('tsc'), args: ['--noEmit'] },
  { name: 'biome format', command: bin('biome'), args: ['format'] },
  { name: 'biome lint', command: bin('biome'), args: ['lint', '--error-on-warnings'] },
  { name: 'knip', command: bin('knip'), args: [] },
];
const testArgs = (files: string[], ...options: string[]) => [
  '--test',
  ...options,
  // A test that hangs fails after 5 minutes, naming itself, instead of holding CI to its limit.
  '--test-timeout=300000',
  '--test-reporter=spec',
  '--test-reporter-destination=stdout',
  '--test-reporter=./scripts/slowest-files-reporter.ts',
  '--test-reporter-destination=stdout',
  ...files,
];
/** Folders whose tests run in the runner's own process: no process spawned, nothing global left behind. */
const IN_PROCESS = /^test\/(unit|streams)\//;
const all = globSync('test/**/*.test.ts', { cwd: root }).sort();
const suites =
  files.length > 0
    ? [{ name: 'node --test', args: testArgs(files, `--test-concurrency=${CONCURRENCY}`), live: true }]
    : [
        {
          name: 'node --test (spawning)',
          args: testArgs(
            all.filter((f) => !IN_PROCESS.test(f)),
            `--test-concurrency=${CONCURRENCY}`,
          ),
          live: true,
        },
        {
          name: 'node --test (in process)',
          args: testArgs(
            all.filter((f) => IN_PROCESS.test(f)),
            '--test-isolation=none',
          ),
          live: false,
        },
      ];

function run(command: string, args: string[], onLines?: (text: string) => void): Promise<{ code: number; output: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NODE_COMPILE_CACHE: COMPILE_CACHE, FORCE_COLOR: process.env.FORCE_COLOR ?? '0' },
    });
    let output = '';
    let partial = '';
    const take = (chunk: Buffer) => {
      if (!onLines) {
        output += chunk.toString();
        return;
      }
      // Whole lines only, so that a check's output never lands inside a line of the suite's.
      partial += chunk.toString();
      const end = partial.lastIndexOf('\n');
      if (end < 0) return;
      onLines(partial.slice(0, end + 1));
      partial = partial.slice(end + 1);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', (err) => {
      output += `${err.message}\n`;
    });
    child.on('close', (code, signal) => {
      if (partial) onLines?.(`${partial}\n`);
      resolve({ code: code ?? (signal ? 1 : 0), output, ms: performance.now() - started });
    });
  });
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
// Each suite's lines from its closing summary (`ℹ tests N`) on are held back: the slowest files
// are printed after every check's output, then the summaries added up, last.
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
const results = await Promise.all([
  ...checks.map(async (check) => {
    const { code, output, ms } = await run(check.command, check.args);
    process.stdout.write(`\n── ${check.name}: ${code === 0 ? 'ok' : `FAILED (exit ${code})`} in ${seconds(ms)}\n${code === 0 ? '' : output}`);
    return { name: check.name, code };
  }),
  ...suites.map(async (suite, i) => {
    const tail = tails[i]!;
    const live = suite.live ? (text: string) => process.stdout.write(splitTail(text, tail)) : undefined;
    const { code, output, ms } = await run(process.execPath, suite.args, live);
    if (!suite.live) process.stdout.write(`\n── ${suite.name}: ${code === 0 ? 'ok' : `FAILED (exit ${code})`} in ${seconds(ms)}\n${splitTail(output, tail)}`);
    return { name: suite.name, code };
  }),
]);
const failed = results.filter((r) => r.code !== 0).map((r) => r.name);
if (failed.length > 0) {
  process.stdout.write(`\nnpm test failed: ${failed.join(', ')}\n`);
  process.exitCode = 1;
}
// The slowest files of each suite, then the summaries added up (durations: the longest), last of
// all, where CI and a reader look for them.
const totals = new Map<string, number>();
for (const [i, tail] of tails.entries()) {
  const slowest = tail.filter((line) => !isSummary(line)).join('');
  if (slowest.trim() !== '') process.stdout.write(suites.length > 1 ? `\n${suites[i]!.name}:${slowest}` : slowest);
  for (const line of tail.filter(isSummary)) {
    const [, key, value] = /^ℹ (\w+) ([\d.]+)/.exec(line) ?? [];
    if (key === undefined) continue;
    totals.set(key, key === 'duration_ms' ? Math.max(totals.get(key) ?? 0, Number(value)) : (totals.get(key) ?? 0) + Number(value));
  }
}
for (const [key, value] of totals) process.stdout.write(`ℹ ${key} ${value}\n`);
