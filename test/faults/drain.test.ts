// Graceful drain, on the real CLI process: SIGTERM turns /ready to 503 at once and stops new
// connections, a stream in flight finishes whole, /metrics answers throughout, and the process
// exits 0; past the drain timeout what is left is cut; a second signal exits at once.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import http, { type ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { childEnv } from '../helpers/child-process.ts';
import { readToEnd, startHeldUpstream, type HeldUpstream } from '../helpers/held-upstream.ts';

const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
const SSE = { 'content-type': 'text/event-stream' };
const event = (content: string) => `data: {"choices":[{"index":0,"delta":{"content":"${content}"}}]}\n\n`;

interface Running {
  readonly child: ChildProcessWithoutNullStreams;
  readonly urls: { data: string; management: string; metrics: string };
  /** Resolves with the first log line (JSON) whose msg matches. */
  logged(msg: RegExp): Promise<Record<string, unknown>>;
  readonly exited: Promise<[number | null, NodeJS.Signals | null]>;
}

/** The README's way to run infermeter from a clone: `npm start` in its folder. */
const NPM_START = { command: ['npm', 'start'], cwd: fileURLToPath(new URL('../..', import.meta.url)) };

async function startCli(
  t: TestContext,
  upstream: string,
  env: Record<string, string>,
  detached = false,
  how = { command: [process.execPath, CLI], cwd: process.cwd() },
): Promise<Running> {
  const child = spawn(how.command[0]!, how.command.slice(1), {
    // detached: a process group of its own, to signal it whole as systemd or Ctrl-C do.
    detached,
    cwd: how.cwd,
    env: childEnv({
      HOME: process.env.HOME ?? '',
      npm_config_update_notifier: 'false',
      INFERMETER_UPSTREAM: upstream,
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_UPSTREAM_METRICS: 'off',
      ...env,
    }),
  });
  t.after(() => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    if (detached) process.kill(-child.pid!, 'SIGKILL');
    else child.kill('SIGKILL');
  });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  const lines: Array<Record<string, unknown>> = [];
  const watchers: Array<{ msg: RegExp; resolve: (line: Record<string, unknown>) => void }> = [];
  let buffered = '';
  child.stderr.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    let nl: number;
    while ((nl = buffered.indexOf('\n')) !== -1) {
      const text = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (!text.startsWith('{')) continue; // npm's own lines, around infermeter's JSON ones
      const line = JSON.parse(text) as Record<string, unknown>;
      lines.push(line);
      for (const w of watchers.splice(0)) w.msg.test(String(line.msg)) ? w.resolve(line) : watchers.push(w);
    }
  });
  const logged = (msg: RegExp) => {
    const seen = lines.find((l) => msg.test(String(l.msg)));
    return seen !== undefined ? Promise.resolve(seen) : new Promise<Record<string, unknown>>((resolve) => watchers.push({ msg, resolve }));
  };
  const started = await Promise.race([logged(/^infermeter started$/), exited.then(() => assert.fail('infermeter exited at start'))]);
  return { child, urls: started as unknown as Running['urls'], logged, exited };
}

/** What is left of a stream, to its clean end. */
async function restOf(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  let rest = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return rest;
    rest += Buffer.from(value).toString();
  }
}

