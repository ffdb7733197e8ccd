// Limits, provoked with sockets: slow clients and silent upstreams are cut by their timeouts, a
// request past the total timeout is ended, and the concurrency limit queues then refuses.
import assert from 'node:assert/strict';
import type { IncomingMessage, Server } from 'node:http';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { readToEnd, startHeldUpstream } from '../helpers/held-upstream.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';

const SSE = { 'content-type': 'text/event-stream' };
const event = (content: string) => `data: {"choices":[{"index":0,"delta":{"content":"${content}"}}]}\n\n`;

/** Resolves with the next `n` requests the server reads (after its own handler has run). */
function requestsSeen(server: Server, n: number): Promise<IncomingMessage[]> {
  const seen: IncomingMessage[] = [];
  return new Promise((resolve) => {
    const on = (req: IncomingMessage) => {
      seen.push(req);
      if (seen.length < n) return;
      server.off('request', on);
      resolve(seen);
    };
    server.on('request', on);
  });
}

describe('limits', () => {
  it('a client that sends its headers too slowly (slowloris) gets 408 and is counted; others are served', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startProxy(t, upstream.url, { INFERMETER_HEADERS_TIMEOUT_MS: '200', INFERMETER_REQUEST_TIMEOUT_MS: '200' });
    const { port } = new URL(app.dataUrl);
    const socket = connect(Number(port), '127.0.0.1');
    let answer = '';
    socket.on('data', (c: Buffer) => (answer += c.toString()));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
    // One header byte at a time: each keeps the socket busy, but the headers never complete.
    const drip = setInterval(() => socket.writable && socket.write('X'), 20);
    t.after(() => clearInterval(drip));
    await closed;
    clearInterval(drip);
    assert.match(answer, /^HTTP\/1\.1 408 Request Timeout\r\n/);
    assert.equal(upstream.held.length, 0, 'nothing reached the upstream');
    const m = await scrape(app);
    assert.equal(m.value('infermeter_client_errors_total', { kind: 'timeout' }), 1);
    assert.equal(m.series('request_received_total').length, 0, 'not an inference request');

    // Not HTTP at all: 400, counted.
    const junk = connect(Number(port), '127.0.0.1');
    let junkAnswer = '';
    junk.on('data', (c: Buffer) => (junkAnswer += c.toString()));
    junk.write('\u0000\u0001 hello\r\n\r\n');
    await new Promise<void>((resolve) => junk.on('close', () => resolve()));
    assert.match(junkAnswer, /^HTTP\/1\.1 400 Bad Request\r\n/);
    assert.equal((await scrape(app)).value('infermeter_client_errors_total', { kind: 'malformed' }), 1);

    // A connection that sends nothing at all is closed after the headers timeout too.
    const silent = connect(Number(port), '127.0.0.1');
    let silentAnswer = '';
    silent.on('data', (c: Buffer) => (silentAnswer += c.toString()));
    await new Promise<void>((resolve) => silent.on('close', () => resolve()));
    assert.match(silentAnswer, /^HTTP\/1\.1 408 Request Timeout\r\n/);

    const served = fetch(`${app.dataUrl}/v1/models`);
    await upstream.arrived(1);
    upstream.held[0]!.res.end('{"data":[]}');
    assert.equal(await (await served).text(), '{"data":[]}');
  });

  it('an upstream silent before its headers: 504 with an OpenAI-shaped error, counted as failed', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startProxy(t, upstream.url, { INFERMETER_UPSTREAM_IDLE_TIMEOUT_MS: '200' });
    const finished = nextFinished(app, 1);
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' });
    assert.equal(res.status, 504);
    const body = (await res.json()) as { error: { code: string; type: string } };
    assert.equal(body.error.code, 'upstream_timeout');
    await upstream.held[0]!.closed; // the upstream request was given up, so the engine stops
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.failure, sample!.status], ['failed', 'upstream_timeout', 504]);
    const m = await scrape(app);
    assert.equal(m.value('request_failed_total', { model_name: 'm' }), 1);
    assert.equal(m.value('infermeter_upstream_errors_total', { kind: 'upstream_timeout' }), 1);
    assert.equal(m.value('num_requests_running', { model_name: 'm' }), 0);
  });

  it('an upstream silent mid-stream: the client keeps what was sent, the response is cut, counted as failed', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startProxy(t, upstream.url, { INFERMETER_UPSTREAM_IDLE_TIMEOUT_MS: '200' });
    const finished = nextFinished(app, 1);
    const pending = fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' });
    await upstream.arrived(1);
    const { res: upstreamRes, closed } = upstream.held[0]!;
    upstreamRes.writeHead(200, SSE);
    upstreamRes.write(event('a'));
    const got = await readToEnd(await pending);
    assert.deepEqual([got.text, got.clean], [event('a'), false]);
    await closed;
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.failure], ['failed', 'upstream_timeout']);
    assert.ok(sample!.ttft !== undefined, 'its TTFT is kept');
  });

  it('a request past the total timeout is ended even while the upstream keeps streaming', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startProxy(t, upstream.url, { INFERMETER_TOTAL_TIMEOUT_MS: '300' });
    const finished = nextFinished(app, 1);
    const pending = fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' });
    await upstream.arrived(1);
    const { res: upstreamRes, closed } = upstream.held[0]!;
    upstreamRes.writeHead(200, SSE);
    let sent = '';
    // A generation that would go on for 10 s: one event every 20 ms, bounded.
    let n = 0;
    const tick = setInterval(() => {
      if (upstreamRes.destroyed || n++ > 500) return clearInterval(tick);
      const e = event(String(n));
      sent += e;
      upstreamRes.write(e);
    }, 20);
    t.after(() => clearInterval(tick));
    const got = await readToEnd(await pending);
    await closed;
    clearInterval(tick);
    assert.equal(got.clean, false, 'the client sees a cut response, not a complete one');
    assert.ok(got.text.length > 0 && sent.startsWith(got.text), 'what the client got is a prefix of what was sent');
    assert.ok(n < 500, 'the upstream was stopped long before it finished');
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.failure], ['failed', 'upstream_timeout']);
  });

  it('at most N in flight, 2N waiting in order, the rest refused at once with 503 and counted', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startProxy(t, upstream.url, { INFERMETER_MAX_CONCURRENCY: '1' });
    const send = (i: number) => fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: `{"model":"m","n":${i}}` });
    const first = send(0);
    await upstream.arrived(1);
    // Both queued requests reach the proxy before the fourth is sent.
    const seen = requestsSeen(app.dataServer!, 2);
    const queued = [send(1), send(2)];
    await seen;
    const refused = await send(3);
    assert.equal(refused.status, 503);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'overloaded');
    assert.equal(upstream.held.length, 1, 'only one request at the upstream');
    // Each answer lets the next waiting request through, in arrival order.
    for (let i = 0; i < 3; i++) {
      await upstream.arrived(i + 1);
      assert.equal(upstream.held.length, i + 1);
      assert.equal(JSON.parse(upstream.held[i]!.body).n, i);
      upstream.held[i]!.res.writeHead(200, { 'content-type': 'application/json' }).end(`{"i":${i}}`);
    }
    const answers = await Promise.all([first, ...queued].map(async (r) => (await r).text()));
    assert.deepEqual(answers, ['{"i":0}', '{"i":1}', '{"i":2}']);
    const m = await scrape(app);
    assert.equal(m.value('infermeter_requests_rejected_total', { reason: 'concurrency' }), 1);
    assert.equal(m.value('request_received_total', { model_name: 'm' }), 3, 'the refused one never reached the engine');
    assert.equal(m.value('request_success_total', { model_name: 'm' }), 3);
  });

  it('a waiting client that leaves gives up its place', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startProxy(t, upstream.url, { INFERMETER_MAX_CONCURRENCY: '1' });
    const send = (i: number, signal?: AbortSignal) => fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: `{"model":"m","n":${i}}`, signal });
    const first = send(0);
    await upstream.arrived(1);
    const leaving = new AbortController();
    const seen = requestsSeen(app.dataServer!, 1);
    const gone = send(1, leaving.signal).catch(() => 'aborted');
    const left = (await seen)[0]!;
    leaving.abort();
    assert.equal(await gone, 'aborted');
    await new Promise((resolve) => left.socket.once('close', resolve));
    const next = send(2);
    upstream.held[0]!.res.end('{}');
    await first;
    await upstream.arrived(2);
    assert.equal(JSON.parse(upstream.held[1]!.body).n, 2, 'the one that left was skipped');
    upstream.held[1]!.res.end('{}');
    assert.equal((await next).status, 200);
  });
});
