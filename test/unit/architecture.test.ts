// The house rules a reader relies on, checked on the sources: no import circle anywhere in
// src/ (type imports included: a circle of types is still two modules that know each other),
// imports between src/ folders one way only (each folder, a sub-folder included, one node; a
// module at src/'s top its own node),
// no function in the data plane longer than a reader can hold (about 150 lines), no source file
// over 400 lines, each over 300 saying why in its opening comment, process.exit only in the
// entry points (src/cli.ts says which), and nothing of src/ or scripts/ importing from test/.
import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseSync, Visitor } from 'oxc-parser';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');
const MAX_FUNCTION_LINES = 150;
const MAX_FILE_LINES = 400;
/** Past this a file says why in its opening comment, on a line `// Over 300 lines...: <why>`. */
const EXPLAIN_FILE_LINES = 300;
/** The modules that may call process.exit: the entry points src/cli.ts names. */
const EXIT_CALLERS = ['cli.ts', 'cluster/worker-main.ts', 'demo.ts', 'healthcheck.ts'];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Every source file of src/ a reader opens: the TypeScript modules and the dashboard's script. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|js)$/.test(entry.name) ? [path] : [];
  });
}

/** The file's opening comment: its leading `//` lines (after a #! line), as text. */
export function openingComment(text: string): string {
  const lines = text.split('\n');
  let i = lines[0]?.startsWith('#!') ? 1 : 0;
  const comment: string[] = [];
  while (i < lines.length && lines[i]!.startsWith('//')) comment.push(lines[i++]!);
  return comment.join('\n');
}

/** The reason an opening comment gives for a long file, or undefined when it gives none. */
export function lengthReason(text: string): string | undefined {
  const m = /^\/\/ Over 300 lines[^:\n]*: (.+)$/m.exec(openingComment(text));
  return m !== null && m[1]!.trim().length >= 20 ? m[1]!.trim() : undefined;
}

/** The relative .ts modules a file imports or re-exports, resolved. */
function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const found: string[] = [];
  for (const match of text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'(\.{1,2}\/[^']+\.ts)'/gm)) found.push(resolve(dirname(file), match[1]!));
  return found;
}

/** The node of the folder graph a module of src/ belongs to: its folder, or itself at the top. */
export function folderOf(path: string): string {
  const slash = path.lastIndexOf('/');
  return slash === -1 ? path : path.slice(0, slash);
}

/** The folder graph: an edge from each folder to every other folder one of its modules imports. */
export function folderGraph(modules: ReadonlyMap<string, readonly string[]>): Map<string, string[]> {
  const graph = new Map<string, Set<string>>();
  for (const [file, deps] of modules) {
    const from = folderOf(file);
    const edges = graph.get(from) ?? new Set<string>();
    graph.set(from, edges);
    for (const dep of deps) if (folderOf(dep) !== from) edges.add(folderOf(dep));
  }
  return new Map([...graph].map(([folder, edges]) => [folder, [...edges].sort()]));
}

/** One circle of the import graph, as a list of files, or undefined when there is none. */
export function findCircle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (node: string): string[] | undefined => {
    state.set(node, 'open');
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === 'open') return [...path.slice(path.indexOf(next)), next];
      if (state.get(next) === undefined) {
        const circle = visit(next);
        if (circle !== undefined) return circle;
      }
    }
    path.pop();
    state.set(node, 'done');
    return undefined;
  };
  for (const node of graph.keys()) {
    if (state.get(node) !== undefined) continue;
    const circle = visit(node);
    if (circle !== undefined) return circle;
  }
  return undefined;
}