/** A streaming request whose first event has reached the client, and the upstream's response. */
async function streamInFlight(t: TestContext, app: Running, upstream: HeldUpstream): Promise<{ response: Promise<Response>; upstreamRes: ServerResponse }> {
  const response = fetch(`${app.urls.data}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' });
  // Held to the test's end: fetch cancels the body of a Response collected as garbage, which
  // ended a stream a test that drops the result wants in flight (a drain then done, exit 0).
  t.after(() => response.then((res) => res.body?.cancel()).catch(() => {}));
  const upstreamRes = await upstream.next();
  upstreamRes.writeHead(200, SSE);
  upstreamRes.write(event('a'));
  return { response, upstreamRes };
}

/** npm is on the PATH (everywhere npm test runs); else the test is skipped, but fails under CI. */
function hasNpm(t: TestContext): boolean {
  if (spawnSync('npm', ['--version']).status === 0) return true;
  if (process.env.CI) assert.fail('npm is not on the PATH');
  t.skip('npm is not on the PATH');
  return false;
}

/** The one child process of `pid` (Linux /proc). */
function childOf(pid: number): number {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  assert.equal(children.length, 1, `children of ${pid}: ${children.join(' ')}`);
  return children[0]!;
}

/** Every port the process listened on can be bound again. */
async function portsFree(app: Running): Promise<void> {
  for (const url of [app.urls.data, app.urls.management, app.urls.metrics]) {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(Number(new URL(url).port), '127.0.0.1', resolve);
    });
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

// Each test has its own process (or npm and its node) and upstream, and waits on them: side by side.
describe('graceful drain', { concurrency: true }, () => {
  it('SIGTERM: not ready at once, no new connections, the stream in flight finishes whole, exit 0', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startCli(t, upstream.url, { INFERMETER_DRAIN_TIMEOUT_MS: '30000' });
    // One request finished before the signal: its metrics must stay visible while draining.
    const before = fetch(`${app.urls.data}/v1/chat/completions`, { method: 'POST', body: '{"model":"m"}' });
    (await upstream.next()).writeHead(200, { 'content-type': 'application/json' }).end('{"usage":{"prompt_tokens":1,"completion_tokens":1}}');
    await (await before).text();
    const { response, upstreamRes } = await streamInFlight(t, app, upstream);
    const reader = (await response).body!.getReader();
    assert.equal(Buffer.from((await reader.read()).value!).toString(), event('a'));
    // A connection that never sends a request (a client's spare one) must not hold the drain.
    const spare = connect(Number(new URL(app.urls.data).port), '127.0.0.1');
    spare.on('error', () => {});
    await once(spare, 'connect');
    const spareClosed = once(spare, 'close');

    app.child.kill('SIGTERM');
    await app.logged(/^draining/);
    await spareClosed;
    assert.equal((await fetch(`${app.urls.management}/ready`)).status, 503, 'a load balancer stops sending');
    await assert.rejects(fetch(`${app.urls.data}/v1/models`), 'new connections are refused');
    const metrics = await (await fetch(app.urls.metrics)).text();
    assert.match(metrics, /request_success_total\{model_name="m"\} 1/, 'the finished request is still counted');
    assert.match(metrics, /num_requests_running\{model_name="m"\} 1/, 'the stream is still in flight');

    upstreamRes.end(event('b') + 'data: [DONE]\n\n');
    const rest = await restOf(reader);
    assert.equal(rest, event('b') + 'data: [DONE]\n\n', 'the stream finished whole');
    const drained = await app.logged(/^drained/);
    assert.deepEqual([drained.level, drained.msg, drained.timeout_ms], ['info', 'drained: every request in flight finished', 30000]);
    assert.deepEqual(await app.exited, [0, null]);
  });

  it("a kept-alive client's connection is closed by infermeter once its response ends: the drain does not wait for the client", async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startCli(t, upstream.url, { INFERMETER_DRAIN_TIMEOUT_MS: '60000' });
    // node:http's agent keeps an idle connection open as long as the server does (fetch's client
    // closes its own after 4 s, which would end the drain whatever infermeter did).
    const agent = new http.Agent({ keepAlive: true });
    t.after(() => agent.destroy());
    const answered = new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request(`${app.urls.data}/v1/chat/completions`, { method: 'POST', agent }, resolve);
      req.on('error', reject);
      req.end('{"model":"m","stream":true}');
    });
    const upstreamRes = await upstream.next();
    upstreamRes.writeHead(200, SSE);
    upstreamRes.write(event('a'));
    const res = await answered;
    const socket = res.socket;
    const socketClosed = once(socket, 'close');
    app.child.kill('SIGTERM');
    await app.logged(/^draining/);
    upstreamRes.end('data: [DONE]\n\n');
    res.resume();
    await once(res, 'end');
    await socketClosed;
    const ended = await app.logged(/^(drained|drain timed out)/);
    assert.equal(ended.msg, 'drained: every request in flight finished', 'infermeter closed the connection, not its drain timeout');
    assert.deepEqual(await app.exited, [0, null]);
  });

  it('past the drain timeout the streams left are cut and the process exits 0', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startCli(t, upstream.url, { INFERMETER_DRAIN_TIMEOUT_MS: '300' });
    const { response } = await streamInFlight(t, app, upstream);
    const res = await response;
    app.child.kill('SIGTERM');
    const got = await readToEnd(res);
    assert.deepEqual([got.text, got.clean], [event('a'), false]);
    const timedOut = await app.logged(/^drain timed out/);
    assert.deepEqual([timedOut.level, timedOut.requests_cut, timedOut.timeout_ms], ['warn', 1, 300]);
    assert.ok((timedOut.duration_ms as number) >= 300 - 1, `drained after ${String(timedOut.duration_ms)} ms, no sooner than the timeout`);
    assert.deepEqual(await app.exited, [0, null]);
  });

  it('with several workers, a signal to the whole process group still drains: the workers wait for the primary', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startCli(t, upstream.url, { INFERMETER_DRAIN_TIMEOUT_MS: '30000', INFERMETER_WORKERS: '2' }, true);
    const { response, upstreamRes } = await streamInFlight(t, app, upstream);
    const reader = (await response).body!.getReader();
    assert.equal(Buffer.from((await reader.read()).value!).toString(), event('a'));
    process.kill(-app.child.pid!, 'SIGTERM');
    await app.logged(/^draining/);
    assert.equal((await fetch(`${app.urls.management}/ready`)).status, 503);
    upstreamRes.end(event('b') + 'data: [DONE]\n\n');
    const rest = await restOf(reader);
    assert.equal(rest, event('b') + 'data: [DONE]\n\n', 'the stream finished whole');
    await app.logged(/^drained: every request in flight finished$/); // a worker's line
    assert.deepEqual(await app.exited, [0, null]);
  });

  it('npm start, as the README runs it: SIGTERM to npm drains the stream in flight, npm exits 0, node is gone, the ports are free', async (t) => {
    if (!hasNpm(t)) return;
    const upstream = await startHeldUpstream(t);
    const app = await startCli(t, upstream.url, { INFERMETER_DRAIN_TIMEOUT_MS: '30000' }, true, NPM_START);
    const node = childOf(app.child.pid!);
    assert.match(
      readFileSync(`/proc/${node}/cmdline`, 'utf8'),
      /node\0--max-semi-space-size=32\0--initial-heap-size=64\0bin\/infermeter\.js/,
      "npm's child is node itself (its script execs node)",
    );
    const { response, upstreamRes } = await streamInFlight(t, app, upstream);
    const reader = (await response).body!.getReader();
    assert.equal(Buffer.from((await reader.read()).value!).toString(), event('a'));

    process.kill(app.child.pid!, 'SIGTERM'); // a supervisor that signals the process it started
    await app.logged(/^draining/);
    assert.equal((await fetch(`${app.urls.management}/ready`)).status, 503, 'node got the signal');
    upstreamRes.end(event('b') + 'data: [DONE]\n\n');
    assert.equal(await restOf(reader), event('b') + 'data: [DONE]\n\n', 'the stream finished whole');
    assert.deepEqual(await app.exited, [0, null], 'npm exits 0 after node');
    assert.throws(() => process.kill(node, 0), /ESRCH/, 'no node left behind');
    await portsFree(app);
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`npm start under ${signal} to its whole process group (systemd's default, Ctrl-C): node hears it from npm too, and drains once`, async (t) => {
      if (!hasNpm(t)) return;
      const upstream = await startHeldUpstream(t);
      const app = await startCli(t, upstream.url, { INFERMETER_DRAIN_TIMEOUT_MS: '30000' }, true, NPM_START);
      const { response, upstreamRes } = await streamInFlight(t, app, upstream);
      const reader = (await response).body!.getReader();
      assert.equal(Buffer.from((await reader.read()).value!).toString(), event('a'));
      process.kill(-app.child.pid!, signal); // npm forwards it to node, which also gets it directly
      await app.logged(/^draining/);
      upstreamRes.end(event('b') + 'data: [DONE]\n\n');
      assert.equal(await restOf(reader), event('b') + 'data: [DONE]\n\n', 'the stream finished whole, not cut by the repeat');
      assert.deepEqual(await app.exited, [0, null]);
      await portsFree(app);
    });
  }

  it("the same signal again a second later is an operator's second: it exits at once", async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startCli(t, upstream.url, { INFERMETER_DRAIN_TIMEOUT_MS: '600000' });
    await streamInFlight(t, app, upstream);
    app.child.kill('SIGTERM');
    app.child.kill('SIGTERM'); // delivered twice (a forwarder and the group): still one drain
    await app.logged(/^draining/);
    // The window in which a repeat counts as the same delivery is the behaviour under test.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    assert.equal(app.child.exitCode, null, 'still draining after the repeat');
    app.child.kill('SIGTERM');
    assert.deepEqual(await app.exited, [1, null]);
  });

  it('a second signal exits at once', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startCli(t, upstream.url, { INFERMETER_DRAIN_TIMEOUT_MS: '600000' });
    await streamInFlight(t, app, upstream);
    app.child.kill('SIGTERM');
    await app.logged(/^draining/);
    app.child.kill('SIGINT');
    assert.deepEqual(await app.exited, [1, null]);
  });
});
