// The README is a page that points into docs/; what it still states is checked where it is
// stated: its quick start is what CI runs, its five variables are rows of the full table
// (docs/configuration.md, itself checked against src/config in config.test.ts), and the families
// its table names are served (the full scrape of fixtures/exposition/, which
// exposition-golden.test.ts proves byte for byte).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const README = read('README.md');

/** The body of a `## ` section of a Markdown text, up to the next one. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n## ${heading}\n`);
  assert.notEqual(start, -1, `a section "## ${heading}"`);
  const end = markdown.indexOf('\n## ', start + 1);
  return markdown.slice(start, end === -1 ? undefined : end);
}

/** The rows of the Markdown tables in a text whose first cell is a code span: the cells, unquoted. */
function rows(markdown: string): string[][] {
  return markdown
    .split('\n')
    .filter((l) => /^\| `/.test(l))
    .map((l) => l.slice(2, -2).split(' | '));
}

describe('README.md', () => {
  it('fits on a page: at most 150 lines', () => {
    const lines = README.split('\n').length - 1;
    assert.ok(lines <= 150, `README.md has ${lines} lines`);
  });

  it('has the two-command quick start, and CI runs exactly its commands', () => {
    const block = /```sh\n([\s\S]*?)```/.exec(section(README, 'Quick start'))?.[1] ?? '';
    const commands = block
      .split('\n')
      .filter(Boolean)
      .map((l) => l.replace(/\s+#.*$/, ''));
    assert.deepEqual(commands, ['npm ci && npm run demo', 'npm test']);
    const ci = read('.ci/run')
      .split('\n')
      .filter((l) => /^npm /.test(l));
    assert.deepEqual(
      ci,
      ['npm ci --no-audit --no-fund --prefer-offline', 'npm test'],
      ".ci/run installs with npm ci, then runs the README's test command, last",
    );
    assert.equal(read('.ci/run').trimEnd().split('\n').at(-1), 'npm test');
    const scripts = JSON.parse(read('package.json')).scripts as Record<string, string>;
    assert.equal(scripts.test, 'node scripts/test.ts', 'npm test runs the static checks beside the suite');
    const runner = read('scripts/test.ts');
    for (const check of [
      "bin('tsc'), args: ['--noEmit']",
      "bin('biome'), args: ['format']",
      "bin('biome'), args: ['lint', '--error-on-warnings']",
      "bin('knip')",
      "'run-group.ts'",
    ]) {
      assert.ok(runner.includes(check), `scripts/test.ts runs ${check}`);
    }
    assert.match(read('scripts/run-group.ts'), /import \{ run \} from 'node:test';[\s\S]*run\(\{ files,/, "each group is node's own runner over its files");
    assert.equal(scripts.lint, 'biome lint --error-on-warnings', 'a lint warning fails npm run lint as it fails npm test');
    assert.equal(scripts.demo, 'node bin/infermeter.js demo');
  });

  it('states its five variables as the full table does', () => {
    const full = new Map(rows(read('docs/configuration.md')).map((cells) => [cells[0], cells[1]]));
    const five = rows(section(README, 'The five variables most people set'));
    assert.equal(five.length, 5);
    for (const [name, defaultValue] of five) {
      assert.ok(full.has(name!), `${name} is a row of docs/configuration.md`);
      assert.equal(defaultValue, full.get(name!), `${name}'s default as docs/configuration.md states it`);
    }
  });

  it('names in its table of what is measured only families infermeter serves', () => {
    const served = new Set([...read('fixtures/exposition/full-scrape.prom').matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
    const table = section(README, 'What it measures')
      .split('\n')
      .filter((l) => l.startsWith('| ') && !l.startsWith('| figure') && !l.startsWith('|---'));
    assert.ok(table.length >= 10, `${table.length} rows`);
    for (const row of table) {
      const families = [
        ...row
          .split(' | ')
          .at(-1)!
          .matchAll(/`([a-z_:][a-z0-9_:]*)`/g),
      ].map((m) => m[1]);
      assert.ok(families.length > 0, row);
      for (const family of families) assert.ok(served.has(family), `${family} is served (fixtures/exposition/full-scrape.prom)`);
    }
  });
});
