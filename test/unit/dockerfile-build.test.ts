// The Dockerfile's build, read without an engine (scripts/image-test.ts builds it for real): a
// pinned Node 24 base, the install before the files that do not change it, and a build context
// of what the Dockerfile copies only, with what .gitignore lists and the metrics-token file
// docs/deploy.md has one create kept out wherever they are.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { DOCKERFILE } from '../helpers/dockerfile.ts';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const patterns = (text: string) =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));

/** Instructions of the whole file, continuation lines joined, comments dropped. */
const INSTRUCTIONS = DOCKERFILE.split('\n')
  .filter((l) => !/^\s*#/.test(l))
  .join('\n')
  .replace(/\\\n/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '');

describe('the Dockerfile build', () => {
  it('pins the base to one Node 24 release, the one the dev dependency installs, for both stages', () => {
    const base = /^ARG NODE_IMAGE=(\S+)$/m.exec(DOCKERFILE)?.[1];
    const m = /^node:(\d+)\.(\d+)\.(\d+)-[a-z]+-slim(@sha256:[0-9a-f]{64})?$/.exec(base ?? '');
    assert.ok(m, `ARG NODE_IMAGE=node:<major.minor.patch>-<debian>-slim[@sha256:...], got ${base}`);
    assert.equal(m[1], '24');
    const devNode = (JSON.parse(read('package.json')) as { devDependencies: Record<string, string> }).devDependencies.node;
    assert.equal(`^${m[1]}.${m[2]}.${m[3]}`, devNode, 'the image runs the Node the tests run on');
    const froms = INSTRUCTIONS.filter((l) => /^FROM /.test(l));
    assert.deepEqual(froms, ['FROM ${NODE_IMAGE} AS build', 'FROM ${NODE_IMAGE}']);
  });

  it('runs npm ci before copying anything the install does not read', () => {
    const ci = INSTRUCTIONS.findIndex((l) => /^RUN .*\bnpm ci\b/.test(l));
    assert.ok(ci > 0, 'an npm ci');
    const copies = INSTRUCTIONS.slice(0, ci).filter((l) => /^COPY /.test(l));
    assert.deepEqual(copies, ['COPY package.json package-lock.json ./']);
  });

  it('has a build context of exactly what the Dockerfile copies', () => {
    const ignore = patterns(read('.dockerignore'));
    assert.equal(ignore[0], '*', 'everything is left out first');
    const allowed = ignore.filter((p) => p.startsWith('!')).map((p) => p.slice(1).replace(/\/$/, ''));
    const copied = INSTRUCTIONS.filter((l) => /^COPY /.test(l) && !l.includes('--from='))
      .flatMap((l) => l.split(/\s+/).slice(1, -1))
      .map((p) => p.replace(/\/$/, '').replace(/^\.\//, ''));
    assert.deepEqual([...allowed].sort(), [...copied].sort());
  });

  it("keeps .gitignore's entries and the metrics-token file out, also inside what it lets in", () => {
    const ignore = new Set(patterns(read('.dockerignore')));
    const wanted = [...patterns(read('.gitignore')), 'metrics-token'].map((p) => `**/${p.replace(/^\/|\/$/g, '')}`);
    for (const p of wanted) assert.ok(ignore.has(p), `.dockerignore has ${p}`);
  });

  it('prunes the dev dependencies without leaving their empty scope folders behind (its commands run on a small project)', (t) => {
    // The build stage's RUN from `npm prune` on, as written: run by sh in a project with one
    // production dependency and one scoped dev dependency with a bin, installed by hand.
    const run = INSTRUCTIONS.find((l) => /^RUN .*\bnpm prune\b/.test(l));
    assert.ok(run, 'a RUN with npm prune');
    const steps = run.slice(4).split(/\s*&&\s*/);
    const commands = steps.slice(steps.findIndex((c) => /^npm prune\b/.test(c))).join(' && ');
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-prune-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const json = (path: string, value: unknown) => {
      mkdirSync(join(dir, path, '..'), { recursive: true });
      writeFileSync(join(dir, path), JSON.stringify(value));
    };
    json('package.json', { name: 'p', version: '1.0.0', dependencies: { a: '1.0.0' }, devDependencies: { '@dev/b': '1.0.0' } });
    json('package-lock.json', {
      name: 'p',
      version: '1.0.0',
      lockfileVersion: 3,
      requires: true,
      packages: {
        '': { name: 'p', version: '1.0.0', dependencies: { a: '1.0.0' }, devDependencies: { '@dev/b': '1.0.0' } },
        'node_modules/a': { version: '1.0.0' },
        'node_modules/@dev/b': { version: '1.0.0', dev: true, bin: { b: 'b.js' } },
      },
    });
    json('node_modules/a/package.json', { name: 'a', version: '1.0.0' });
    json('node_modules/@dev/b/package.json', { name: '@dev/b', version: '1.0.0', bin: { b: 'b.js' } });
    writeFileSync(join(dir, 'node_modules/@dev/b/b.js'), '');
    mkdirSync(join(dir, 'node_modules/.bin'));
    symlinkSync('../@dev/b/b.js', join(dir, 'node_modules/.bin/b'));
    const result = spawnSync('sh', ['-c', commands], {
      cwd: dir,
      encoding: 'utf8',
      env: { ...process.env, npm_config_offline: 'true', npm_config_update_notifier: 'false' },
    });
    assert.equal(result.status, 0, `${commands}:\n${result.stdout}${result.stderr}`);
    const left: string[] = [];
    const walk = (rel: string): void => {
      const entries = readdirSync(join(dir, rel));
      if (entries.length === 0) left.push(`${rel}/ (empty)`);
      for (const e of entries) {
        const path = `${rel}/${e}`;
        if (statSync(join(dir, path), { throwIfNoEntry: false })?.isDirectory()) walk(path);
        else left.push(path);
      }
    };
    walk('node_modules');
    assert.deepEqual(
      left.sort(),
      ['node_modules/.package-lock.json', 'node_modules/a/package.json'],
      'the production dependency, nothing of the dev one, no empty folder',
    );
  });
});