describe('architecture', () => {
  it('finds a circle where there is one (the check itself)', () => {
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['a']],
    ]);
    assert.deepEqual(findCircle(graph), ['a', 'b', 'c', 'a']);
    assert.equal(
      findCircle(
        new Map([
          ['a', ['b']],
          ['b', []],
        ]),
      ),
      undefined,
    );
  });

  it('has no import circle anywhere in src/', () => {
    const files = sources(SRC);
    const graph = new Map(files.map((file) => [file, imports(file)]));
    assert.ok(graph.size > 50, `read ${graph.size} modules`);
    assert.ok(
      [...graph.values()].some((deps) => deps.length > 0),
      'imports were read',
    );
    const circle = findCircle(graph);
    assert.equal(circle?.map((f) => relative(SRC, f)).join(' -> '), undefined);
  });

  it('reads the folder graph: sub-folders their own nodes, top modules their own (the check itself)', () => {
    const graph = folderGraph(
      new Map([
        ['app.ts', ['metrics/metrics.ts', 'log.ts']],
        ['log.ts', []],
        ['metrics/metrics.ts', ['metrics/own/a.ts', 'metrics/state.ts']],
        ['metrics/state.ts', []],
        ['metrics/own/a.ts', ['metrics/state.ts', 'metrics/own/b.ts']],
        ['metrics/own/b.ts', []],
      ]),
    );
    assert.deepEqual(Object.fromEntries(graph), { 'app.ts': ['log.ts', 'metrics'], 'log.ts': [], metrics: ['metrics/own'], 'metrics/own': ['metrics'] });
    assert.deepEqual(findCircle(graph), ['metrics', 'metrics/own', 'metrics']);
  });

  it('imports between src/ folders run one way (no circle of folders)', () => {
    const modules = new Map(sources(SRC).map((file) => [relative(SRC, file), imports(file).map((dep) => relative(SRC, dep))]));
    const graph = folderGraph(modules);
    assert.ok(graph.size > 20, `read ${graph.size} folders`);
    for (const folder of ['config', 'config/parse', 'metrics', 'metrics/exposition', 'goodput', 'tenants']) assert.ok(graph.has(folder), `${folder} read`);
    const circle = findCircle(graph);
    const ties = (circle ?? []).slice(1).map((to, i) => {
      const from = circle![i]!;
      const via = [...modules].flatMap(([file, deps]) => (folderOf(file) === from ? deps.filter((d) => folderOf(d) === to).map((d) => `${file} -> ${d}`) : []));
      return `${from} -> ${to} (${via.join(', ')})`;
    });
    assert.deepEqual(ties, [], 'a circle of folders: move the shared piece to the lower folder (docs/architecture.md, Layout)');
  });

  it(`has no function in src/data-plane/ longer than ${MAX_FUNCTION_LINES} lines`, () => {
    const long: string[] = [];
    let functions = 0;
    for (const file of sources(join(SRC, 'data-plane'))) {
      const text = readFileSync(file, 'utf8');
      const lineOf = (offset: number) => text.slice(0, offset).split('\n').length;
      const measure = (node: { start: number; end: number; body?: unknown }): void => {
        if (node.body === null || node.body === undefined) return;
        functions++;
        const lines = lineOf(node.end) - lineOf(node.start) + 1;
        if (lines > MAX_FUNCTION_LINES) long.push(`${relative(SRC, file)}:${lineOf(node.start)} (${lines} lines)`);
      };
      // Methods are FunctionExpressions, accessors too: each function-like with a body once.
      new Visitor({ FunctionDeclaration: measure, FunctionExpression: measure, ArrowFunctionExpression: measure }).visit(
        parseSync(file, text, { lang: 'ts' }).program,
      );
    }
    assert.ok(functions > 30, `measured ${functions} functions`);
    assert.deepEqual(long, []);
  });

  it('reads a length reason only from the opening comment (the check itself)', () => {
    const why = '// Over 300 lines: one state machine, read best in one place.';
    assert.equal(lengthReason(`#!/usr/bin/env node\n// What it does.\n${why}\nimport x from 'y';\n`), 'one state machine, read best in one place.');
    assert.equal(lengthReason(`// What it does.\nimport x from 'y';\n${why}\n`), undefined, 'below the imports it is no opening comment');
    assert.equal(lengthReason('// What it does.\n// Over 300 lines: long.\n'), undefined, 'a reason of a word or two is none');
    assert.equal(lengthReason('// What it does.\n'), undefined);
  });

  it(`has no source file in src/ over ${MAX_FILE_LINES} lines, each over ${EXPLAIN_FILE_LINES} saying why`, () => {
    const files = sourceFiles(SRC);
    assert.ok(files.length > 50, `read ${files.length} files`);
    const tooLong: string[] = [];
    const unexplained: string[] = [];
    const staleReason: string[] = [];
    let explained = 0;
    for (const file of files) {
      const name = relative(SRC, file);
      const text = readFileSync(file, 'utf8');
      const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
      const reason = lengthReason(text);
      if (lines > MAX_FILE_LINES) tooLong.push(`${name} (${lines} lines)`);
      if (lines > EXPLAIN_FILE_LINES && reason === undefined) unexplained.push(`${name} (${lines} lines)`);
      if (lines <= EXPLAIN_FILE_LINES && reason !== undefined) staleReason.push(`${name} (${lines} lines)`);
      if (reason !== undefined) explained++;
    }
    assert.ok(explained > 0, 'no file gives a length reason: is the marker still `// Over 300 lines: <why>`?');
    assert.deepEqual(tooLong, [], `over ${MAX_FILE_LINES} lines`);
    assert.deepEqual(unexplained, [], `over ${EXPLAIN_FILE_LINES} lines without "// Over 300 lines: <why>" in the opening comment`);
    assert.deepEqual(staleReason, [], `a length reason on a file of ${EXPLAIN_FILE_LINES} lines or fewer: remove it`);
  });

  it('has src/ and scripts/ import nothing from test/ (a tool or the product on a test helper)', () => {
    const TEST = resolve(SRC, '../test');
    const files = [...sources(SRC), ...sources(resolve(SRC, '../scripts'))];
    assert.ok(
      files.some((f) => f.includes('/scripts/')),
      'scripts/ read',
    );
    const onTests = files.filter((file) => imports(file).some((dep) => dep.startsWith(`${TEST}/`))).map((file) => relative(resolve(SRC, '..'), file));
    assert.deepEqual(onTests, []);
  });

  it('calls process.exit only in the entry points src/cli.ts names', () => {
    const callers = sources(SRC)
      .filter((file) => /\bprocess\.exit\s*\(/.test(readFileSync(file, 'utf8')))
      .map((file) => relative(SRC, file))
      .sort();
    assert.deepEqual(callers, EXIT_CALLERS);
    const cli = readFileSync(join(SRC, 'cli.ts'), 'utf8');
    for (const name of EXIT_CALLERS.filter((n) => n !== 'cli.ts')) assert.ok(openingComment(cli).includes(name), `src/cli.ts's opening comment names ${name}`);
  });
});
