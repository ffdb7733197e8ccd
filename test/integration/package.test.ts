// The npm package as a user gets it: `npm pack` (which builds dist/), unpacked beside this
// clone's node_modules, run with `node bin/infermeter.js`. It holds the launcher, the compiled
// code, the README, docs and LICENSE, and no source maps (they would point at sources it does
// not ship), no screenshot, no tests; under an older Node the launcher says what to do.
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { before, describe, it } from 'node:test';
import { VERSION } from '../../src/version.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const execFileAsync = promisify(execFile);

// The tests share the packed package and nothing else: run side by side.
describe('the npm package', { concurrency: true }, () => {
  let files: string[];
  let installed: string;
  before(() => {
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-pack-'));
    const [packed] = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }),
    ) as Array<{ filename: string; files: Array<{ path: string }> }>;
    files = packed!.files.map((f) => f.path).sort();
    execFileSync('tar', ['-xzf', join(dir, packed!.filename), '-C', dir]);
    installed = join(dir, 'package');
    symlinkSync(join(ROOT, 'node_modules'), join(installed, 'node_modules'));
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  });

  it('ships the launcher, dist/, README, docs and LICENSE; no source map, screenshot, source or test', () => {
    for (const f of [
      'LICENSE',
      'README.md',
      'package.json',
      'bin/infermeter.js',
      'dist/cli.js',
      'dist/demo.js',
      'dist/management/dashboard/dashboard.js',
      'docs/metrics.md',
    ])
      assert.ok(files.includes(f), `${f} in the package`);
    // Every page the README links to (docs/*.md), so a user of the package has the configuration table and the rest.
    for (const f of readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md'))) assert.ok(files.includes(`docs/${f}`), `docs/${f} in the package`);
    assert.deepEqual(
      files.filter((f) => f.endsWith('.map') || f.endsWith('.png') || /^(src|test|bench)\//.test(f) || f.endsWith('.ts')),
      [],
    );
  });

  it('runs as installed: --version, --help, and the demo (compiled imports resolve)', async (t) => {
    const bin = join(installed, 'bin/infermeter.js');
    // The three at once: the demo runs its second while the others load.
    const version = execFileAsync(process.execPath, [bin, '--version'], { encoding: 'utf8' });
    const help = execFileAsync(process.execPath, [bin, '--help'], { encoding: 'utf8' });
    const demo = spawn(process.execPath, [bin, 'demo', '--duration', '1'], {
      env: { PATH: process.env.PATH ?? '', INFERMETER_PORT: '0', INFERMETER_MANAGEMENT_PORT: '0', INFERMETER_METRICS_PORT: '0' },
    });
    t.after(() => {
      if (demo.exitCode === null) demo.kill('SIGKILL');
    });
    let out = '';
    demo.stdout.on('data', (c: Buffer) => (out += c.toString()));
    demo.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const [code] = await once(demo, 'exit');
    assert.equal(code, 0, out);
    assert.match(out, /proxy, for clients {6}http:\/\/127\.0\.0\.1:\d+\/v1/);
    assert.equal((await version).stdout, `${VERSION}\n`);
    assert.match((await help).stdout, /INFERMETER_UPSTREAM\n/);
  });

  it('under an older Node, the installed command says which Node it needs instead of a SyntaxError', (t) => {
    const old = ['/usr/bin/node', '/usr/local/bin/node'].find((p) => {
      if (!existsSync(p)) return false;
      const [major = 0, minor = 0] = spawnSync(p, ['-p', 'process.versions.node'], { encoding: 'utf8' }).stdout.trim().split('.').map(Number);
      return major < 22 || (major === 22 && minor < 18);
    });
    if (old === undefined) {
      t.skip('no Node older than 22.18 on this machine');
      return;
    }
    const run = spawnSync(old, [join(installed, 'bin/infermeter.js')], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', INFERMETER_UPSTREAM: 'http://127.0.0.1:8000' },
    });
    assert.equal(run.status, 1, run.stderr);
    assert.match(run.stderr, /^infermeter: needs Node\.js >= 22\.18 \(24 LTS recommended\), found \d+\.\d+\.\d+ at /);
    assert.equal(run.stderr.trimEnd().split('\n').length, 1, run.stderr);
  });
});
