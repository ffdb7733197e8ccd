// INFERMETER_WORKERS: the data plane in several processes sharing the port, the measurement in
// the primary. The aggregated /metrics equals the traffic exactly; a worker that dies is
// restarted, and its loss is counted, never silent.
import assert from 'node:assert/strict';
import cluster, { type Worker } from 'node:cluster';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { startClusterPrimary } from '../../src/cluster/primary.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/log.ts';
import { parseExposition } from '../helpers/exposition.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';
import { freePort } from '../helpers/listen.ts';
import { clusterEnv } from '../helpers/proxy-harness.ts';

const token = (t: string) => `data: {"choices":[{"index":0,"delta":{"content":"${t}"}}]}\n\n`;

/** One request on a connection of its own, so that the cluster hands it to the next worker. */
function send(url: string, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v1/chat/completions`, { method: 'POST', headers: { connection: 'close', 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('close', () => {
        if (!res.complete) reject(new Error('response cut off'));
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('several workers', () => {
  it('report the whole traffic exactly, and survive a worker that dies', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) => {
      const body = req.body.toString();
      if (body.includes('"hold"')) return { status: 200, headers: { 'content-type': 'text/event-stream' }, body: [{ data: token('x') }], end: 'hang' };
      if (body.includes('"bad"')) return { status: 400, headers: { 'content-type': 'application/json' }, body: [{ data: '{"error":{"message":"no"}}' }] };
      if (body.includes('"stream":true'))
        return {
          status: 200,
          headers: { 'content-type': 'text/event-stream' },
          body: [
            { afterMs: 5, data: token('a') },
            { afterMs: 5, data: token('b') + token('c') },
            { data: 'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":3}}\n\ndata: [DONE]\n\n' },
          ],
        };
      return { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{"usage":{"prompt_tokens":5,"completion_tokens":2}}' }] };
    });
    // A fixed port: with port 0, workers that all die and start again would get a new one.
    const port = String(await freePort());
    const env = clusterEnv(upstream.url, {
      INFERMETER_PORT: port,
      INFERMETER_LOG_LEVEL: 'warn',
    });
    const logs: string[] = [];
    const app = await startClusterPrimary(loadConfig(env), env, { log: createLogger('info', (l) => logs.push(l)), workers: 2 });
    t.after(() => app.close());
    assert.equal(app.workerPids().length, 2);

    // 12 streams (usage 4/3), 6 plain answers (5/2), 3 refused: 21 requests in all.
    const jobs: Array<Promise<unknown>> = [];
    for (let i = 0; i < 12; i++) jobs.push(send(app.dataUrl, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`));
    for (let i = 0; i < 6; i++) jobs.push(send(app.dataUrl, '{"model":"m"}'));
    for (let i = 0; i < 3; i++) jobs.push(send(app.dataUrl, '{"model":"bad"}'));
    await Promise.all(jobs);
    assert.ok(new Set(upstream.requests.map((r) => r.remotePort)).size >= 2, 'the requests came through more than one worker');

    let m = parseExposition(await (await fetch(app.metricsUrl!)).text());
    assert.equal(m.value('request_received_total', { model_name: 'm' }), 18);
    assert.equal(m.value('request_success_total', { model_name: 'm' }), 18);
    assert.equal(m.value('request_failed_total', { model_name: 'bad' }), 3);
    assert.equal(m.value('prompt_tokens_total', { model_name: 'm' }), 12 * 4 + 6 * 5);
    assert.equal(m.value('generation_tokens_total', { model_name: 'm' }), 12 * 3 + 6 * 2);
    assert.equal(m.value('time_to_first_token_seconds_count', { model_name: 'm' }), 12);
    assert.equal(m.value('time_per_output_token_seconds_count', { model_name: 'm' }), 12 * 2);
    assert.equal(m.value('inter_token_latency_seconds_count', { model_name: 'm' }), 12 * 2);
    assert.equal(m.value('e2e_request_latency_seconds_count', { model_name: 'm' }), 18);
    assert.equal(m.value('num_requests_running', { model_name: 'm' }), 0);
    // Every byte held for a body or an answer given back, summed over the workers.
    assert.deepEqual(
      [m.value('infermeter_held_body_bytes', { kind: 'request' }), m.value('infermeter_held_body_bytes', { kind: 'answer' })],
      [0, 0],
      'infermeter_held_body_bytes once every request ended',
    );
    const json = (await (await fetch(`${app.managementUrl}/metrics-json`)).json()) as { result: Array<{ metric: Array<{ __name__: string }>; value: string }> };
    assert.ok(Number(json.result.find((r) => r.metric[0]!.__name__ === 'TTFT')!.value) > 0, "the JSON window sees the workers' requests");

    // A worker dies with a request in flight: it is restarted and the loss is counted. The scrape
    // waits for the first token to reach the client (the tap reads it after it was sent).
    let firstToken!: () => void;
    const sawFirstToken = new Promise<void>((resolve) => (firstToken = resolve));
    const held = new Promise<void>((resolve) => {
      const req = request(
        `${app.dataUrl}/v1/chat/completions`,
        { method: 'POST', headers: { connection: 'close', 'content-type': 'application/json' } },
        (res) => {
          res.once('data', firstToken);
          res.on('error', () => undefined);
          res.on('close', resolve);
        },
      );
      req.on('error', () => resolve());
      req.end('{"model":"hold","stream":true}');
    });
    await sawFirstToken;
    const before = parseExposition(await (await fetch(app.metricsUrl!)).text());
    assert.equal(before.value('num_requests_running', { model_name: 'hold' }), 1);
    // The event-loop delay of the primary and of the workers (sent with their flush), each its
    // own series.
    const delaysBefore = before.value('infermeter_event_loop_delay_seconds_count', { process: 'workers' });
    assert.ok(delaysBefore !== undefined && delaysBefore > 0, `workers' loop-delay samples: ${delaysBefore}`);
    assert.ok((before.value('infermeter_event_loop_delay_seconds_count', { process: 'main' }) ?? 0) > 0, "the primary's own");
    for (const pid of app.workerPids()) process.kill(pid, 'SIGKILL');
    await held;
    await app.workersStarted(4);
    m = parseExposition(await (await fetch(app.metricsUrl!)).text());
    assert.equal(m.value('infermeter_worker_restarts_total'), 2);
    assert.equal(m.value('infermeter_worker_lost_requests_total'), 1);
    assert.equal(m.value('request_failed_total', { model_name: 'hold' }), 1, 'the lost request counts as failed');
    assert.equal(m.value('num_requests_running', { model_name: 'hold' }), 0, 'nothing left in flight');
    assert.equal(logs.filter((l) => l.includes('worker exited')).length, 2);
    const delaysAfter = m.value('infermeter_event_loop_delay_seconds_count', { process: 'workers' })!;
    assert.ok(delaysAfter >= delaysBefore, `the workers' samples never go back when workers are replaced: ${delaysBefore} then ${delaysAfter}`);
    const after = await send(app.dataUrl, '{"model":"m"}');
    assert.equal(after.status, 200, 'the new workers serve');
    assert.equal(parseExposition(await (await fetch(app.metricsUrl!)).text()).value('request_received_total', { model_name: 'm' }), 19);
  });

  it('a start that fails after the workers listen (the management port taken) stops them, as one process closes its data plane', async (t) => {
    // The one composition root cleans up what it started in either mode: the workers drain and exit.
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    t.after(() => taken.close());
    const forked: Worker[] = [];
    const onFork = (w: Worker) => forked.push(w);
    cluster.on('fork', onFork);
    t.after(() => {
      cluster.off('fork', onFork);
      // Whatever the outcome, no worker outlives the test.
      for (const w of forked) if (w.process.exitCode === null && w.process.signalCode === null) w.process.kill('SIGKILL');
    });
    const env = clusterEnv('http://127.0.0.1:9', { INFERMETER_MANAGEMENT_PORT: String((taken.address() as AddressInfo).port), INFERMETER_LOG_LEVEL: 'warn' });
    await assert.rejects(startClusterPrimary(loadConfig(env), env, { log: createLogger('error', () => undefined), workers: 2 }), /EADDRINUSE/);
    assert.equal(forked.length, 2, 'both workers had started');
    assert.deepEqual(
      forked.map((w) => w.process.exitCode !== null || w.process.signalCode !== null),
      [true, true],
      'every worker has exited by the time the start is refused',
    );
  });
});
