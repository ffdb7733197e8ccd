// The container image's configuration without a container engine: infermeter and the
// HEALTHCHECK probe are run as the image runs them (its ENTRYPOINT and HEALTHCHECK commands,
// dist/*.js mapped to the sources, with the image's ENV and nothing of this process's), so the
// probe must find the management port and address however they were set; and the image's
// "every address" default must yield to MIES_CONTAINER_IP and a config file's ipAddress.
// scripts/image-test.ts checks the same on a built image.
import assert from 'node:assert/strict';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it, type TestContext } from 'node:test';
import { ConfigError, loadConfig, type Env } from '../../src/config/config.ts';
import { startSimServer } from '../../src/sim/model-server.ts';
import { makeCerts } from '../helpers/certs.ts';
import { collect, spawnNode } from '../helpers/child-process.ts';
import { execForm, finalStage, imageEnv, sourceOf } from '../helpers/dockerfile.ts';
import { freePorts, listen } from '../helpers/listen.ts';

const STAGE = finalStage();
const IMAGE_ENV = imageEnv(STAGE);
const [entryNode, ...entryArgs] = execForm(STAGE, 'ENTRYPOINT');
const [probeNode, ...probeArgs] = execForm(STAGE, 'HEALTHCHECK');

/** The image's command with node as this one and dist/x.js as src/x.ts. */
function asImage(args: readonly string[]): string[] {
  return args.map((a) => (/^dist\/.+\.js$/.test(a) ? fileURLToPath(sourceOf(a)) : a));
}

function imageProcess(t: TestContext, args: readonly string[], env: Env): ChildProcessWithoutNullStreams {
  return spawnNode(t, asImage(args), { ...IMAGE_ENV, ...env });
}

/** Runs the HEALTHCHECK command once: its exit code and its line for the health log. */
async function probe(t: TestContext, env: Env): Promise<{ code: number | null; out: string }> {
  const child = imageProcess(t, probeArgs, env);
  const [out, err, [code]] = await Promise.all([collect(child.stdout), collect(child.stderr), once(child, 'exit') as Promise<[number | null]>]);
  assert.equal(err, '', 'the probe writes nothing on stderr');
  return { code, out };
}

/** Starts infermeter as the ENTRYPOINT does; resolves with its "started" log line. */
async function startAsImage(t: TestContext, env: Env): Promise<{ child: ChildProcessWithoutNullStreams; started: Record<string, string> }> {
  const child = imageProcess(t, entryArgs, env);
  let buffered = '';
  const started = await new Promise<Record<string, string>>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const line = buffered.split('\n').find((l) => l.includes('"infermeter started"'));
      if (line !== undefined) resolve(JSON.parse(line) as Record<string, string>);
    });
    child.once('exit', (code) => reject(new Error(`infermeter exited with ${code}: ${buffered}`)));
  });
  return { child, started };
}

async function stop(child: ChildProcessWithoutNullStreams): Promise<void> {
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const [code] = (await exited) as [number | null];
  assert.equal(code, 0, 'infermeter drains and exits 0 on SIGTERM');
}

// Free ports for a fixed configuration (freePorts): the probe has to find a port that was
// configured, so port 0 will not do. Taken from the kernel and released at once (another process
// could take one meanwhile; the test would then fail at start, loudly, not pass wrongly).

function configFile(t: TestContext, serverConfig: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'infermeter-image-'));
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
  const path = join(dir, 'config.json');
  writeFileSync(path, JSON.stringify({ ServerConfig: serverConfig }));
  return path;
}

const portOf = (url: string | undefined) => new URL(url!).port;
const hostOf = (url: string | undefined) => new URL(url!).hostname;

