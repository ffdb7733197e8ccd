// `npm test`: the static checks (types, format, lint, unused exports) run beside the test suite,
// not before it, so the suite's wall time is not theirs plus its own. The suite's output is
// streamed as it comes (the spec reporter, then its closing `ℹ tests N` ... summary, then the
// slowest files); each check's output is printed whole, between two lines of the suite's, when
// it ends. The exit code is non-zero when any of them failed. Arguments are passed to
// `node --test` in place of the default glob (e.g. `node scripts/test.ts test/unit/*.test.ts`).
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
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
const suite = {
  name: 'node --test',
  command: process.execPath,
  args: [
    '--test',
    `--test-concurrency=${CONCURRENCY}`,
    // A test that hangs fails after 5 minutes, naming itself, instead of holding CI to its limit.
    '--test-timeout=300000',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    '--test-reporter=./scripts/slowest-files-reporter.ts',
    '--test-reporter-destination=stdout',
    ...(files.length > 0 ? files : ['test/**/*.test.ts']),
  ],
};

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
// The suite's lines from its closing summary (`ℹ tests N`) on are held back and printed after
// every check's output, the summary's own lines last.
const tail: string[] = [];
const isSummary = (line: string): boolean => line.startsWith('ℹ ');
function suiteLines(text: string): void {
  const lines = text.split(/(?<=\n)/);
  for (const line of lines) {
    if (tail.length > 0 || line.startsWith('ℹ tests ')) tail.push(line);
    else process.stdout.write(line);
  }
}
const results = await Promise.all([
  ...checks.map(async (check) => {
    const { code, output, ms } = await run(check.command, check.args);
    process.stdout.write(`\n── ${check.name}: ${code === 0 ? 'ok' : `FAILED (exit ${code})`} in ${seconds(ms)}\n${code === 0 ? '' : output}`);
    return { name: check.name, code };
  }),
  run(suite.command, suite.args, suiteLines).then(({ code }) => ({ name: suite.name, code })),
]);
const failed = results.filter((r) => r.code !== 0).map((r) => r.name);
if (failed.length > 0) {
  process.stdout.write(`\nnpm test failed: ${failed.join(', ')}\n`);
  process.exitCode = 1;
}
// The runner's closing summary last of all, where CI and a reader look for it.
process.stdout.write(`${tail.filter((line) => !isSummary(line)).join('')}${tail.filter(isSummary).join('')}`);
