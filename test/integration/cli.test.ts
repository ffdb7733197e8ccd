// The command-line entry point as an operator runs it: a bad configuration stops the start
// with one message naming each variable; a good one starts on the chosen ports, logs them,
// answers /health, /ready and /metrics, and stops cleanly on SIGTERM.
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it, type TestContext } from 'node:test';
import { startSimServer } from '../../src/sim/model-server.ts';

const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
const DEMO = fileURLToPath(new URL('../../src/demo.ts', import.meta.url));

function run(t: TestContext, script: string, env: Record<string, string>, args: string[] = []): ChildProcessWithoutNullStreams {
  const child = spawn(process.execPath, [script, ...args], { env: { PATH: process.env.PATH ?? '', ...env } });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return child;
}

async function collect(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream) text += chunk.toString();
  return text;
}

/** Resolves with the first line of `stream` that matches. */
function lineMatching(stream: NodeJS.ReadableStream, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString();
      for (const line of buffered.split('\n')) {
        if (pattern.test(line)) {
          stream.off('data', onData);
          resolve(line);
          return;
        }
      }
    };
    stream.on('data', onData);
    stream.once('end', () => reject(new Error(`stream ended without ${pattern}: ${buffered}`)));
  });
}

describe('infermeter CLI', () => {
  it('refuses a bad configuration with one message naming every bad variable', async (t) => {
    const child = run(t, CLI, { INFERMETER_PORT: 'eighty', INFERMETER_THROUGHPUT_WINDOW_SECONDS: '0' });
    const [stderr, [code]] = await Promise.all([collect(child.stderr), once(child, 'exit')]);
    assert.equal(code, 2);
    assert.match(stderr, /INFERMETER_UPSTREAM: expected an http:\/\/ or https:\/\/ URL/);
    assert.match(stderr, /INFERMETER_PORT: expected an integer port from 0 to 65535 \(0 picks a free port\), got "eighty"/);
    assert.match(stderr, /INFERMETER_THROUGHPUT_WINDOW_SECONDS: expected an integer from 1 to 3600, got "0"/);
  });

  it('starts on free ports, logs them, serves management and metrics, and stops on SIGTERM', async (t) => {
    const sim = await startSimServer({ ttftMs: 5, interTokenMs: 1, defaultTokens: 3 });
    t.after(() => sim.close());
    const child = run(t, CLI, {
      INFERMETER_UPSTREAM: sim.url,
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
    });
    const started = JSON.parse(await lineMatching(child.stderr, /"infermeter started"/)) as Record<string, string>;
    assert.match(started.data!, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(started.data, started.management);
    assert.equal((await fetch(`${started.management}/health`)).status, 200);
    assert.deepEqual(await (await fetch(`${started.management}/ready`)).json(), { status: 'ready' });
    assert.equal((await fetch(`${started.management}/metrics`)).status, 404, '/metrics only on the metrics port');
    const completion = await fetch(`${started.data}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-llama-8b', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(completion.status, 200);
    await completion.text();
    const metrics = await (await fetch(started.metrics!)).text();
    assert.match(metrics, /request_received_total\{model_name="sim-llama-8b"\} 1/);
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
  });

  it('serves /metrics on the management port when both ports are the same, and not at all when MIES_SERVICE_MONITOR_MODE=0', async (t) => {
    const sim = await startSimServer();
    t.after(() => sim.close());
    // A fixed shared port: take a free one from the OS first.
    const probe = await startSimServer();
    const port = new URL(probe.url).port;
    await probe.close();
    const child = run(t, CLI, {
      INFERMETER_UPSTREAM: sim.url,
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: port,
      INFERMETER_METRICS_PORT: port,
      MIES_SERVICE_MONITOR_MODE: '0',
    });
    const started = JSON.parse(await lineMatching(child.stderr, /"infermeter started"/)) as Record<string, string>;
    assert.equal(started.metrics, 'disabled');
    assert.equal((await fetch(`${started.management}/health`)).status, 200);
    const res = await fetch(`${started.management}/metrics`);
    assert.equal(res.status, 404);
    assert.match(await res.text(), /MIES_SERVICE_MONITOR_MODE/);
    child.kill('SIGTERM');
    await once(child, 'exit');
  });
});

describe('infermeter CLI with per-tenant metering', () => {
  it('reloads the tenant aliases on SIGHUP, in the primary and every worker, none of which it stops', async (t) => {
    const sim = await startSimServer({ ttftMs: 1, interTokenMs: 1, defaultTokens: 2 });
    t.after(() => sim.close());
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-cli-tenant-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const aliases = join(dir, 'aliases.json');
    writeFileSync(aliases, JSON.stringify({ t1: 'Team One' }));
    const child = run(t, CLI, {
      INFERMETER_UPSTREAM: sim.url,
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_UPSTREAM_METRICS: 'off',
      INFERMETER_WORKERS: '2',
      INFERMETER_TENANT: 'header:x-tenant-id',
      INFERMETER_TENANT_ALIASES: aliases,
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const started = JSON.parse(await lineMatching(child.stderr, /"infermeter started"/)) as Record<string, string>;
    // Each request on a connection of its own, so that both workers get some.
    const send = (n: number) =>
      Promise.all(
        Array.from({ length: n }, () =>
          new Promise<void>((resolve, reject) => {
            const req = request(`${started.data}/v1/chat/completions`, { method: 'POST', headers: { connection: 'close', 'content-type': 'application/json', 'x-tenant-id': 't1' } }, (res) => {
              res.resume();
              res.on('end', resolve);
            });
            req.on('error', reject);
            req.end(JSON.stringify({ model: 'sim-llama-8b', messages: [{ role: 'user', content: 'hi' }] }));
          }),
        ),
      );
    const count = async (tenant: string) => {
      const text = await (await fetch(started.metrics!)).text();
      return Number(new RegExp(`infermeter_tenant_requests_total\\{tenant="${tenant}",model_name="sim-llama-8b",outcome="success"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    };
    await send(6);
    assert.equal(await count('Team One'), 6);
    // Same size, same inode, same modification time: only the signal can make it read again.
    const before = statSync(aliases);
    writeFileSync(aliases, JSON.stringify({ t1: 'Team Uno' }));
    utimesSync(aliases, before.atime, before.mtime);
    const reloaded = () => stderr.split('\n').filter((l) => l.includes('INFERMETER_TENANT_ALIASES reloaded')).length;
    // The primary's line and each worker's, on the stderr they share.
    const allReloaded = new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (reloaded() < 3) return;
        child.stderr.off('data', check);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => reject(new Error(`3 reloads (primary and 2 workers) expected: ${stderr}`)), 10_000);
      child.stderr.on('data', check);
    });
    child.kill('SIGHUP');
    await allReloaded;
    await send(6);
    assert.equal(await count('Team Uno'), 6, 'every worker maps with the new file');
    assert.equal(await count('Team One'), 6);
    assert.doesNotMatch(stderr, /worker exited/, 'no worker died of the signal');
    assert.equal(child.exitCode, null);
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
  });
});

describe('npm run demo', () => {
  it('runs the simulated server, the proxy and traffic, and shows metrics filling', async (t) => {
    const child = run(t, DEMO, { INFERMETER_PORT: '0', INFERMETER_MANAGEMENT_PORT: '0', INFERMETER_METRICS_PORT: '0' }, ['--duration', '3']);
    const [stdout, [code]] = await Promise.all([collect(child.stdout), once(child, 'exit')]);
    assert.equal(code, 0, stdout);
    assert.match(stdout, /proxy, for clients {6}http:\/\/127\.0\.0\.1:\d+\/v1/);
    assert.match(stdout, /metrics \(Prometheus\) {4}http:\/\/127\.0\.0\.1:\d+\/metrics/);
    assert.match(stdout, /live dashboard {10}http:\/\/127\.0\.0\.1:\d+\/dashboard\n/);
    const last = stdout.trim().split('\n').at(-1)!;
    const m = /^received (\d+): (\d+) ok/.exec(last);
    assert.ok(m, last);
    assert.ok(Number(m[1]) >= 4 && Number(m[2]) >= 1, last);
  });
});
