// The house rules a reader relies on, checked on the sources: no import circle anywhere in
// src/ (type imports included: a circle of types is still two modules that know each other),
// and no function in the data plane longer than a reader can hold (about 150 lines).
import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');
const MAX_FUNCTION_LINES = 150;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The relative .ts modules a file imports or re-exports, resolved. */
function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const found: string[] = [];
  for (const match of text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'(\.{1,2}\/[^']+\.ts)'/gm)) found.push(resolve(dirname(file), match[1]!));
  return found;
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
    assert.equal(findCircle(new Map([['a', ['b']], ['b', []]])), undefined);
  });

  it('has no import circle anywhere in src/', () => {
    const files = sources(SRC);
    const graph = new Map(files.map((file) => [file, imports(file)]));
    assert.ok(graph.size > 50, `read ${graph.size} modules`);
    assert.ok([...graph.values()].some((deps) => deps.length > 0), 'imports were read');
    const circle = findCircle(graph);
    assert.equal(circle?.map((f) => relative(SRC, f)).join(' -> '), undefined);
  });

  it(`has no function in src/data-plane/ longer than ${MAX_FUNCTION_LINES} lines`, () => {
    const long: string[] = [];
    let functions = 0;
    for (const file of sources(join(SRC, 'data-plane'))) {
      const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
      const visit = (node: ts.Node): void => {
        if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
          functions++;
          const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
          const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
          if (end - start + 1 > MAX_FUNCTION_LINES) long.push(`${relative(SRC, file)}:${start + 1} (${end - start + 1} lines)`);
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    assert.ok(functions > 30, `measured ${functions} functions`);
    assert.deepEqual(long, []);
  });
});
