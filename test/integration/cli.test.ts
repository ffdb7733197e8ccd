// The command-line entry point as an operator runs it: a bad configuration stops the start
// with one message naming each variable; a good one starts on the chosen ports, logs them,
// answers /health, /ready and /metrics, and stops cleanly on SIGTERM.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it, type TestContext } from 'node:test';
import { CONFIGURATION_TABLE } from '../../src/config/variables.ts';
import { startSimServer } from '../../src/sim/model-server.ts';
import { VERSION } from '../../src/version.ts';
import { collect, lineMatching, spawnNode } from '../helpers/child-process.ts';
import { listen } from '../helpers/listen.ts';
import { postResponse } from '../helpers/post.ts';

const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
const DEMO = fileURLToPath(new URL('../../src/demo.ts', import.meta.url));
const LAUNCHER = fileURLToPath(new URL('../../bin/infermeter.js', import.meta.url));

function run(t: TestContext, script: string, env: Record<string, string>, args: string[] = [], node = process.execPath): ChildProcessWithoutNullStreams {
  return spawnNode(t, [script, ...args], env, node);
}

// Each test's processes are its own, on ports the OS picks: the tests of a describe run side by
// side, three at a time (most of their time is processes loading, which a busy machine stretches).
describe('infermeter CLI', { concurrency: 3 }, () => {
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
    const wrongPort = await fetch(`${started.management}/metrics`);
    assert.equal(wrongPort.status, 404, '/metrics only on the metrics port');
    assert.equal(((await wrongPort.json()) as { error: string }).error, `/metrics is served on the metrics port: ${started.metrics}`);
    const index = (await (await fetch(`${started.management}/`)).json()) as {
      data: { url: string };
      management: { url: string; serves: Record<string, string> };
      metrics: string;
    };
    assert.deepEqual([index.data.url, index.management.url, index.metrics], [started.data, started.management, started.metrics]);
    assert.deepEqual(Object.keys(index.management.serves), ['/health', '/ready', '/metrics-json', '/dashboard']);
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

  it('says its effective settings when started, and drains on SIGTERMs that came while it was starting', async (t) => {
    const sim = await startSimServer();
    t.after(() => sim.close());
    const child = run(t, CLI, {
      INFERMETER_UPSTREAM: `${sim.url}/prefix`,
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_DIALECTS: 'mindie,vllm',
      INFERMETER_TENANT: 'header:x-team',
      INFERMETER_SLO: 'ttft:500 tpot:50',
      INFERMETER_LOG_LEVEL: 'debug',
    });
    const stderr = collect(child.stderr);
    // Logged once the stop signals are handled, before any port listens: three quick SIGTERMs
    // (one signal delivered thrice) then, as a process group and npm's forward deliver them.
    await lineMatching(child.stderr, /"starting: SIGTERM and SIGINT drain from here on"/);
    for (let i = 0; i < 3; i++) child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    assert.equal(code, 0, await stderr);
    const lines = (await stderr)
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const started = lines.find((l) => l.msg === 'infermeter started');
    assert.ok(started, 'it started');
    assert.equal(started.upstream, `${sim.url}/prefix`);
    assert.match(String(started.data), /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.match(String(started.management), /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.match(String(started.metrics), /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    assert.equal(started.dialects, 'mindie,vllm');
    assert.equal(started.tenants, 'header:x-team (at most 100)');
    assert.equal(started.slo, 'default ttft:500 tpot:50');
    assert.equal(started.workers, 1);
    assert.ok(
      lines.some((l) => l.msg === 'drained: every request in flight finished'),
      'drained, not killed',
    );
    assert.equal(lines.filter((l) => l.msg === 'draining: not ready, finishing requests in flight').length, 1, 'the repeats are the same signal');
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
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
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
        Array.from(
          { length: n },
          () =>
            new Promise<void>((resolve, reject) => {
              const req = request(
                `${started.data}/v1/chat/completions`,
                { method: 'POST', headers: { connection: 'close', 'content-type': 'application/json', 'x-tenant-id': 't1' } },
                (res) => {
                  res.resume();
                  res.on('end', resolve);
                },
              );
              req.on('error', reject);
              req.end(JSON.stringify({ model: 'sim-llama-8b', messages: [{ role: 'user', content: 'hi' }] }));
            }),
        ),
      );
    const count = async (tenant: string) => {
      const text = await (await fetch(started.metrics!)).text();
      return Number(
        new RegExp(`infermeter_tenant_requests_total\\{tenant="${tenant}",model_name="sim-llama-8b",outcome="success"\\} (\\d+)`).exec(text)?.[1] ?? 0,
      );
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

describe('infermeter CLI and SIGHUP with nothing to reload', { concurrency: 3 }, () => {
  for (const workers of ['1', '2']) {
    it(`ignores SIGHUP (no alias file; INFERMETER_WORKERS=${workers}): a stream in flight finishes, the process stays`, async (t) => {
      const sim = await startSimServer({ ttftMs: 1, interTokenMs: 20, defaultTokens: 20 });
      t.after(() => sim.close());
      const child = run(t, CLI, {
        INFERMETER_UPSTREAM: sim.url,
        INFERMETER_PORT: '0',
        INFERMETER_MANAGEMENT_PORT: '0',
        INFERMETER_METRICS_PORT: '0',
        INFERMETER_UPSTREAM_METRICS: 'off',
        INFERMETER_WORKERS: workers,
        INFERMETER_TENANT: workers === '2' ? 'header:x-tenant-id' : 'off',
      });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const started = JSON.parse(await lineMatching(child.stderr, /"infermeter started"/)) as Record<string, string>;
      const res = await fetch(`${started.data}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim-llama-8b', stream: true, messages: [] }),
      });
      const reader = res.body!.getReader();
      await reader.read(); // the stream is under way
      const ignored = lineMatching(child.stderr, /SIGHUP ignored/);
      child.kill('SIGHUP');
      await ignored;
      let text = '';
      for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
      assert.match(text, /data: \[DONE\]/, 'the stream in flight finished');
      assert.equal(child.exitCode, null, 'still running');
      assert.equal((await fetch(`${started.management}/health`)).status, 200);
      assert.doesNotMatch(stderr, /worker exited/);
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      assert.equal(code, 0);
    });
  }
});

describe('npm run demo', { concurrency: 3 }, () => {
  it('runs the simulated server, the proxy and traffic, prints URLs that answer, and shows metrics filling', async (t) => {
    const child = run(t, DEMO, { INFERMETER_PORT: '0', INFERMETER_MANAGEMENT_PORT: '0', INFERMETER_METRICS_PORT: '0' });
    let stdout = '';
    const header = new Promise<void>((resolve) =>
      child.stdout.on('data', (c: Buffer) => {
        stdout += c.toString();
        if (/grow too\.\n/.test(stdout)) resolve();
      }),
    );
    const exited = once(child, 'exit');
    await Promise.race([header, exited.then(() => assert.fail(`the demo exited:\n${stdout}`))]);
    assert.match(stdout, /proxy, for clients {6}http:\/\/127\.0\.0\.1:\d+\/v1\/models/);
    assert.match(stdout, /metrics \(Prometheus\) {4}http:\/\/127\.0\.0\.1:\d+\/metrics/);
    assert.match(stdout, /live dashboard {10}http:\/\/127\.0\.0\.1:\d+\/dashboard\n/);
    // It says what it sends, the deliberate failures and cancels included.
    assert.match(stdout, /1 in 12 asks for no-such-model \(the server answers 404/);
    assert.match(stdout, /1 in 12 is given up\s+by its client after 150 ms \(cancelled\)/);
    // Every URL of the list answers 200.
    const urls = [...stdout.matchAll(/^ {2}(?:simulated model server|proxy, for clients|metrics \(Prometheus\)|live dashboard|health) +(http:\/\/\S+)/gm)].map(
      (m) => m[1]!,
    );
    assert.equal(urls.length, 5, stdout);
    for (const url of urls) {
      const res = await fetch(url);
      await res.arrayBuffer();
      assert.equal(res.status, 200, url);
    }
    const models = (await (await fetch(urls[1]!)).json()) as { data: Array<{ id: string }> };
    assert.deepEqual(models.data.map((m) => m.id).sort(), ['sim-llama-8b', 'sim-qwen-7b']);
    // Traffic flows: wait (polling /metrics, with a deadline) for a success, then stop it.
    const metrics = urls[2]!;
    for (const deadline = Date.now() + 30_000; !/^request_success_total\{[^}]*\} [1-9]/m.test(await (await fetch(metrics)).text()); ) {
      assert.ok(Date.now() < deadline, 'no request succeeded within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    child.kill('SIGTERM');
    const [code] = await exited;
    assert.equal(code, 0, stdout);
    const last = stdout.trim().split('\n').at(-1)!;
    const m = /^received (\d+): (\d+) ok/.exec(last);
    assert.ok(m, last);
    assert.ok(Number(m[1]) >= 1 && Number(m[2]) >= 1, last);
  });

  it('checks its flags as sim does: a typo or a bad duration stops it at once, saying so', async (t) => {
    const cases = [
      [['--durration', '3'], /unknown argument "--durration": infermeter demo takes --duration S \(seconds\) only; did you mean --duration\?/],
      [['--duration', 'x'], /--duration expects seconds, more than 0 and at most 86400, got "x"/],
      [['--duration=0'], /--duration expects seconds, more than 0/],
      [['--duration'], /--duration needs a value/],
    ] as const;
    const exits = await Promise.all(
      cases.map(([args]) =>
        exitOf(run(t, LAUNCHER, { INFERMETER_PORT: '0', INFERMETER_MANAGEMENT_PORT: '0', INFERMETER_METRICS_PORT: '0' }, ['demo', ...args])),
      ),
    );
    for (const [i, [args, message]] of cases.entries()) {
      const { code, stdout, stderr } = exits[i]!;
      assert.equal(code, 2, `${args.join(' ')}: ${stderr}`);
      assert.match(stderr, new RegExp(`^infermeter demo: ${message.source}`), args.join(' '));
      assert.equal(stdout, '', 'nothing started');
    }
  });
});

/** A port some other process holds for the test's duration. */
async function busyPort(t: TestContext): Promise<number> {
  return (await listen(t, createServer())).port;
}

async function exitOf(child: ChildProcessWithoutNullStreams): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const [stdout, stderr, [code]] = await Promise.all([collect(child.stdout), collect(child.stderr), once(child, 'exit')]);
  return { code: code as number | null, stdout, stderr };
}

describe('infermeter on the command line, as a newcomer meets it', { concurrency: 3 }, () => {
  it('--help and -h list the commands and every variable of the configuration table with its default', async (t) => {
    const flags = ['--help', '-h'];
    const exits = await Promise.all(flags.map((flag) => exitOf(run(t, LAUNCHER, {}, [flag]))));
    for (const { code, stdout, stderr } of exits) {
      assert.equal(code, 0, stderr);
      for (const command of ['infermeter sim [--port N] [--host H]', 'infermeter demo', 'infermeter --version'])
        assert.ok(stdout.includes(command), `${command} in:\n${stdout}`);
      for (const v of CONFIGURATION_TABLE) {
        assert.ok(stdout.includes(`\n  ${v.name}\n      default: `), `${v.name} in --help`);
      }
      assert.match(stdout, /INFERMETER_PORT\n {6}default: config port, else 1025\n {6}data-plane port, 0 to 65535; 0 picks a free port/);
    }
  });

  it('--version prints the package version', async (t) => {
    const { code, stdout } = await exitOf(run(t, LAUNCHER, {}, ['--version']));
    assert.equal(code, 0);
    assert.equal(stdout, `${VERSION}\n`);
  });

  it('an unknown command stops with a pointer to --help', async (t) => {
    const { code, stderr } = await exitOf(run(t, LAUNCHER, {}, ['strat']));
    assert.equal(code, 2);
    assert.match(stderr, /unknown command "strat"; infermeter --help/);
  });

  it('sim starts the simulated model server alone and prints its URL; the proxy works in front of it', async (t) => {
    const child = run(t, LAUNCHER, {}, ['sim', '--port', '0', '--host', '127.0.0.1']);
    const line = await lineMatching(child.stdout, /^ {2}url /);
    const url = /http:\/\/127\.0\.0\.1:\d+/.exec(line)?.[0];
    assert.ok(url, line);
    const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: Array<{ id: string }> };
    assert.deepEqual(
      models.data.map((m) => m.id),
      ['sim-llama-8b', 'sim-qwen-7b'],
    );
    const proxy = run(t, CLI, { INFERMETER_UPSTREAM: url, INFERMETER_PORT: '0', INFERMETER_MANAGEMENT_PORT: '0', INFERMETER_METRICS_PORT: '0' });
    const started = JSON.parse(await lineMatching(proxy.stderr, /"infermeter started"/)) as Record<string, string>;
    const res = await fetch(`${started.data}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-qwen-7b', prompt: 'hi', max_tokens: 2 }),
    });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens, 2);
    proxy.kill('SIGTERM');
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
  });

  it('npm run sim stops with npm: a SIGTERM to npm alone leaves no sim behind', async (t) => {
    // Its own process group, so that teardown can reach an orphan too.
    const npm = spawn('npm', ['run', '--silent', 'sim', '--', '--port', '0', '--host', '127.0.0.1'], {
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      env: { ...process.env, PATH: `${fileURLToPath(new URL('../../node_modules/.bin', import.meta.url))}:${process.env.PATH ?? ''}` },
      detached: true,
    });
    t.after(() => {
      try {
        process.kill(-npm.pid!, 'SIGKILL');
      } catch {}
    });
    const url = /http:\/\/127\.0\.0\.1:\d+/.exec(await lineMatching(npm.stdout, /^ {2}url /))?.[0];
    assert.ok(url);
    assert.equal((await fetch(`${url}/v1/models`)).status, 200);
    npm.kill('SIGTERM');
    await once(npm, 'exit');
    // npm forwards the signal to its script's process: node itself under exec, a shell (which
    // would leave node running) without. Bounded poll until the port refuses.
    let answered = true;
    for (let i = 0; i < 100 && answered; i++) {
      answered = await fetch(`${url}/v1/models`).then(
        async (r) => {
          await r.arrayBuffer();
          return true;
        },
        () => false,
      );
      if (answered) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(answered, false, 'the simulated server stopped with npm');
  });

  it('sim --help answers its help; sim refuses a bad --port and names --port when the port is taken', async (t) => {
    const port = await busyPort(t);
    const [help, bad, busy] = await Promise.all([
      exitOf(run(t, LAUNCHER, {}, ['sim', '--help'])),
      exitOf(run(t, LAUNCHER, {}, ['sim', '--port', 'eighty'])),
      exitOf(run(t, LAUNCHER, {}, ['sim', `--port=${port}`])),
    ]);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^infermeter sim \[--port N\] \[--host H\]/);
    assert.match(help.stdout, /--port N +the port to listen on/);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--port expects an integer port from 0 to 65535/);
    assert.equal(busy.code, 1);
    assert.match(busy.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: port ${port} is in use; choose another with --port N`));
  });

  it('sim refuses to listen on every address unless asked, and refuses a max_tokens beyond its bound', async (t) => {
    const hosts = ['0.0.0.0', '::', '0'];
    const refusals = Promise.all(hosts.map((host) => exitOf(run(t, LAUNCHER, {}, ['sim', '--port', '0', '--host', host]))));
    const child = run(t, LAUNCHER, { INFERMETER_ALLOW_ALL_ZERO_IP: '1' }, ['sim', '--port', '0', '--host', '0.0.0.0']);
    for (const [i, refused] of (await refusals).entries()) {
      assert.equal(refused.code, 1, hosts[i]);
      assert.match(refused.stderr, /listens on every address .*INFERMETER_ALLOW_ALL_ZERO_IP=1/, hosts[i]);
    }
    const line = await lineMatching(child.stdout, /^ {2}url /);
    const port = /:(\d+)/.exec(line)?.[1];
    const send = (maxTokens: number) =>
      postResponse(`http://127.0.0.1:${port}/v1/chat/completions`, { model: 'sim-llama-8b', max_tokens: maxTokens, stream: true, messages: [] });
    const huge = await send(1e9);
    assert.equal(huge.status, 400);
    assert.match(await huge.text(), /maximum context length is 4096 tokens/);
    const fine = await send(2);
    assert.equal(fine.status, 200);
    await fine.text();
    assert.equal(child.exitCode, null, 'alive after max_tokens 1e9');
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
  });

  it('an unknown INFERMETER_* variable stops the start, naming the closest known one', async (t) => {
    const { code, stderr } = await exitOf(run(t, LAUNCHER, { INFERMETER_UPSTREM: 'http://127.0.0.1:8000', INFERMETER_PROT: '2025' }));
    assert.equal(code, 2);
    assert.match(stderr, /INFERMETER_UPSTREM: expected a variable infermeter reads: did you mean INFERMETER_UPSTREAM\?/);
    assert.match(stderr, /INFERMETER_PROT: expected a variable infermeter reads: did you mean INFERMETER_PORT\?/);
  });

  it('an upstream ending in /v1 stops the start, naming the URL to set', async (t) => {
    const { code, stderr } = await exitOf(run(t, LAUNCHER, { INFERMETER_UPSTREAM: 'http://127.0.0.1:8000/v1' }));
    assert.equal(code, 2);
    assert.match(
      stderr,
      /INFERMETER_UPSTREAM: expected the model server's URL without the trailing \/v1 .*: set http:\/\/127\.0\.0\.1:8000, got "http:\/\/127\.0\.0\.1:8000\/v1"/,
    );
  });

  it('a port in use: the message names the variable that set it and its value', async (t) => {
    const sim = await startSimServer();
    t.after(() => sim.close());
    const port = await busyPort(t);
    const { code, stderr } = await exitOf(
      run(t, LAUNCHER, { INFERMETER_UPSTREAM: sim.url, INFERMETER_PORT: '0', INFERMETER_MANAGEMENT_PORT: '0', INFERMETER_METRICS_PORT: String(port) }),
    );
    assert.equal(code, 1);
    assert.match(
      stderr,
      new RegExp(
        `cannot listen on 127\\.0\\.0\\.1:${port} \\(metrics port\\): the port is in use by another process; the port is set by INFERMETER_METRICS_PORT=${port}: set INFERMETER_METRICS_PORT to a free port \\(0 picks one\\)`,
      ),
    );
  });

  it('a port in use by the demo: the same message, naming INFERMETER_PORT', async (t) => {
    const port = await busyPort(t);
    const { code, stderr } = await exitOf(
      run(t, LAUNCHER, { INFERMETER_PORT: String(port), INFERMETER_MANAGEMENT_PORT: '0', INFERMETER_METRICS_PORT: '0' }, ['demo', '--duration', '1']),
    );
    assert.equal(code, 1);
    assert.match(stderr, new RegExp(`infermeter demo: cannot listen on 127\\.0\\.0\\.1:${port} \\(data plane\\): .*set by INFERMETER_PORT=${port}`));
  });
});

/** A Node older than infermeter needs: the system's (Node 20 on Debian 13), when it is one. */
function oldNode(): string | undefined {
  for (const candidate of ['/usr/bin/node', '/usr/local/bin/node']) {
    if (!existsSync(candidate)) continue;
    const version = spawnSync(candidate, ['-p', 'process.versions.node'], { encoding: 'utf8' }).stdout.trim();
    const [major = 0, minor = 0] = version.split('.').map(Number);
    if (major < 22 || (major === 22 && minor < 18)) return candidate;
  }
  return undefined;
}

describe('the Node version check', () => {
  const old = oldNode();
  it('under an older Node, says in one line which Node it found, which it needs and how to get it', {
    skip: old === undefined ? 'no Node older than 22.18 on this machine' : false,
  }, async (t) => {
    const version = spawnSync(old!, ['-p', 'process.versions.node'], { encoding: 'utf8' }).stdout.trim();
    const exits = await Promise.all(
      [['--version'], [], ['sim'], ['demo']].map((args) => exitOf(run(t, LAUNCHER, { INFERMETER_UPSTREAM: 'http://127.0.0.1:8000' }, args, old!))),
    );
    for (const { code, stdout, stderr } of exits) {
      assert.equal(code, 1, stderr);
      assert.equal(stdout, '');
      assert.equal(stderr.trimEnd().split('\n').length, 1, stderr);
      assert.match(
        stderr,
        new RegExp(
          `^infermeter: needs Node\\.js >= 22\\.18 \\(24 LTS recommended\\), found ${version.replaceAll('.', '\\.')} at ${old}; install Node 24 \\(https://nodejs\\.org`,
        ),
      );
    }
  });
});
