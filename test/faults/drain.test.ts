// Graceful drain, on the real CLI process: SIGTERM turns /ready to 503 at once and stops new
// connections, a stream in flight finishes whole, /metrics answers throughout, and the process
// exits 0; past the drain timeout what is left is cut; a second signal exits at once.
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
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

async function startCli(t: TestContext, upstream: string, env: Record<string, string>, detached = false): Promise<Running> {
  const child = spawn(process.execPath, [CLI], {
    // detached: a process group of its own, to signal it whole as systemd or Ctrl-C do.
    detached,
    env: { PATH: process.env.PATH ?? '', INFERMETER_UPSTREAM: upstream, INFERMETER_PORT: '0', INFERMETER_MANAGEMENT_PORT: '0', INFERMETER_METRICS_PORT: '0', INFERMETER_UPSTREAM_METRICS: 'off', ...env },
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
    let nl;
    while ((nl = buffered.indexOf('\n')) !== -1) {
      const line = JSON.parse(buffered.slice(0, nl)) as Record<string, unknown>;
      buffered = buffered.slice(nl + 1);
      lines.push(line);
      for (const w of watchers.splice(0)) (w.msg.test(String(line.msg)) ? w.resolve(line) : watchers.push(w));
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
async function streamInFlight(app: Running, upstream: HeldUpstream): Promise<{ response: Promise<Response>; upstreamRes: ServerResponse }> {
  const response = fetch(`${app.urls.data}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' });
  const upstreamRes = await upstream.next();
  upstreamRes.writeHead(200, SSE);
  upstreamRes.write(event('a'));
  return { response, upstreamRes };
}

describe('graceful drain', () => {
  it('SIGTERM: not ready at once, no new connections, the stream in flight finishes whole, exit 0', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startCli(t, upstream.url, { INFERMETER_DRAIN_TIMEOUT_MS: '30000' });
    // One request finished before the signal: its metrics must stay visible while draining.
    const before = fetch(`${app.urls.data}/v1/chat/completions`, { method: 'POST', body: '{"model":"m"}' });
    (await upstream.next()).writeHead(200, { 'content-type': 'application/json' }).end('{"usage":{"prompt_tokens":1,"completion_tokens":1}}');
    await (await before).text();
    const { response, upstreamRes } = await streamInFlight(app, upstream);
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

  it('past the drain timeout the streams left are cut and the process exits 0', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startCli(t, upstream.url, { INFERMETER_DRAIN_TIMEOUT_MS: '300' });
    const { response } = await streamInFlight(app, upstream);
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
    const { response, upstreamRes } = await streamInFlight(app, upstream);
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

  it('a second signal exits at once', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startCli(t, upstream.url, { INFERMETER_DRAIN_TIMEOUT_MS: '600000' });
    await streamInFlight(app, upstream);
    app.child.kill('SIGTERM');
    await app.logged(/^draining/);
    app.child.kill('SIGINT');
    assert.deepEqual(await app.exited, [1, null]);
  });
});
