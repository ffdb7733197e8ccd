// Bad input and broken peers, provoked for real with sockets: the proxy forwards what it can
// byte for byte, keeps serving, returns its in-flight gauges to zero and counts what happened.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import { gzipSync } from 'node:zlib';
import type { Infermeter } from '../../src/app.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream, type ReplayUpstream } from '../helpers/replay-upstream.ts';
import { freePort, listen } from '../helpers/listen.ts';

const SSE = { 'content-type': 'text/event-stream' };
const event = (content: string) => `data: {"choices":[{"index":0,"delta":{"content":"${content}"}}]}\n\n`;

async function setup(t: TestContext, env: Record<string, string> = {}): Promise<{ upstream: ReplayUpstream; app: Infermeter }> {
  const upstream = await startReplayUpstream();
  t.after(() => upstream.close());
  const app = await startProxy(t, upstream.url, env);
  return { upstream, app };
}

async function stillServes(app: Infermeter, upstream: ReplayUpstream): Promise<void> {
  upstream.respond(() => ({
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: [{ data: '{"usage":{"prompt_tokens":1,"completion_tokens":1}}' }],
  }));
  const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"after"}' });
  assert.equal(res.status, 200);
  assert.equal(await res.text(), '{"usage":{"prompt_tokens":1,"completion_tokens":1}}');
}

/** Nothing left in flight, and every received request has exactly one outcome. */
function assertNothingInFlight(m: Awaited<ReturnType<typeof scrape>>): void {
  for (const { labels, value: received } of m.series('request_received_total')) {
    assert.equal(m.value('num_requests_waiting', labels), 0, `waiting for ${labels.model_name}`);
    assert.equal(m.value('num_requests_running', labels), 0, `running for ${labels.model_name}`);
    const outcomes = ['request_success_total', 'request_failed_total', 'request_cancelled_total'].map((n) => m.sum(n, labels)!);
    assert.equal(outcomes[0]! + outcomes[1]! + outcomes[2]!, received, `outcomes of ${labels.model_name}`);
  }
}

