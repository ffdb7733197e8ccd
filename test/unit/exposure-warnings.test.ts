// Start-time warnings for an exposure the operator may not mean: /metrics on every address
// without a token; a loopback address from the MindIE config file inside a container. One line
// each, naming the variable that fixes it; nothing is refused.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it, type TestContext } from 'node:test';
import { logStartWarnings } from '../../src/start/root.ts';
import { loadConfig } from '../../src/config/config.ts';
import { exposureWarnings } from '../../src/config/exposure-warnings.ts';
import { createLogger } from '../../src/log.ts';
import { containerEvidence } from '../../src/metrics/container/in-container.ts';

const FIXTURES = fileURLToPath(new URL('../../fixtures/container/', import.meta.url));
const TOKEN = 'a-token-of-sixteen-chars';
const file = (server: Record<string, unknown>) => ({ readFile: () => JSON.stringify({ ServerConfig: server }) });

describe('start-time warnings', () => {
  it('/metrics on every address without a token: one line naming INFERMETER_METRICS_TOKEN', () => {
    const open = loadConfig({ INFERMETER_MANAGEMENT_HOST: '0.0.0.0', INFERMETER_ALLOW_ALL_ZERO_IP: '1' });
    const [w, ...rest] = exposureWarnings(open, undefined);
    assert.equal(rest.length, 0);
    assert.match(w!.msg, /^\/metrics is served on every address without a token: .*set INFERMETER_METRICS_TOKEN/);
    assert.deepEqual(w!.fields, { variable: 'INFERMETER_METRICS_TOKEN', address: '0.0.0.0', port: 1027 });
    // The image's default (INFERMETER_DEFAULT_HOST) is every address too, and `::` in any spelling.
    assert.equal(exposureWarnings(loadConfig({ INFERMETER_DEFAULT_HOST: '0.0.0.0' }), undefined).length, 1);
    assert.equal(exposureWarnings(loadConfig({ INFERMETER_MANAGEMENT_HOST: '::', INFERMETER_ALLOW_ALL_ZERO_IP: '1' }), undefined).length, 1);
    // Fixed: a token, a specific address, or no /metrics at all.
    assert.deepEqual(
      exposureWarnings(loadConfig({ INFERMETER_MANAGEMENT_HOST: '0.0.0.0', INFERMETER_ALLOW_ALL_ZERO_IP: '1', INFERMETER_METRICS_TOKEN: TOKEN }), undefined),
      [],
    );
    assert.deepEqual(exposureWarnings(loadConfig({ INFERMETER_DEFAULT_HOST: '0.0.0.0', INFERMETER_MANAGEMENT_HOST: '10.0.0.5' }), undefined), []);
    assert.deepEqual(
      exposureWarnings(loadConfig({ INFERMETER_MANAGEMENT_HOST: '0.0.0.0', INFERMETER_ALLOW_ALL_ZERO_IP: '1', MIES_SERVICE_MONITOR_MODE: '0' }), undefined),
      [],
    );
    assert.deepEqual(exposureWarnings(loadConfig({}), undefined), [], 'the default, loopback');
  });

  it('a loopback address from the config file, in a container: names the key and the variable that overrides it', () => {
    const env = { INFERMETER_CONFIG: '/etc/mindie/config.json', INFERMETER_DEFAULT_HOST: '0.0.0.0' };
    const both = loadConfig(env, file({ ipAddress: '127.0.0.1' }));
    const [w, ...rest] = exposureWarnings(both, '/.dockerenv');
    assert.equal(rest.length, 0, 'one line: the management address follows the data one');
    assert.match(
      w!.msg,
      /^INFERMETER_CONFIG ServerConfig\.ipAddress is the loopback address 127\.0\.0\.1 and infermeter runs in a container: the data, management and metrics ports cannot be reached from outside it.*set INFERMETER_HOST/,
    );
    assert.deepEqual(w!.fields, {
      variable: 'INFERMETER_HOST',
      source: 'INFERMETER_CONFIG ServerConfig.ipAddress',
      address: '127.0.0.1',
      container: '/.dockerenv',
    });
    const management = exposureWarnings(loadConfig(env, file({ ipAddress: '10.0.0.5', managementIpAddress: '::1' })), 'KUBERNETES_SERVICE_HOST is set');
    assert.deepEqual(
      management.map((x) => x.fields.variable),
      ['INFERMETER_MANAGEMENT_HOST'],
    );
    assert.match(management[0]!.msg, /ServerConfig\.managementIpAddress is the loopback address ::1 .*the management and metrics ports/);
    // Not in a container; an address the operator set as a variable; a non-loopback file address.
    assert.deepEqual(exposureWarnings(both, undefined), []);
    assert.deepEqual(exposureWarnings(loadConfig({ ...env, INFERMETER_HOST: '127.0.0.1' }, file({ ipAddress: '127.0.0.1' })), '/.dockerenv'), []);
    assert.deepEqual(exposureWarnings(loadConfig(env, file({ ipAddress: '10.0.0.5' })), '/.dockerenv'), []);
  });

  it('are logged at start, one line each', () => {
    const lines: Array<Record<string, unknown>> = [];
    const log = createLogger('info', (l) => lines.push(JSON.parse(l) as Record<string, unknown>));
    logStartWarnings(
      loadConfig({ INFERMETER_CONFIG: 'c.json', INFERMETER_MANAGEMENT_HOST: '0.0.0.0', INFERMETER_ALLOW_ALL_ZERO_IP: '1' }, file({ ipAddress: '127.0.0.1' })),
      log,
      '/run/.containerenv',
    );
    assert.deepEqual(
      lines.map((l) => [l.level, l.variable]),
      [
        ['warn', 'INFERMETER_METRICS_TOKEN'],
        ['warn', 'INFERMETER_HOST'],
      ],
    );
  });
});

describe('container detection', () => {
  function root(t: TestContext, files: Record<string, string>): string {
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-root-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(join(dir, path, '..'), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    return dir;
  }

  it("finds the engines' marker files, Kubernetes' variables, a runtime's cgroup path", (t) => {
    const none = root(t, { 'proc/self/cgroup': '0::/user.slice/user-1000.slice/session-2.scope\n' });
    const probe = (dir: string, env: Record<string, string> = {}) => containerEvidence({ root: dir, procRoot: join(dir, 'proc'), env });
    assert.equal(probe(none), undefined, 'a host session');
    assert.equal(probe(root(t, { '.dockerenv': '' })), '/.dockerenv');
    assert.equal(probe(root(t, { 'run/.containerenv': 'engine="podman-4.9"\n' })), '/run/.containerenv');
    assert.equal(probe(none, { KUBERNETES_SERVICE_HOST: '10.96.0.1' }), 'KUBERNETES_SERVICE_HOST is set');
    assert.equal(probe(none, { container: 'podman' }), 'container=podman');
    // The AOM fixture of a Kubernetes pod under cgroup v1; its v2 fixture (a cgroup namespace: "0::/") says nothing.
    assert.equal(containerEvidence({ root: none, procRoot: join(FIXTURES, 'cgroup-v1/proc'), env: {} }), '/proc/self/cgroup names kubepods');
    assert.equal(containerEvidence({ root: none, procRoot: join(FIXTURES, 'cgroup-v2/proc'), env: {} }), undefined);
    assert.equal(probe(root(t, { 'proc/self/cgroup': '12:memory:/docker/0a1b2c3d\n' })), '/proc/self/cgroup names docker');
    assert.equal(probe(root(t, { 'proc/self/cgroup': '0::/system.slice/docker-0a1b.scope\n' })), '/proc/self/cgroup names docker');
  });
});
