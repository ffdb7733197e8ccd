// npm test's own runner (scripts/test.ts, scripts/run-group.ts) on files of its own: what a
// failing test or a file that leaves a handle open makes it print and exit with. Its batches
// print a run's output whole, and its closing list (the failing tests with their errors) after
// every batch: a runner that dropped it would say a test failed and not why.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { collect, spawnNode } from '../helpers/child-process.ts';

const RUNNER = join(import.meta.dirname, '..', '..', 'scripts', 'test.ts');

/** The runner over `sources` (file name to text), the static checks left out; its exit code and output. */
async function runner(t: TestContext, sources: Record<string, string>, env: Record<string, string> = {}): Promise<{ code: number | null; output: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'infermeter-runner-'));
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
  const files = Object.entries(sources).map(([name, text]) => {
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  });
  const child = spawnNode(t, [RUNNER, ...files], { TEST_CHECKS: '0', ...env });
  const [output, code] = await Promise.all([collect(child.stdout), new Promise<number | null>((resolve) => child.once('exit', resolve))]);
  return { code, output };
}

describe("npm test's runner", { concurrency: true }, () => {
  it('says which test failed and why, after the summaries of every run, and exits non-zero', async (t) => {
    const { code, output } = await runner(t, {
      'passes.test.ts': "import { it } from 'node:test';\nit('passes', () => {});\n",
      'fails.test.ts':
        "import assert from 'node:assert/strict';\nimport { it } from 'node:test';\nit('fails on purpose', () => assert.equal(1 + 1, 3, 'the sum the fixture expects'));\n",
    });
    assert.equal(code, 1, output);
    assert.match(output, /✖ fails on purpose/);
    assert.match(output, /the sum the fixture expects/, 'the assertion message is printed');
    assert.match(output, /^ℹ tests 2$/m);
    assert.match(output, /^ℹ fail 1$/m);
  });

  it('passes files whose tests pass, their counts added up', async (t) => {
    const { code, output } = await runner(t, {
      'a.test.ts': "import { it } from 'node:test';\nit('one', () => {});\nit('two', () => {});\n",
      'b.test.ts': "import { it } from 'node:test';\nit('three', () => {});\n",
    });
    assert.equal(code, 0, output);
    assert.match(output, /^ℹ pass 3$/m);
    assert.match(output, /^ℹ fail 0$/m);
  });

  it('fails a run whose process outlives its tests, naming what it holds', async (t) => {
    const { code, output } = await runner(
      t,
      { 'leaves-a-timer.test.ts': "import { it } from 'node:test';\nit('starts a timer it never clears', () => { setInterval(() => {}, 1000); });\n" },
      { TEST_LINGER_MS: '300' },
    );
    assert.equal(code, 1, output);
    assert.match(output, /still holds: .*Timeout/);
  });
});
