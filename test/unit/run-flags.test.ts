// infermeter's node flags are written in six places that no code shares: the shebangs of
// bin/infermeter.js and src/cli.ts, `npm start`, the image's entrypoint, the benchmark's
// targets and the commands of docs/deploy.md. They must be one set, and one this Node accepts (a misspelt V8 flag stops
// node at start).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { INFERMETER_FLAGS } from '../../bench/targets.ts';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

describe('node flags', () => {
  it('are the same in the shebang, npm start, the image, the bench and the deployment guide', () => {
    for (const file of ['src/cli.ts', 'bin/infermeter.js']) {
      const shebang = /^#!\/usr\/bin\/env -S node (.*) *$/.exec(read(file).split('\n')[0]!)?.[1];
      assert.equal(shebang, INFERMETER_FLAGS, file);
    }

    const start = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.start;
    // exec: npm's shell is replaced by node, so the SIGTERM npm forwards reaches node (see the drain test).
    assert.equal(start, `exec node ${INFERMETER_FLAGS} bin/infermeter.js`);

    const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(read('Dockerfile'))?.[1];
    assert.ok(entrypoint !== undefined, 'the Dockerfile has an exec-form ENTRYPOINT');
    assert.deepEqual(JSON.parse(entrypoint), ['node', ...INFERMETER_FLAGS.split(' '), 'dist/cli.js']);

    // Every node command line of the guide that starts infermeter.
    const commands = read('docs/deploy.md')
      .split('\n')
      .filter((line) => /\bnode (--[\w-]+=?\S* )*\S*(src\/cli\.ts|dist\/cli\.js)/.test(line));
    assert.ok(commands.length >= 2, 'the guide shows how to start infermeter');
    for (const line of commands) assert.match(line, new RegExp(`node ${INFERMETER_FLAGS} \\S*(src/cli\\.ts|dist/cli\\.js)`), line);
  });

  it('are accepted by this node', () => {
    const r = spawnSync(process.execPath, [
      ...INFERMETER_FLAGS.split(' '),
      '-e',
      'process.stdout.write(String(require("node:v8").getHeapStatistics().heap_size_limit > 0))',
    ]);
    assert.equal(r.status, 0, r.stderr.toString());
    assert.equal(r.stdout.toString(), 'true');
  });
});
