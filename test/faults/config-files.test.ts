// The configuration files read while the proxy runs (INFERMETER_SLO_FILE, INFERMETER_TENANT_ALIASES)
// and at start (INFERMETER_CONFIG, MindIE's config.json), read on the event loop: a file over its
// cap is refused by the size the open descriptor reports, before a byte of it is read, and a FIFO
// (or anything else not a regular file) is refused without waiting for a writer.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { readSloFile } from '../../src/goodput/slo-config.ts';
import { createSloPolicy } from '../../src/goodput/slo-policy.ts';
import { silentLogger } from '../../src/log.ts';

const FILES = [
  { variable: 'INFERMETER_SLO_FILE', env: {} },
  { variable: 'INFERMETER_TENANT_ALIASES', env: { INFERMETER_TENANT: 'header:x-tenant' } },
  { variable: 'INFERMETER_CONFIG', env: {} },
] as const;

const problemsOf = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env);
    return [];
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return error.problems.map((p) => `${p.variable}: ${p.expected}`);
  }
};

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'infermeter-files-'));
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
  return dir;
}

describe('configuration files', () => {
  it('a file over its cap is refused by its size before any of it is read (a sparse 600 MB file)', (t) => {
    const big = join(tempDir(t), 'big.json');
    writeFileSync(big, '');
    truncateSync(big, 600 * 1024 * 1024); // sparse: nothing on disk, 600 MB to a reader
    const before = process.memoryUsage().arrayBuffers;
    for (const { variable, env } of FILES) {
      const problems = problemsOf({ ...env, [variable]: big });
      assert.equal(problems.length, 1, problems.join('; '));
      // The size in the refusal is the one fstat gave: no read counted it.
      assert.match(problems[0]!, new RegExp(`^${variable}: .*a file of at most \\d+ MiB \\(this one has 629145600 bytes\\)`));
    }
    // Nothing of it was held (reading it whole would have taken 600 MB at least once).
    assert.ok(process.memoryUsage().arrayBuffers - before < 64 * 1024 * 1024);
  });

  it('a FIFO is refused without waiting for a writer, at start and on reload', (t) => {
    if (spawnSync('mkfifo', ['--version']).error !== undefined) return t.skip('no mkfifo on this platform');
    const dir = tempDir(t);
    const fifo = join(dir, 'slo.json');
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
    // A writer with a valid file's text: whatever waits on the FIFO gets it, so reading it (the
    // old way) would accept it rather than hang. Killed in teardown if it is still waiting.
    const writer = spawn('sh', ['-c', `printf '%s' '{"classes": []}' > "$1"`, 'sh', fifo], { stdio: 'ignore' });
    t.after(() => writer.kill('SIGKILL'));
    for (const { variable, env } of FILES) {
      assert.deepEqual(problemsOf({ ...env, [variable]: fifo }), [
        `${variable}: ${variable === 'INFERMETER_CONFIG' ? 'a MindIE config.json file' : 'a JSON file'}: a regular file (this is a FIFO)`,
      ]);
    }
    // With no writer at all: opened without blocking, refused.
    const lone = join(dir, 'lone.json');
    assert.equal(spawnSync('mkfifo', [lone]).status, 0);
    assert.deepEqual(readSloFile(lone), { ok: false, expected: 'a JSON file: a regular file (this is a FIFO)' });
    // A good file replaced by a FIFO: the reload keeps the classes in use.
    const file = join(dir, 'good.json');
    writeFileSync(file, '{"classes": [{"name": "chat", "slo": "ttft:500"}]}');
    const slo = loadConfig({ INFERMETER_SLO_FILE: file }).slo;
    const policy = createSloPolicy({ config: slo, log: silentLogger, watchIntervalMs: 0 });
    t.after(() => policy.close());
    rmSync(file);
    assert.equal(spawnSync('mkfifo', [file]).status, 0);
    assert.equal(policy.reload(), false);
    assert.deepEqual(
      policy.classes().map((c) => c.name),
      ['chat'],
    );
  });

  it('a directory is refused as not a regular file, and a missing file as before', (t) => {
    const dir = tempDir(t);
    assert.match(problemsOf({ INFERMETER_SLO_FILE: dir }).join(), /INFERMETER_SLO_FILE: a JSON file: a regular file \(this is a directory\)/);
    assert.match(problemsOf({ INFERMETER_SLO_FILE: join(dir, 'none.json') }).join(), /INFERMETER_SLO_FILE: a readable JSON file \(ENOENT\)/);
  });
});