// Each case's processes and ports are its own: the cases run three at a time (most of their time is
// processes loading, one after another within a case).
describe('the image health probe', { concurrency: 3 }, () => {
  it('is a node command of a module that exists, run with the image entry point node', () => {
    assert.equal(probeNode, 'node');
    assert.equal(entryNode, 'node');
    assert.ok(
      probeArgs.every((a) => !a.startsWith('-e') && !a.startsWith('--eval')),
      'a module, not inline code reading one variable',
    );
    assert.equal(probeArgs.length, 1, `one module: ${probeArgs.join(' ')}`);
    assert.ok(existsSync(sourceOf(probeArgs[0]!)), `${probeArgs[0]} is built from ${fileURLToPath(sourceOf(probeArgs[0]!))}`);
  });

  // Each way of setting the management port and address, as an operator of the image would.
  const cases: Array<{ name: string; env: (t: TestContext, ports: number[], upstream: string) => Env; host: string }> = [
    {
      name: "a MindIE config.json's managementPort and ipAddress (INFERMETER_CONFIG)",
      env: (t, [data, management, metrics], upstream) => ({
        INFERMETER_UPSTREAM: upstream,
        INFERMETER_CONFIG: configFile(t, { ipAddress: '127.0.0.1', port: data, managementPort: management, metricsPort: metrics }),
      }),
      host: '127.0.0.1',
    },
    {
      name: 'INFERMETER_MANAGEMENT_PORT with MIES_CONTAINER_IP',
      env: (_t, [data, management, metrics], upstream) => ({
        INFERMETER_UPSTREAM: upstream,
        MIES_CONTAINER_IP: '127.0.0.1',
        INFERMETER_PORT: String(data),
        INFERMETER_MANAGEMENT_PORT: String(management),
        INFERMETER_METRICS_PORT: String(metrics),
      }),
      host: '127.0.0.1',
    },
    {
      name: "a config file's managementIpAddress, another loopback address than the data plane's",
      env: (t, [data, management, metrics], upstream) => ({
        INFERMETER_UPSTREAM: upstream,
        INFERMETER_CONFIG: configFile(t, {
          ipAddress: '127.0.0.1',
          managementIpAddress: '127.0.0.2',
          port: data,
          managementPort: management,
          metricsPort: metrics,
        }),
      }),
      host: '127.0.0.2',
    },
    {
      name: 'MIES_CONTAINER_MANAGEMENT_IP with the ports of a config file',
      env: (t, [data, management, metrics], upstream) => ({
        INFERMETER_UPSTREAM: upstream,
        MIES_CONTAINER_IP: '127.0.0.1',
        MIES_CONTAINER_MANAGEMENT_IP: '127.0.0.3',
        INFERMETER_CONFIG: configFile(t, { port: data, managementPort: management, metricsPort: metrics }),
      }),
      host: '127.0.0.3',
    },
    {
      name: 'HTTPS on the management port (INFERMETER_MANAGEMENT_TLS_CERT), the probe not verifying the certificate',
      env: (t, [data, management, metrics], upstream) => {
        const certs = makeCerts();
        t.after(() => certs.remove());
        return {
          INFERMETER_UPSTREAM: upstream,
          INFERMETER_HOST: '127.0.0.1',
          INFERMETER_PORT: String(data),
          INFERMETER_MANAGEMENT_PORT: String(management),
          INFERMETER_METRICS_PORT: String(metrics),
          INFERMETER_MANAGEMENT_TLS_CERT: certs.certFile,
          INFERMETER_MANAGEMENT_TLS_KEY: certs.keyFile,
        };
      },
      host: '127.0.0.1',
    },
  ];

  for (const c of cases) {
    it(`asks where infermeter listens: ${c.name}`, async (t) => {
      const sim = await startSimServer({ ttftMs: 1, interTokenMs: 1, defaultTokens: 2 });
      t.after(() => sim.close());
      const ports = await freePorts(3);
      const env = c.env(t, ports, sim.url);
      const before = await probe(t, env);
      assert.equal(before.code, 1, `unhealthy before infermeter listens: ${before.out}`);
      const { child, started } = await startAsImage(t, env);
      assert.equal(portOf(started.management), String(ports[1]), `management ${started.management}`);
      assert.equal(hostOf(started.management), c.host, `management ${started.management}`);
      assert.equal(hostOf(started.data), '127.0.0.1', `data ${started.data}: not the image's 0.0.0.0`);
      const up = await probe(t, env);
      assert.equal(up.code, 0, `healthy: ${up.out}`);
      assert.equal(up.out, `healthy: ${started.management}/health 200\n`);
      await stop(child);
      const after = await probe(t, env);
      assert.equal(after.code, 1, `unhealthy once infermeter stopped: ${after.out}`);
    });
  }

  it('reports a /health that does not answer 200 as unhealthy, naming the status', async (t) => {
    const server = http.createServer((_req, res) => res.writeHead(503).end());
    const { port } = await listen(t, server);
    const r = await probe(t, { INFERMETER_HOST: '127.0.0.1', INFERMETER_MANAGEMENT_PORT: String(port) });
    assert.equal(r.code, 1, r.out);
    assert.equal(r.out, `unhealthy: http://127.0.0.1:${port}/health 503\n`);
  });

  it('exits 1, not 2 (reserved by Docker), on a configuration infermeter would refuse', async (t) => {
    const r = await probe(t, { INFERMETER_MANAGEMENT_PORT: 'http' });
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /^unhealthy: invalid configuration:\n\s+INFERMETER_MANAGEMENT_PORT: expected an integer port/);
  });
});