describe('faults and bad input', () => {
  it('a client that disconnects mid-stream cancels the upstream request and is counted as cancelled', async (t) => {
    const { upstream, app } = await setup(t);
    upstream.respond(() => ({ status: 200, headers: SSE, body: [{ data: event('a') }, { afterMs: 10, data: event('b') }], end: 'hang' }));
    const finished = nextFinished(app, 1);
    await new Promise<void>((resolve, reject) => {
      const req = request(`${app.dataUrl}/v1/chat/completions`, { method: 'POST' }, (res) => {
        res.once('data', () => {
          req.destroy(); // the client goes away after its first token
          resolve();
        });
      });
      req.on('error', () => {});
      req.end('{"model":"m","stream":true}');
      req.on('close', resolve);
      setTimeout(() => reject(new Error('no data')), 5000).unref();
    });
    assert.equal(await upstream.requests[0]!.abandoned, true, 'the upstream connection was closed: the engine stops generating');
    const [sample] = await finished;
    assert.equal(sample!.outcome, 'cancelled');
    assert.ok(sample!.ttft !== undefined, 'its TTFT is kept');
    const m = await scrape(app);
    assert.equal(m.value('request_cancelled_total', { model_name: 'm', phase: 'decoding' }), 1);
    assert.equal(m.value('request_cancelled_total', { model_name: 'm', phase: 'before_first_token' }), 0);
    assert.equal(m.value('request_failed_total', { model_name: 'm' }), 0);
    assert.equal(sample!.usageSource, 'events', 'the tokens it did receive are kept');
    assert.equal(m.value('generation_tokens_total', { model_name: 'm' }), sample!.tokenEvents);
    assert.equal(m.value('request_success_total', { model_name: 'm' }), 0);
    assert.equal(m.value('time_to_first_token_seconds_count', { model_name: 'm' }), 1);
    assertNothingInFlight(m);
    await stillServes(app, upstream);
  });

  for (const inject of ['off', 'on'])
    it(`a client that stops reading pauses the upstream (back-pressure), then gets every byte (usage injection ${inject})`, async (t) => {
      // 48 MiB of events, far more than the socket buffers on the way hold (a few MiB on loopback).
      const piece = Buffer.from(event('x'.repeat(1000)));
      const pieces = Math.ceil((48 * 1024 * 1024) / piece.length);
      let written = 0;
      const server = (await import('node:http')).createServer((req, res) => {
        req.resume();
        res.writeHead(200, SSE);
        let i = 0;
        const more = (): void => {
          while (i < pieces) {
            i++;
            written += piece.length;
            if (!res.write(piece)) return void res.once('drain', more);
          }
          res.end();
        };
        more();
      });
      const app = await startProxy(t, (await listen(t, server)).url, { INFERMETER_INJECT_USAGE: inject });
      const finished = nextFinished(app, 1);
      const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
        const req = request(`${app.dataUrl}/v1/chat/completions`, { method: 'POST' }, resolve);
        req.on('error', reject);
        req.end('{"model":"m","stream":true}');
      });
      res.pause();
      // The upstream writes until the buffers between it and the paused client are full, then waits.
      let last = -1;
      for (let polls = 0; polls < 100 && written !== last; polls++) {
        last = written;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(written, last, 'the upstream stopped writing');
      assert.ok(written < 24 * 1024 * 1024, `the proxy held back the upstream (${written} bytes written while the client read nothing)`);
      let received = 0;
      res.on('data', (c: Buffer) => (received += c.length));
      res.resume();
      await new Promise((resolve) => res.on('end', resolve));
      assert.equal(received, pieces * piece.length);
      const [sample] = await finished;
      assert.deepEqual([sample!.outcome, sample!.tokenEvents], ['success', pieces]);
    });

  it('a client that disconnects while waiting for the first token is counted as cancelled', async (t) => {
    const { upstream, app } = await setup(t);
    upstream.respond(() => ({ status: 200, headers: SSE, body: [], end: 'hang' }));
    const finished = nextFinished(app, 1);
    const controller = new AbortController();
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}', signal: controller.signal });
    assert.equal(res.status, 200);
    controller.abort();
    const [sample] = await finished;
    assert.equal(sample!.outcome, 'cancelled');
    assert.equal(sample!.outputSeen, false);
    assert.equal(sample!.cancelPhase, 'before_first_token');
    assert.equal(await upstream.requests[0]!.abandoned, true);
    const m = await scrape(app);
    assert.equal(m.value('request_cancelled_total', { model_name: 'm', phase: 'before_first_token' }), 1);
    assert.equal(m.value('request_no_first_token_total', { model_name: 'm', reason: 'cancelled' }), 1);
    assert.equal(m.value('time_to_first_byte_seconds_count', { model_name: 'm' }), 1, 'the headers came: TTFB observed');
    assertNothingInFlight(m);
  });

  it('an upstream that resets mid-stream: the client gets the bytes sent so far and a broken response', async (t) => {
    const { upstream, app } = await setup(t);
    upstream.respond(() => ({ status: 200, headers: SSE, body: [{ data: event('a') }, { data: event('b') }], end: 'reset' }));
    const finished = nextFinished(app, 1);
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' });
    const reader = res.body!.getReader();
    let received = '';
    await assert.rejects(async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        received += Buffer.from(value).toString();
      }
    }, 'the response must not end cleanly');
    assert.equal(received, event('a') + event('b'));
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.failure], ['failed', 'upstream_reset']);
    const m = await scrape(app);
    assert.equal(m.value('request_failed_total', { model_name: 'm' }), 1);
    assert.equal(m.value('failed_request_perc', { model_name: 'm' }), 1);
    assert.equal(m.value('infermeter_upstream_errors_total', { kind: 'upstream_reset' }), 1);
    assertNothingInFlight(m);
    await stillServes(app, upstream);
  });

  it('an upstream that is down: 502 with an OpenAI-shaped error, counted as failed', async (t) => {
    const port = await freePort();
    const app = await startProxy(t, `http://127.0.0.1:${port}`);
    const finished = nextFinished(app, 1);
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' });
    assert.equal(res.status, 502);
    assert.equal(res.headers.get('content-type'), 'application/json');
    const body = (await res.json()) as { error: { code: string; message: string; type: string } };
    assert.equal(body.error.code, 'upstream_unreachable');
    assert.match(body.error.message, /ECONNREFUSED/);
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.failure, sample!.status], ['failed', 'upstream_unreachable', 502]);
    const m = await scrape(app);
    assert.equal(m.value('request_received_total', { model_name: 'm' }), 1);
    assert.equal(m.value('request_failed_total', { model_name: 'm' }), 1);
    assert.equal(m.value('infermeter_upstream_errors_total', { kind: 'upstream_unreachable' }), 1);
    assertNothingInFlight(m);
    // Not measured requests get the same answer.
    assert.equal((await fetch(`${app.dataUrl}/v1/models`)).status, 502);
  });

  it('a malformed JSON body is forwarded unchanged and counted under model "unknown"', async (t) => {
    const { upstream, app } = await setup(t);
    upstream.respond(() => ({
      status: 400,
      headers: { 'content-type': 'application/json' },
      body: [{ data: '{"object":"error","message":"bad json","code":400}' }],
    }));
    const body = '{"model":"m", "stream": tru';
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 400);
    assert.equal(await res.text(), '{"object":"error","message":"bad json","code":400}');
    assert.equal(upstream.requests[0]!.body.toString(), body);
    const m = await scrape(app);
    assert.equal(m.value('request_failed_total', { model_name: 'unknown' }), 1);
    assert.equal(m.value('infermeter_request_body_uninspected_total', { reason: 'invalid_json' }), 1);
    assertNothingInFlight(m);
    await stillServes(app, upstream);
  });

  it('a body that is not JSON at all is forwarded unchanged and counted', async (t) => {
    const { upstream, app } = await setup(t);
    const res = await fetch(`${app.dataUrl}/v1/completions`, {
      method: 'POST',
      body: 'model=m&prompt=hi',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(res.status, 200);
    assert.equal(upstream.requests[0]!.body.toString(), 'model=m&prompt=hi');
    const m = await scrape(app);
    assert.equal(m.value('request_received_total', { model_name: 'unknown' }), 1);
    assert.equal(m.value('infermeter_request_body_uninspected_total', { reason: 'not_object' }), 1);
  });

  it('a body over the inspection cap still reaches the upstream whole, read for its model', async (t) => {
    const { upstream, app } = await setup(t, { INFERMETER_MAX_INSPECT_BYTES: '1000' });
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(5000) }], model: 'm' });
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body });
    assert.equal(res.status, 200);
    assert.ok(upstream.requests[0]!.body.equals(Buffer.from(body)), 'not streaming: nothing to ask usage for');
    const m = await scrape(app);
    assert.equal(m.value('request_received_total', { model_name: 'm' }), 1, 'its model, named after the cap');
    assert.equal(m.sum('infermeter_request_body_uninspected_total'), 0);
  });

  it('an upstream error status is forwarded and counted as failed', async (t) => {
    const { upstream, app } = await setup(t);
    upstream.respond(() => ({
      status: 503,
      headers: { 'content-type': 'application/json', 'retry-after': '1' },
      body: [{ data: '{"error":{"message":"overloaded"}}' }],
    }));
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' });
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('retry-after'), '1');
    assert.equal(await res.text(), '{"error":{"message":"overloaded"}}');
    const m = await scrape(app);
    assert.equal(m.value('request_failed_total', { model_name: 'm' }), 1);
    assert.equal(m.value('e2e_request_latency_seconds_count', { model_name: 'm' }), undefined, 'no e2e for a failure');
  });

  it('an event larger than the parser cap is forwarded as it comes and counted; the tap stops buffering', async (t) => {
    const { upstream, app } = await setup(t, { INFERMETER_MAX_EVENT_BYTES: '1024' });
    // An event line that never ends: a parser without a cap would buffer it without bound.
    const partial = `data: {"choices":[{"index":0,"delta":{"content":"${'y'.repeat(5000)}`;
    upstream.respond(() => ({ status: 200, headers: SSE, body: [{ data: event('a') }, { data: partial }], end: 'hang' }));
    const finished = nextFinished(app, 1);
    const controller = new AbortController();
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}', signal: controller.signal });
    const reader = res.body!.getReader();
    let received = '';
    while (received.length < event('a').length + partial.length) received += Buffer.from((await reader.read()).value!).toString();
    assert.equal(received, event('a') + partial);
    const m = await scrape(app);
    assert.equal(m.value('infermeter_stream_tap_problems_total', { kind: 'event_too_large' }), 1);
    controller.abort();
    const [sample] = await finished;
    assert.equal(sample!.tokenEvents, 1);
    assert.equal(sample!.outcome, 'cancelled');
  });

  it('reads usage from a gzip-compressed answer while forwarding the compressed bytes', async (t) => {
    const { upstream, app } = await setup(t);
    const compressed = gzipSync('{"usage":{"prompt_tokens":21,"completion_tokens":5}}');
    upstream.respond(() => ({ status: 200, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: [{ data: compressed }] }));
    const finished = nextFinished(app, 1);
    const bytes = await new Promise<Buffer>((resolve, reject) => {
      const req = request(`${app.dataUrl}/v1/chat/completions`, { method: 'POST' }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(Buffer.concat(chunks)));
      });
      req.on('error', reject);
      req.end('{"model":"m"}');
    });
    assert.ok(bytes.equals(compressed));
    const [sample] = await finished;
    assert.deepEqual([sample!.promptTokens, sample!.completionTokens], [21, 5]);
  });
});
