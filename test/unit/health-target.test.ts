// The image's HEALTHCHECK in a container started as `IMAGE sim`: the container's command read
// from procfs (fixture trees of /proc), and the simulator's /health asked where its flags put it.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { healthTarget } from '../../src/management/health-target.ts';
import { probeHealth } from '../../src/management/health-probe.ts';
import { mainCommandArgs } from '../../src/management/main-command.ts';
import { startSimServer } from '../../src/sim/model-server.ts';

const ENTRY = ['node', '--max-semi-space-size=32', '--initial-heap-size=64', 'dist/cli.js'];

/** A /proc with the given command lines (NUL-terminated arguments, as the kernel writes them). */
function proc(t: TestContext, commands: Record<number, readonly string[]>): string {
  const root = mkdtempSync(join(tmpdir(), 'infermeter-proc-'));
  t.after(() => rmSync(root, { recursive: true, force: true, maxRetries: 5 }));
  for (const [pid, args] of Object.entries(commands)) {
    mkdirSync(join(root, pid));
    writeFileSync(join(root, pid, 'cmdline'), args.map((a) => `${a}\0`).join(''));
  }
  mkdirSync(join(root, 'net')); // not a process
  return root;
}

describe("the container's command", () => {
  it("is PID 1's arguments after the entry point", (t) => {
    assert.deepEqual(mainCommandArgs(proc(t, { 1: [...ENTRY, 'sim', '--port', '9000'] }), 999), ['sim', '--port', '9000']);
    assert.deepEqual(mainCommandArgs(proc(t, { 1: ENTRY }), 999), []);
  });

  it('under a container init (docker run --init), the lowest PID running the entry point, the probe itself left out', (t) => {
    const root = proc(t, { 1: ['/sbin/docker-init', '--', ...ENTRY, 'sim'], 7: [...ENTRY, 'sim', '--host', '0.0.0.0'], 30: ['node', 'dist/healthcheck.js'] });
    // docker-init's own arguments name the entry point too: they are what it runs.
    assert.deepEqual(mainCommandArgs(root, 30), ['sim']);
    const tini = proc(t, { 1: ['/usr/bin/tini'], 7: [...ENTRY, 'sim', '--port', '8001'], 9: [...ENTRY] });
    assert.deepEqual(mainCommandArgs(tini, 30), ['sim', '--port', '8001']);
  });

  it("is nothing on a host: PID 1 is the system's init and other infermeters are not this one", (t) => {
    assert.equal(mainCommandArgs(proc(t, { 1: ['/sbin/init', 'splash'], 7: [...ENTRY, 'sim'] }), 30), undefined);
  });
});

describe('the health target', () => {
  it('of a simulator container is its /health where its flags put it', () => {
    assert.equal(healthTarget(['sim'], {}).href, 'http://127.0.0.1:8000/health');
    assert.equal(healthTarget(['sim', '--port', '9000', '--host', '0.0.0.0'], {}).href, 'http://127.0.0.1:9000/health');
    assert.equal(healthTarget(['sim', '--port=9001', '--host', '::1'], {}).href, 'http://[::1]:9001/health');
    assert.throws(() => healthTarget(['sim', '--port', '0'], {}), /--port 0 \(a free port\)/);
    assert.throws(() => healthTarget(['sim', '--bogus'], {}), /arguments it refuses: unknown argument "--bogus"/);
  });

  it('of infermeter is its management port, as before', () => {
    assert.equal(healthTarget([], { INFERMETER_MANAGEMENT_PORT: '2026' }).href, 'http://127.0.0.1:2026/health');
    assert.equal(healthTarget(undefined, {}).href, 'http://127.0.0.1:1026/health');
  });

  it('answers healthy against a running simulator', async (t) => {
    const sim = await startSimServer({ ttftMs: 1, interTokenMs: 1, defaultTokens: 1 });
    t.after(() => sim.close());
    const port = new URL(sim.url).port;
    const url = healthTarget(['sim', '--port', port], {});
    assert.deepEqual(await probeHealth(url, 5000), { healthy: true, detail: `http://127.0.0.1:${port}/health 200` });
  });
});
