// The per-request log: one JSON line per finished inference request, with the request id the
// client gave (or one generated and passed upstream), never a secret or any prompt text.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createAccessLog } from '../../src/access-log.ts';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/log.ts';
import { collect, spawnNode } from '../helpers/child-process.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';

/**
 * A client in its own process: 12 requests at once (relayed, stripped, JSON), each timed from
 * just before it is sent to its response's end; prints { request id: e2e ms }.
 */
const CLIENT = `
import http from 'node:http';
const url = process.argv[1];
const bodies = ['{"model":"m","stream":true,"stream_options":{"include_usage":true}}', '{"model":"m","stream":true}', '{"model":"m"}'];
const agent = new http.Agent({ keepAlive: true });
const out = {};
await Promise.all(Array.from({ length: 12 }, (_, i) => new Promise((resolve, reject) => {
  const id = 'e2e-' + i;
  const start = performance.now();
  const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-request-id': id } }, (res) => {
    res.resume();
    res.on('end', () => { out[id] = performance.now() - start; resolve(); });
  });
  req.on('error', reject);
  req.end(bodies[i % 3]);
})));
agent.destroy();
console.log(JSON.stringify(out));
`;

/** A log file in a directory of its own, removed after the test. */
function logFile(t: { after(fn: () => unknown): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'infermeter-log-'));
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
  return join(dir, 'access.log');
}