describe("the image's listen address", () => {
  const file = (serverConfig: Record<string, unknown>) => () => JSON.stringify({ ServerConfig: serverConfig });
  const load = (env: Env, readFile: () => string = () => '{}') => loadConfig({ ...IMAGE_ENV, ...env }, { readFile });
  const addresses = (env: Env, readFile?: () => string) => {
    const c = load(env, readFile);
    return [c.host, c.managementHost];
  };

  it('is every address when nothing else sets one', () => {
    assert.deepEqual(addresses({}), ['0.0.0.0', '0.0.0.0']);
  });

  it('yields to MIES_CONTAINER_IP, a config file and INFERMETER_HOST, in MindIE order', () => {
    assert.deepEqual(addresses({ MIES_CONTAINER_IP: '127.0.0.1' }), ['127.0.0.1', '127.0.0.1']);
    assert.deepEqual(addresses({ INFERMETER_CONFIG: 'c.json' }, file({ ipAddress: '10.0.0.5' })), ['10.0.0.5', '10.0.0.5']);
    assert.deepEqual(addresses({ INFERMETER_CONFIG: 'c.json' }, file({ ipAddress: '10.0.0.5', managementIpAddress: '10.1.0.5' })), ['10.0.0.5', '10.1.0.5']);
    assert.deepEqual(addresses({ INFERMETER_CONFIG: 'c.json', MIES_CONTAINER_IP: '10.0.0.7' }, file({ ipAddress: '10.0.0.5' })), ['10.0.0.7', '10.0.0.7']);
    assert.deepEqual(addresses({ INFERMETER_CONFIG: 'c.json', MIES_CONTAINER_IP: '10.0.0.7', INFERMETER_HOST: '10.0.0.8' }, file({ ipAddress: '10.0.0.5' })), [
      '10.0.0.8',
      '10.0.0.8',
    ]);
    assert.deepEqual(addresses({ MIES_CONTAINER_MANAGEMENT_IP: '127.0.0.1' }), ['0.0.0.0', '127.0.0.1']);
  });

  it("does not lift MindIE's refusal of an every-address setting the operator wrote", () => {
    const refused = (env: Env, readFile?: () => string) =>
      assert.throws(
        () => load(env, readFile),
        (e: unknown) => e instanceof ConfigError && /INFERMETER_ALLOW_ALL_ZERO_IP=1/.test(e.message),
        JSON.stringify(env),
      );
    refused({ INFERMETER_HOST: '0.0.0.0' });
    refused({ MIES_CONTAINER_IP: '::' });
    refused({ INFERMETER_CONFIG: 'c.json' }, file({ ipAddress: '0.0.0.0' }));
    refused({ INFERMETER_CONFIG: 'c.json' }, file({ ipAddress: '0.0.0.0', allowAllZeroIpListening: false }));
    refused({ INFERMETER_CONFIG: 'c.json' }, file({ ipAddress: '10.0.0.5', managementIpAddress: '0.0.0.0' }));
    assert.deepEqual(addresses({ INFERMETER_CONFIG: 'c.json' }, file({ ipAddress: '0.0.0.0', allowAllZeroIpListening: true })), ['0.0.0.0', '0.0.0.0']);
    assert.deepEqual(addresses({ INFERMETER_HOST: '::', INFERMETER_ALLOW_ALL_ZERO_IP: '1' }), ['::', '::']);
  });
});
