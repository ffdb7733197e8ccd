// `npm run mutation-sweep`: a small, bounded one-line mutation sweep over the lines of `src/`
// a git range added or changed (default: the last two rounds). Each mutant is one plausible
// slip on one such line (a comparison off by one, a condition flipped, a `?? ` made `||`, a
// `+ 1` dropped, a literal 0/1 or true/false swapped, a call, update or return left out, max
// for min), written into the worktree's file; the test files nearest that file are run
// against it (node --test, one file at a time, with a timeout), and the file is then restored
// byte for byte, also on an error or Ctrl+C. A mutant no test kills is a test to write, or an
// equivalent mutant to name. docs/testing.md#the-mutation-sweep.
//
//   node scripts/mutation-sweep.ts [--range A..B] [--files <glob>[,<glob>...]] [--max N]
//     [--seed S] [--tests N] [--hops N] [--test <file>]... [--line <file:n>]... [--timeout S]
//     [--dry-run] [--report <file.json>]
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { dirname, join, matchesGlob, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseSync, type Node } from 'oxc-parser';

const ROOT = join(import.meta.dirname, '..');
// Node 24, whatever node started this script (the tests need its type stripping).
const NODE = join(ROOT, 'node_modules', '.bin', 'node');

const { values: options } = parseArgs({
  options: {
    range: { type: 'string', default: '13a6c62..HEAD' },
    files: { type: 'string', default: 'src/**/*.ts' },
    max: { type: 'string', default: '40' },
    seed: { type: 'string', default: '53' },
    tests: { type: 'string', default: '3' },
    hops: { type: 'string', default: '1' },
    test: { type: 'string', multiple: true, default: [] },
    line: { type: 'string', multiple: true, default: [] },
    timeout: { type: 'string', default: '120' },
    'dry-run': { type: 'boolean', default: false },
    report: { type: 'string' },
  },
});
const positive = (name: string, text: string): number => {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a whole number, got ${text}`);
  return n;
};
const MAX = positive('max', options.max);
const MAX_TESTS = positive('tests', options.tests);
const HOPS = positive('hops', options.hops);
const TIMEOUT_MS = positive('timeout', options.timeout) * 1000;
const GLOBS = options.files.split(',');

interface Mutant {
  readonly file: string;
  readonly line: number;
  readonly start: number;
  readonly end: number;
  readonly from: string;
  readonly to: string;
}
type Verdict = 'killed' | 'survived' | 'timeout' | 'invalid' | 'baseline-failed';

const git = (...args: string[]): string => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });

/** The lines of each file of `src/` the range added or changed, numbered as at its end. */
function changedLines(range: string): Map<string, Set<number>> {
  const [from, to = 'HEAD'] = range.split('..');
  const out = new Map<string, Set<number>>();
  let file: string | undefined;
  for (const line of git('diff', '-U0', '--no-color', '--no-renames', from!, to, '--', 'src').split('\n')) {
    if (line.startsWith('+++ ')) file = line === '+++ /dev/null' ? undefined : line.slice(6);
    const hunk = /^@@ -\S+ \+(\d+)(?:,(\d+))? @@/.exec(line);
    if (hunk === null || file === undefined || !file.endsWith('.ts') || !GLOBS.some((g) => matchesGlob(file!, g))) continue;
    const first = Number(hunk[1]);
    const lines = out.get(file) ?? new Set<number>();
    for (let n = first; n < first + Number(hunk[2] ?? 1); n++) lines.add(n);
    out.set(file, lines);
  }
  // The lines are the range's end's: a file the worktree has changed since would be misread.
  for (const path of out.keys()) {
    if (git('show', `${to}:${path}`) !== readFileSync(join(ROOT, path), 'utf8')) {
      process.stderr.write(`skipped ${path}: the worktree's differs from ${to}'s\n`);
      out.delete(path);
    }
  }
  return out;
}

const SWAPS: Readonly<Record<string, readonly string[]>> = {
  '<': ['<='],
  '<=': ['<'],
  '>': ['>='],
  '>=': ['>'],
  '===': ['!=='],
  '!==': ['==='],
  '&&': ['||'],
  '||': ['&&'],
  '??': ['||'],
  '+=': ['-='],
  '-=': ['+='],
};
const isStatementToDrop = (node: Node): boolean => {
  if (node.type === 'ReturnStatement') return true;
  if (node.type !== 'ExpressionStatement') return false;
  const e = node.expression;
  if (e.type === 'UnaryExpression') return e.operator !== 'void' && e.operator !== 'typeof';
  if (e.type === 'ChainExpression') return e.expression.type === 'CallExpression';
  return ['CallExpression', 'AwaitExpression', 'UpdateExpression', 'AssignmentExpression'].includes(e.type);
};
/** Types are stripped before the code runs: a mutant there changes nothing (`x as T`, `x!` are code). */
const isType = (type: string): boolean => type.startsWith('TS') && !type.endsWith('Expression');

/** A node's children, in source order, types left out. */
function children(node: object): Node[] {
  const out: Node[] = [];
  for (const value of Object.values(node)) {
    for (const child of Array.isArray(value) ? value : [value]) {
      if (child !== null && typeof child === 'object' && typeof child.type === 'string' && !isType(child.type)) out.push(child);
    }
  }
  return out.sort((a, b) => a.start - b.start);
}

/** Every mutant of the changed lines of one file. */
function mutantsOf(file: string, lines: ReadonlySet<number>): Mutant[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const { program } = parseSync(file, text, { lang: 'ts' });
  const out: Mutant[] = [];
  const lineStarts = [0];
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) lineStarts.push(i + 1);
  const lineOf = (offset: number) => lineStarts.findLastIndex((start) => start <= offset) + 1;
  const source = (node: { start: number; end: number }) => text.slice(node.start, node.end);
  const add = (start: number, end: number, to: string) => {
    const line = lineOf(start);
    if (lines.has(line)) out.push({ file, line, start, end, from: text.slice(start, end), to });
  };
  // ESTree keeps no token for an operator: it is the first match between its two operands.
  const operator = (node: { left: Node; right: Node; operator: string }) => {
    const at = text.indexOf(node.operator, node.left.end);
    return { start: at, end: at + node.operator.length };
  };
  const visit = (node: Node): void => {
    if (node.type === 'BinaryExpression' || node.type === 'LogicalExpression' || node.type === 'AssignmentExpression') {
      const op = operator(node as { left: Node; right: Node; operator: string });
      for (const to of SWAPS[node.operator] ?? []) add(op.start, op.end, to);
      if ((node.operator === '+' || node.operator === '-') && node.right.type === 'Literal' && typeof node.right.value === 'number') {
        add(node.start, node.end, source(node.left));
        add(op.start, op.end, node.operator === '+' ? '-' : '+');
      }
    } else if (node.type === 'UnaryExpression' && node.operator === '!') {
      add(node.start, node.end, source(node.argument));
    } else if (node.type === 'Literal' && (node.raw === '0' || node.raw === '1')) {
      add(node.start, node.end, node.raw === '0' ? '1' : '0');
    } else if (node.type === 'Literal' && typeof node.value === 'boolean') {
      add(node.start, node.end, node.value ? 'false' : 'true');
    } else if (
      node.type === 'MemberExpression' &&
      !node.computed &&
      node.object.type === 'Identifier' &&
      node.object.name === 'Math' &&
      node.property.type === 'Identifier' &&
      ['max', 'min'].includes(node.property.name)
    ) {
      add(node.property.start, node.property.end, node.property.name === 'max' ? 'min' : 'max');
    }
    if (isStatementToDrop(node)) add(node.start, node.end, ';');
    for (const child of children(node)) visit(child);
  };
  visit(program);
  return out;
}

/**
 * The test files nearest `file`, of those that reach it through imports (test/helpers on the way
 * cost nothing, each file of src/ a hop): a test named after the file first, then one whose name
 * shares a word with the file's or its folder's (at any distance: `chargeback.test.ts` of
 * test/integration reaches `chargeback/price-book.ts` through the whole app), then the others
 * within `HOPS` hops; at one rank, the nearer, then the one reached through a file that fewer
 * tests import (every test reaches the config).
 */
function nearestTests(graph: ReadonlyMap<string, ReadonlySet<string>>, file: string): string[] {
  const distance = new Map<string, number>([[file, 0]]);
  // Of each file reached, the fewest importers of a src/ file on its way (its specificity).
  const via = new Map<string, number>([[file, 1]]);
  const queue = [file];
  while (queue.length > 0) {
    const at = queue.shift()!;
    for (const importer of graph.get(at) ?? []) {
      const src = importer.startsWith('src/');
      const d = distance.get(at)! + (src ? 1 : 0);
      if (d > 8) continue;
      const spread = src ? Math.max(via.get(at)!, graph.get(importer)?.size ?? 0) : via.get(at)!;
      const known = distance.get(importer);
      if (known !== undefined && (known < d || (known === d && via.get(importer)! <= spread))) continue;
      distance.set(importer, d);
      via.set(importer, spread);
      queue.push(importer);
    }
  }
  const base = file.split('/').at(-1)!.replace(/\.ts$/, '');
  const words = new Set([...base.split('-'), file.split('/').at(-2)!].filter((w) => w.length > 3));
  const kin = (f: string) => {
    const name = f
      .split('/')
      .at(-1)!
      .replace(/\.test\.ts$/, '');
    return name === base ? 0 : name.split('-').some((w) => words.has(w)) ? 1 : 2;
  };
  const folder = (f: string) => ['test/unit/', 'test/streams/', 'test/faults/', 'test/integration/'].findIndex((p) => f.startsWith(p));
  return [...distance.keys()]
    .filter((f) => f.endsWith('.test.ts') && (kin(f) < 2 || distance.get(f)! <= HOPS))
    .sort((a, b) => kin(a) - kin(b) || distance.get(a)! - distance.get(b)! || via.get(a)! - via.get(b)! || folder(a) - folder(b) || a.localeCompare(b))
    .slice(0, MAX_TESTS);
}

/** Who imports whom, among the TypeScript files of src/ and test/: imported path -> importers. */
function importers(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  const walk = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(`${dir}/${e.name}`) : e.name.endsWith('.ts') ? [`${dir}/${e.name}`] : [],
    );
  for (const from of [...walk('src'), ...walk('test')]) {
    for (const m of readFileSync(join(ROOT, from), 'utf8').matchAll(/(?:from|import\()\s*'(\.{1,2}\/[^']+\.ts)'/g)) {
      const to = relative(ROOT, resolve(ROOT, dirname(from), m[1]!));
      const set = graph.get(to) ?? new Set<string>();
      set.add(from);
      graph.set(to, set);
    }
  }
  return graph;
}

/** A deterministic sample of `n` (mulberry32, seeded). */
function sample<T>(items: readonly T[], n: number, seed: number): T[] {
  let a = seed >>> 0;
  const random = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy.slice(0, n);
}

// The file under mutation and its bytes, restored on every way out.
let applied: { path: string; original: Buffer } | undefined;
let running: ChildProcess | undefined;
function restore(): void {
  if (applied === undefined) return;
  writeFileSync(applied.path, applied.original);
  applied = undefined;
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    if (running?.pid !== undefined) process.kill(-running.pid, 'SIGKILL');
    restore();
    process.stderr.write(`\n${signal}: file restored, sweep stopped\n`);
    process.exit(130);
  });
}

/** Runs test files on the tree as it is: 'pass', 'fail' or 'timeout'. */
function runTests(files: readonly string[]): Promise<'pass' | 'fail' | 'timeout'> {
  return new Promise((done) => {
    const child = spawn(NODE, ['--test', '--test-concurrency=1', `--test-timeout=${TIMEOUT_MS}`, '--test-reporter=dot', ...files], {
      cwd: ROOT,
      stdio: 'ignore',
      // Its own process group, so that a timeout ends the infermeters and peers it started too.
      detached: true,
    });
    running = child;
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, TIMEOUT_MS);
    let timedOut = false;
    child.on('close', (code) => {
      clearTimeout(timer);
      running = undefined;
      done(timedOut ? 'timeout' : code === 0 ? 'pass' : 'fail');
    });
  });
}

const graph = importers();
// --line file:n (repeatable): only the mutants of those lines (to run a survivor again).
const only = (m: Mutant): boolean => options.line.length === 0 || options.line.includes(`${m.file}:${m.line}`);
const all = [...changedLines(options.range)].flatMap(([file, lines]) => mutantsOf(file, lines)).filter(only);
const chosen = sample(all, MAX, Number(options.seed)).sort((a, b) => a.file.localeCompare(b.file) || a.start - b.start);
process.stdout.write(`${all.length} mutants of ${options.range} (${options.files}); running ${chosen.length}, seed ${options.seed}\n`);

const baselines = new Map<string, 'pass' | 'fail' | 'timeout'>();
const results: Array<Mutant & { verdict: Verdict; tests: string[]; seconds: number }> = [];
for (const [i, m] of chosen.entries()) {
  const tests = options.test.length > 0 ? options.test : nearestTests(graph, m.file);
  const label = `${m.file}:${m.line}  ${JSON.stringify(m.from.length > 60 ? `${m.from.slice(0, 57)}...` : m.from)} -> ${JSON.stringify(m.to)}`;
  const path = join(ROOT, m.file);
  const original = readFileSync(path);
  const text = original.toString('utf8');
  const mutated = text.slice(0, m.start) + m.to + text.slice(m.end);
  let verdict: Verdict;
  const started = performance.now();
  try {
    stripTypeScriptTypes(mutated);
  } catch {
    results.push({ ...m, verdict: 'invalid', tests, seconds: 0 });
    process.stdout.write(`[${i + 1}/${chosen.length}] invalid   ${label}\n`);
    continue;
  }
  if (options['dry-run']) {
    process.stdout.write(`[${i + 1}/${chosen.length}] ${label}\n    tests: ${tests.join(' ') || '(none)'}\n`);
    continue;
  }
  if (tests.length === 0) verdict = 'survived';
  else {
    const key = tests.join(' ');
    if (!baselines.has(key)) baselines.set(key, await runTests(tests));
    if (baselines.get(key) !== 'pass') verdict = 'baseline-failed';
    else {
      try {
        applied = { path, original };
        writeFileSync(path, mutated);
        const outcome = await runTests(tests);
        verdict = outcome === 'pass' ? 'survived' : outcome === 'fail' ? 'killed' : 'timeout';
      } finally {
        restore();
      }
      if (!readFileSync(path).equals(original)) throw new Error(`${m.file} was not restored`);
    }
  }
  const seconds = (performance.now() - started) / 1000;
  results.push({ ...m, verdict, tests, seconds });
  process.stdout.write(`[${i + 1}/${chosen.length}] ${verdict.padEnd(9)} ${label}  (${tests.length} files, ${seconds.toFixed(1)} s)\n`);
}

if (!options['dry-run']) {
  const count = (v: Verdict) => results.filter((r) => r.verdict === v).length;
  process.stdout.write(
    `\n${count('killed')} killed, ${count('survived')} survived, ${count('timeout')} timed out, ${count('invalid')} invalid, ${count('baseline-failed')} with failing tests unmutated\n`,
  );
  for (const r of results.filter((r) => r.verdict === 'survived')) {
    process.stdout.write(
      `survived: ${r.file}:${r.line}  ${JSON.stringify(r.from)} -> ${JSON.stringify(r.to)}  [${r.tests.join(' ') || 'no test imports it'}]\n`,
    );
  }
}
if (options.report !== undefined) writeFileSync(options.report, `${JSON.stringify(results, null, 2)}\n`);