describe('access log', () => {
  it('writes one JSON line per finished inference request, without secrets or text', async (t) => {
    const file = logFile(t);
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) =>
      req.body.toString().includes('"stream":true')
        ? {
            status: 200,
            headers: { 'content-type': 'text/event-stream' },
            body: [
              { afterMs: 20, data: 'data: {"choices":[{"delta":{"content":"SECRET-OUTPUT"}}]}\n\n' },
              {
                afterMs: 10,
                data: 'data: {"choices":[{"delta":{"content":"x"}}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}\n\ndata: [DONE]\n\n',
              },
            ],
          }
        : { status: 500, headers: { 'content-type': 'application/json' }, body: [{ data: '{"error":{"message":"boom"}}' }] },
    );
    const app = await startProxy(t, upstream.url, { INFERMETER_ACCESS_LOG: file });
    const finished = nextFinished(app, 3);
    const stream = '{"model":"m","stream":true,"messages":[{"role":"user","content":"SECRET-PROMPT"}]}';
    const headers = { authorization: 'Bearer sk-SECRET-KEY', 'content-type': 'application/json' };
    await (
      await fetch(`${app.dataUrl}/v1/chat/completions?api-key=SECRET-QUERY`, {
        method: 'POST',
        body: stream,
        headers: { ...headers, 'x-request-id': 'client-req-1' },
      })
    ).arrayBuffer();
    await (await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: stream, headers })).arrayBuffer();
    await (await fetch(`${app.dataUrl}/v1/completions`, { method: 'POST', body: '{"model":"m","prompt":"x"}', headers })).arrayBuffer();
    await (await fetch(`${app.dataUrl}/v1/models`)).arrayBuffer(); // not inference: not logged
    await finished;
    await app.close(); // flushes the log
    const text = readFileSync(file, 'utf8');
    assert.doesNotMatch(text, /SECRET/, 'no key, query, prompt or completion text');
    const lines = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(lines.length, 3);
    const [first, second, third] = lines as [Record<string, unknown>, Record<string, unknown>, Record<string, unknown>];
    assert.equal(first.request_id, 'client-req-1');
    assert.equal(upstream.requests[0]!.headers['x-request-id'], 'client-req-1');
    assert.match(String(second.request_id), /^[0-9a-f-]{36}$/, 'generated when the client sent none');
    assert.equal(upstream.requests[1]!.headers['x-request-id'], second.request_id, 'and passed upstream');
    assert.deepEqual(
      {
        method: first.method,
        path: first.path,
        status: first.status,
        model: first.model,
        stream: first.stream,
        outcome: first.outcome,
        usage_source: first.usage_source,
        billing_basis: first.billing_basis,
        usage_injected: first.usage_injected,
        prompt_tokens: first.prompt_tokens,
        completion_tokens: first.completion_tokens,
        bytes_in: first.bytes_in,
      },
      {
        method: 'POST',
        path: '/v1/chat/completions',
        status: 200,
        model: 'm',
        stream: true,
        outcome: 'success',
        usage_source: 'upstream',
        billing_basis: 'engine',
        usage_injected: true,
        prompt_tokens: 7,
        completion_tokens: 2,
        bytes_in: Buffer.byteLength(stream),
      },
    );
    // The upstream's 20 ms timer counts whole milliseconds: it can fire up to 1 ms early.
    assert.ok(
      (first.ttft_ms as number) >= 19 && (first.e2e_ms as number) >= (first.ttft_ms as number) && (first.ttfb_ms as number) <= (first.ttft_ms as number),
      `TTFB ${first.ttfb_ms} <= TTFT ${first.ttft_ms} (>= 19) <= e2e ${first.e2e_ms} ms`,
    );
    // What the client received: the upstream's bytes minus the usage chunk it did not ask for.
    assert.equal(
      first.bytes_out,
      Buffer.byteLength('data: {"choices":[{"delta":{"content":"SECRET-OUTPUT"}}]}\n\ndata: {"choices":[{"delta":{"content":"x"}}]}\n\ndata: [DONE]\n\n'),
    );
    assert.deepEqual([third.status, third.outcome, third.failure, third.stream], [500, 'failed', 'upstream_status', false]);
  });

  it("never logs an e2e longer than the client's own for the same request", async (t) => {
    // Between the client's two stamps lie, in order: the request leaving the client, infermeter's
    // t0 (never before its bytes were readable), infermeter's end (just before its last write)
    // and the last byte reaching the client. So the logged e2e is at most the client's, on every
    // path: relayed, stripped of the injected usage chunk, and a JSON answer; 12 at once, so that
    // several arrive in one turn of infermeter's event loop and share its arrival stamp. The
    // client is another process, and infermeter's loop is held 20 ms by each token after the
    // first (an observer that busy-waits), the last one read right after the last write: an end
    // stamped once the write is done (the response's 'finish') would come after the client had
    // its last byte, and read long.
    const file = logFile(t);
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) =>
      req.body.toString().includes('"stream":true')
        ? {
            status: 200,
            headers: { 'content-type': 'text/event-stream' },
            body: [
              { afterMs: 5, data: 'data: {"choices":[{"delta":{"content":"a"}}]}\n\n' },
              {
                afterMs: 5,
                data: 'data: {"choices":[{"delta":{"content":"b"}}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\ndata: [DONE]\n\n',
              },
            ],
          }
        : {
            status: 200,
            headers: { 'content-type': 'application/json' },
            body: [{ afterMs: 5, data: '{"choices":[{"message":{"content":"ab"}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}' }],
          },
    );
    const app = await startProxy(t, upstream.url, { INFERMETER_ACCESS_LOG: file });
    app.metrics.addObserver({
      interToken() {
        const until = performance.now() + 20;
        while (performance.now() < until);
      },
    });
    const finished = nextFinished(app, 12);
    const client = spawn(process.execPath, ['--input-type=module', '-e', CLIENT, `${app.dataUrl}/v1/chat/completions`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    t.after(() => client.kill());
    let printed = '';
    client.stdout.on('data', (c: Buffer) => (printed += c.toString()));
    const [code] = (await once(client, 'exit')) as [number];
    assert.equal(code, 0, printed);
    const clientE2e = new Map(Object.entries(JSON.parse(printed) as Record<string, number>));
    await finished;
    await app.close(); // flushes the log
    const logged = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { request_id: string; e2e_ms: number; outcome: string; stream: boolean });
    assert.equal(logged.length, 12);
    assert.equal(logged.filter((l) => l.stream).length, 8);
    for (const line of logged) {
      const own = clientE2e.get(line.request_id)!;
      assert.equal(line.outcome, 'success', line.request_id);
      // The log rounds to the microsecond: up to 0.0005 ms above the figure it rounds.
      assert.ok(line.e2e_ms <= own + 0.0005, `${line.request_id}: logged e2e ${line.e2e_ms} ms > the client's ${own} ms`);
    }
  });

  it('drops and counts lines when the writer falls behind, instead of buffering without bound', async () => {
    let dropped = 0;
    const written: string[] = [];
    let firstWrite!: () => void;
    const wroteOnce = new Promise<void>((resolve) => (firstWrite = resolve));
    // A writer that accepts data but never finishes writing it: its backlog only grows.
    const stuck = new Writable({
      highWaterMark: 1,
      write(chunk: Buffer, _e, _done) {
        written.push(chunk.toString());
        firstWrite();
      },
    });
    const log = createAccessLog({ target: 'test', maxPendingBytes: 2000, dropped: () => dropped++, stream: stuck });
    const record = {
      time: 't',
      request_id: 'r',
      method: 'POST',
      path: '/v1/completions',
      status: 200,
      model: 'm',
      stream: false,
      outcome: 'success',
      failure: undefined,
      cancel_phase: undefined,
      ttfb_ms: 1,
      ttft_ms: undefined,
      tpot_ms: undefined,
      e2e_ms: 2,
      prompt_tokens: 1,
      completion_tokens: 1,
      usage_source: 'upstream',
      billing_basis: 'engine',
      usage_injected: false,
      bytes_in: 1,
      bytes_out: 1,
    };
    for (let i = 0; i < 10; i++) log.write(record);
    await wroteOnce; // the batch interval passed: what the bound let in went to the writer in one write
    const firstBatch = written[0]!.split('\n').length - 1;
    assert.deepEqual([written.length, firstBatch + dropped], [1, 10], `one write of ${firstBatch} lines, ${dropped} dropped`);
    for (let i = 10; i < 100; i++) log.write(record);
    assert.ok(dropped > 50, `dropped ${dropped}`);
    assert.ok(written.join('').length <= 2000 + JSON.stringify(record).length * 10, 'what was accepted stayed within the bound');
  });

  it('that cannot be opened stops the start, naming INFERMETER_ACCESS_LOG and the OS error', async (t) => {
    const missing = join(logFile(t), '..', 'no-such-dir', 'access.log');
    assert.throws(
      () => loadConfig({ INFERMETER_ACCESS_LOG: missing }),
      (e: unknown) =>
        e instanceof ConfigError &&
        /INFERMETER_ACCESS_LOG: expected stdout, off, or a file infermeter can append to \(opening it failed: ENOENT: no such file or directory/.test(
          e.message,
        ),
    );
    const dir = join(logFile(t), '..');
    assert.throws(() => loadConfig({ INFERMETER_ACCESS_LOG: dir }), /INFERMETER_ACCESS_LOG: .*EISDIR/);
    // The command: exit 2 and the message, before anything listens.
    const cli = spawnNode(t, [fileURLToPath(new URL('../../bin/infermeter.js', import.meta.url))], {
      INFERMETER_UPSTREAM: 'http://127.0.0.1:9',
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_ACCESS_LOG: missing,
    });
    const [stderr, [code]] = await Promise.all([collect(cli.stderr), once(cli, 'exit')]);
    assert.equal(code, 2);
    assert.match(stderr, /INFERMETER_ACCESS_LOG: .*ENOENT/);
    assert.doesNotMatch(stderr, /infermeter started/);
  });

  it('whose writes fail later says so once in the log and counts every line lost', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond(() => ({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: [{ data: '{"usage":{"prompt_tokens":1,"completion_tokens":1}}' }],
    }));
    const warnings: Array<Record<string, unknown>> = [];
    let warned!: () => void;
    const firstWarning = new Promise<void>((resolve) => (warned = resolve));
    const log = createLogger('warn', (line) => {
      const parsed = JSON.parse(line) as Record<string, unknown>;
      if (/access log/.test(String(parsed.msg))) {
        warnings.push(parsed);
        warned();
      }
    });
    // /dev/full opens, and every write to it fails with ENOSPC: a disk that filled up.
    const app = await startProxy(t, upstream.url, { INFERMETER_ACCESS_LOG: '/dev/full' }, { log });
    const send = async (n: number): Promise<void> => {
      const finished = nextFinished(app, n);
      for (let i = 0; i < n; i++) await (await fetch(`${app.dataUrl}/v1/completions`, { method: 'POST', body: '{"model":"m","prompt":"x"}' })).arrayBuffer();
      await finished;
    };
    await send(3);
    await firstWarning; // the batch was written and failed
    await send(4); // dropped as they come: the file is gone for good
    assert.equal((await scrape(app)).value('infermeter_access_log_dropped_total', {}), 7);
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]!.variable, 'INFERMETER_ACCESS_LOG');
    assert.equal(warnings[0]!.path, '/dev/full');
    assert.match(String(warnings[0]!.error), /^ENOSPC /);
  });
});
