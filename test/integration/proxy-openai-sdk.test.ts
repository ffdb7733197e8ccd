// A real client (the official openai SDK, and raw fetch for byte comparisons) -> infermeter ->
// a scripted upstream replaying recorded streams with known delays. What the client receives
// must equal what the upstream sent, and /metrics must equal what the script did.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { describe, it } from 'node:test';
import OpenAI from 'openai';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { sseScript, startReplayUpstream } from '../helpers/replay-upstream.ts';
import { MINDIE_BUCKETS } from '../helpers/spec-buckets.ts';

const fixture = (name: string) => readFileSync(new URL(`../../fixtures/streams/${name}`, import.meta.url));
const VLLM = fixture('vllm-chat-usage.sse'); // 15 events, tokens at events 1..11, usage 17/11
const FIRST_MS = 150; // before event 0 (the role chunk)
const GAP_MS = 30; // between events: the first token arrives at ~180 ms, TPOT ~30 ms
const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const NONSTREAM = JSON.stringify({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1764500000,
  model: MODEL,
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 },
});

async function rawPost(url: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

describe('openai SDK through infermeter', () => {
  it('streams byte for byte and /metrics matches the script exactly', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) =>
      JSON.parse(req.body.toString()).stream
        ? sseScript(VLLM, FIRST_MS, GAP_MS)
        : {
            status: 200,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(NONSTREAM) },
            body: [{ afterMs: 40, data: NONSTREAM }],
          },
    );
    const app = await startProxy(t, upstream.url);
    const finished = nextFinished(app, 4);
    const client = new OpenAI({ baseURL: `${app.dataUrl}/v1`, apiKey: 'sk-test', maxRetries: 0 });

    // 1. Raw bytes, streamed: identical to what the upstream sent; body forwarded unchanged.
    const body = `{"model":  "${MODEL}", "stream":true,\n "stream_options":{"include_usage":true},"messages":[{"role":"user","content":"h\u00e9"}]}`;
    const raw = await rawPost(`${app.dataUrl}/v1/chat/completions`, body, { authorization: 'Bearer sk-test' });
    assert.equal(raw.status, 200);
    assert.equal(raw.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    assert.ok(raw.bytes.equals(VLLM), 'client bytes equal upstream bytes');
    assert.ok(upstream.requests[0]!.body.equals(Buffer.from(body)), 'upstream got the request body byte for byte');
    assert.equal(upstream.requests[0]!.headers.authorization, 'Bearer sk-test');

    // 2. The SDK, streamed: parses every chunk, usage at the end.
    const stream = await client.chat.completions.create({
      model: MODEL,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'hi' }],
    });
    let content = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(content, 'Hello! I’m a model — ünïcödé 🚀 done.');
    assert.deepEqual([usage?.prompt_tokens, usage?.completion_tokens], [17, 11]);

    // 3. The SDK, not streamed, and its raw bytes.
    const completion = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(completion.usage?.completion_tokens, 2);
    const rawJson = await rawPost(`${app.dataUrl}/v1/chat/completions`, JSON.stringify({ model: MODEL, messages: [] }));
    assert.equal(rawJson.bytes.toString(), NONSTREAM);
    assert.equal(rawJson.headers.get('content-length'), String(Buffer.byteLength(NONSTREAM)));

    const samples = await finished;
    assert.deepEqual(
      samples.map((s) => s.outcome),
      ['success', 'success', 'success', 'success'],
    );
    const m = await scrape(app);
    const model = { model_name: MODEL };
    assert.equal(m.value('request_received_total', model), 4);
    assert.equal(m.value('request_success_total', model), 4);
    assert.equal(m.value('request_failed_total', model), 0);
    assert.equal(m.sum('request_cancelled_total', model), 0);
    assert.equal(m.sum('request_no_first_token_total', model), 0);
    assert.equal(m.value('num_requests_waiting', model), 0);
    assert.equal(m.value('num_requests_running', model), 0);
    assert.equal(m.value('prompt_tokens_total', model), 17 * 2 + 12 * 2);
    assert.equal(m.value('generation_tokens_total', model), 11 * 2 + 2 * 2);
    assert.equal(m.value('failed_request_perc', model), 0);
    assert.ok(m.value('avg_generation_throughput_toks_per_s', model)! > 0);

    // Timings: each figure is at least what the script waits (a timer fires at most 1 ms early),
    // and /metrics holds exactly what the proxy measured for these four requests: no bound on
    // how fast this machine is.
    const streams = samples.filter((s) => s.streamed);
    assert.equal(streams.length, 2);
    for (const s of streams) {
      // First token at FIRST_MS + GAP_MS = 180 ms, 10 more tokens GAP_MS apart, 3 more events after.
      assert.ok(s.ttft! >= (FIRST_MS + GAP_MS - 1) / 1000, `TTFT ${s.ttft}`);
      // The last token (event 11) after 12 timers, each up to 1 ms early; TPOT spans first to last.
      assert.ok(s.lastToken! >= (FIRST_MS + 11 * GAP_MS - 12) / 1000, `last token at ${s.lastToken}`);
      assert.equal(s.tpot!.tokens, 10);
      assert.ok(Math.abs(s.ttft! + s.tpot!.seconds * 10 - s.lastToken!) < 1e-9, `TTFT ${s.ttft} + 10 × TPOT ${s.tpot!.seconds} = last token ${s.lastToken}`);
      assert.ok(s.ttft! < s.lastToken! && s.lastToken! < s.e2e!, `TTFT ${s.ttft} < last token ${s.lastToken} < e2e ${s.e2e}`);
      assert.ok(s.e2e! >= (FIRST_MS + 14 * GAP_MS - 15) / 1000, `e2e ${s.e2e}`);
    }
    for (const s of samples.filter((x) => !x.streamed)) assert.ok(s.e2e! >= 0.039, `non-streamed e2e ${s.e2e}`);
    const histogram = (family: string, bounds: readonly number[], values: readonly number[], weights: readonly number[] = values.map(() => 1)) => {
      const count = weights.reduce((a, b) => a + b, 0);
      const sum = values.reduce((a, v, i) => a + v * weights[i]!, 0);
      assert.equal(m.value(`${family}_count`, model), count, `${family}_count`);
      const got = m.value(`${family}_sum`, model)!;
      assert.ok(Math.abs(got - sum) < 1e-9, `${family}_sum ${got}, the samples give ${sum}`);
      for (const le of bounds) {
        const below = values.reduce((a, v, i) => a + (v <= le ? weights[i]! : 0), 0);
        assert.equal(m.value(`${family}_bucket`, { ...model, le: String(le) }), below, `${family}_bucket le=${le} (values ${values.join(', ')})`);
      }
    };
    histogram(
      'time_to_first_token_seconds',
      MINDIE_BUCKETS.time_to_first_token_seconds,
      streams.map((s) => s.ttft!),
    );
    // TPOT: per stream completion_tokens - 1 = 10 observations of the stream's mean gap.
    histogram(
      'time_per_output_token_seconds',
      MINDIE_BUCKETS.time_per_output_token_seconds,
      streams.map((s) => s.tpot!.seconds),
      streams.map((s) => s.tpot!.tokens),
    );
    histogram(
      'e2e_request_latency_seconds',
      MINDIE_BUCKETS.e2e_request_latency_seconds,
      samples.map((s) => s.e2e!),
    );
    // What the script alone decides: no first token before it was sent.
    assert.equal(m.value('time_to_first_token_seconds_bucket', { ...model, le: '0.1' }), 0);
    // Token histograms: one observation per request.
    assert.equal(m.value('request_prompt_tokens_count', model), 4);
    assert.equal(m.value('request_prompt_tokens_sum', model), 58);
    assert.equal(m.value('request_generation_tokens_bucket', { ...model, le: '10' }), 2);
    assert.equal(m.value('request_generation_tokens_bucket', { ...model, le: '50' }), 4);
  });

  it('forwards each event as soon as the upstream sends it', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    // One event, then the upstream holds the stream open: a buffering proxy would show nothing.
    upstream.respond(() => ({
      status: 200,
      headers: { 'content-type': 'text/event-stream' },
      body: [{ data: 'data: {"choices":[{"delta":{"content":"x"}}]}\n\n' }],
      end: 'hang',
    }));
    const app = await startProxy(t, upstream.url);
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' });
    const reader = res.body!.getReader();
    const first = await reader.read();
    assert.equal(Buffer.from(first.value!).toString(), 'data: {"choices":[{"delta":{"content":"x"}}]}\n\n');
    const m = await scrape(app);
    assert.equal(m.value('num_requests_running', { model_name: 'm' }), 1, 'running after its first token');
    assert.equal(m.value('time_to_first_token_seconds_count', { model_name: 'm' }), 1, 'TTFT observed while the stream goes on');
    await reader.cancel();
  });

  it('sends the head as soon as the upstream does, before any body byte, on every response path', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    // A long prefill: the upstream's head, then nothing. A proxy that held the head for the
    // first body byte would leave the client waiting here.
    upstream.respond(() => ({ status: 200, headers: { 'content-type': 'text/event-stream', 'x-upstream': 'yes' }, end: 'hang' }));
    const app = await startProxy(t, upstream.url);
    const paths = [
      ['/v1/chat/completions', '{"model":"m","stream":true}'], // usage injected: the stripped path
      ['/v1/chat/completions', '{"model":"m","stream":true,"stream_options":{"include_usage":true}}'], // the relay
      ['/v1/other', '{}'], // not measured: http-proxy-3
    ] as const;
    for (const [path, body] of paths) {
      const controller = new AbortController();
      setTimeout(() => controller.abort(new Error(`no head on ${path} ${body}`)), 3000).unref();
      const res = await fetch(`${app.dataUrl}${path}`, { method: 'POST', body, signal: controller.signal });
      assert.equal(res.status, 200, path);
      assert.equal(res.headers.get('x-upstream'), 'yes', path);
      controller.abort();
    }
  });

  it('proxies every other request untouched and unmeasured, under the upstream path prefix', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) => ({
      status: 200,
      headers: { 'content-type': 'application/json', 'x-upstream': 'yes' },
      body: [{ data: JSON.stringify({ path: req.url, method: req.method }) }],
    }));
    const app = await startProxy(t, `${upstream.url}/serving/llama`);
    const models = await fetch(`${app.dataUrl}/v1/models?limit=1`);
    assert.equal(models.headers.get('x-upstream'), 'yes');
    assert.deepEqual(await models.json(), { path: '/serving/llama/v1/models?limit=1', method: 'GET' });
    const put = await fetch(`${app.dataUrl}/anything/else`, { method: 'PUT', body: 'x' });
    assert.deepEqual(await put.json(), { path: '/serving/llama/anything/else', method: 'PUT' });
    const chat = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m"}' });
    assert.deepEqual(await chat.json(), { path: '/serving/llama/v1/chat/completions', method: 'POST' });
    const m = await scrape(app);
    assert.deepEqual(m.series('request_received_total'), [{ labels: { model_name: 'm' }, value: 1 }]);
  });

  // The pass-through route once wrote the head from Node's headers object, through http-proxy-3:
  // every name in lower case, repeated fields joined. Now both routes write it as it came.
  it("writes the upstream's head as it came on both routes: names' spelling, order, repeated fields", async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond(() => ({
      status: 200,
      headers: { 'Content-Type': 'application/json', 'X-Upstream-Case': 'Yes', 'X-Multi': ['a', 'b'], 'set-cookie': ['c=1', 'd=2'], 'Keep-Alive': 'timeout=5' },
      body: [{ data: '{}' }],
    }));
    const app = await startProxy(t, upstream.url);
    const { port } = new URL(app.dataUrl);
    const head = (method: string, path: string) =>
      new Promise<string[]>((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1');
        let text = '';
        socket.on('error', reject);
        socket.on('data', (d: Buffer) => {
          text += d.toString('latin1');
          const end = text.indexOf('\r\n\r\n');
          if (end === -1) return;
          socket.destroy();
          resolve(
            text
              .slice(0, end)
              .split('\r\n')
              .filter((line) => !line.startsWith('Date: ')),
          );
        });
        socket.write(`${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 13\r\nConnection: close\r\n\r\n{"model":"m"}`);
      });
    const expected = [
      'HTTP/1.1 200 OK',
      'Content-Type: application/json',
      'X-Upstream-Case: Yes',
      'X-Multi: a',
      'X-Multi: b',
      'set-cookie: c=1',
      'set-cookie: d=2',
    ];
    for (const [method, path] of [
      ['POST', '/v1/completions'],
      ['GET', '/v1/models'],
      ['POST', '/v1/other'],
    ] as const) {
      const lines = await head(method, path);
      assert.deepEqual(lines.slice(0, expected.length), expected, `${method} ${path}: ${JSON.stringify(lines)}`);
      assert.ok(!lines.some((line) => /^keep-alive:/i.test(line)), `${method} ${path}: hop-by-hop dropped`);
      assert.ok(lines.includes('connection: close'), `${method} ${path}: the client's connection`);
    }
  });

  it("keeps the client's connection semantics, not the upstream's", async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond(() => ({
      status: 200,
      headers: { 'content-type': 'application/json', connection: 'keep-alive', 'keep-alive': 'timeout=5' },
      body: [{ data: '{}' }],
    }));
    const app = await startProxy(t, upstream.url);
    for (const [path, method] of [
      ['/v1/completions', 'POST'],
      ['/v1/models', 'GET'],
    ] as const) {
      const headers = await new Promise<Record<string, unknown>>((resolve, reject) => {
        const req = request(`${app.dataUrl}${path}`, { method, headers: { connection: 'close' }, agent: false }, (res) => {
          res.resume();
          resolve(res.headers);
        });
        req.on('error', reject);
        req.end(method === 'POST' ? '{"model":"m"}' : undefined);
      });
      assert.equal(headers.connection, 'close', `${method} ${path}: the client asked to close`);
      assert.equal(headers['keep-alive'], undefined, "the upstream's keep-alive is hop-by-hop");
    }
  });

  it('forwards headers as they were written, both ways: spelling, order and repeated fields', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond(() => ({
      status: 200,
      headers: { 'Content-Type': 'application/json', 'X-Upstream-Trace': 'a', Connection: 'X-Upstream-Hop', 'X-Upstream-Hop': '1' },
      body: [{ data: '{}' }],
    }));
    const app = await startProxy(t, upstream.url);
    const url = new URL(app.dataUrl);
    for (const body of ['{"model":"m"}', '{"model":"m","stream":true}']) {
      const socket = connect(Number(url.port), url.hostname);
      t.after(() => socket.destroy());
      socket.write(
        'POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nX-Tenant: one\r\nContent-Type: application/json\r\nx-tenant: two\r\n' +
          `Connection: keep-alive, X-Client-Hop\r\nX-Client-Hop: 1\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
      const head = await new Promise<string>((resolve) => {
        let text = '';
        socket.on('data', (d: Buffer) => {
          text += d.toString();
          if (text.includes('\r\n\r\n')) resolve(text.slice(0, text.indexOf('\r\n\r\n')));
        });
      });
      const raw = upstream.requests.at(-1)!.rawHeaders;
      const pairs = Array.from({ length: raw.length / 2 }, (_, i) => `${raw[2 * i]}: ${raw[2 * i + 1]}`);
      assert.deepEqual(
        pairs.filter((p) => !/^(host|content-length|connection):/i.test(p)),
        ['X-Tenant: one', 'Content-Type: application/json', 'x-tenant: two'],
        "the client's end-to-end headers, as written; X-Client-Hop is named by Connection",
      );
      const lines = head.split('\r\n').slice(1);
      assert.deepEqual(
        lines.filter((l) => /^x-upstream/i.test(l)),
        ['X-Upstream-Trace: a'],
        "the upstream's spelling; X-Upstream-Hop is hop-by-hop",
      );
      assert.ok(lines.includes('Content-Type: application/json'), head);
    }
  });

  it('forwards a chunked upload without a content-length, dropping hop-by-hop headers', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const app = await startProxy(t, upstream.url);
    const finished = nextFinished(app, 1);
    const url = new URL(`${app.dataUrl}/v1/completions`);
    const status = await new Promise<number>((resolve, reject) => {
      const headers = { 'content-type': 'application/json', connection: 'keep-alive, x-hop', 'x-hop': '1', 'x-end-to-end': '2' };
      const req = request(url, { method: 'POST', headers }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.write('{"model":"chunk');
      setImmediate(() => req.end('ed","prompt":"x"}'));
    });
    assert.equal(status, 200);
    assert.equal(upstream.requests[0]!.body.toString(), '{"model":"chunked","prompt":"x"}');
    assert.equal(upstream.requests[0]!.headers['x-hop'], undefined, 'a header named by Connection is hop-by-hop');
    assert.equal(upstream.requests[0]!.headers['x-end-to-end'], '2');
    const [sample] = await finished;
    assert.equal(sample!.model, 'chunked');
  });
});
