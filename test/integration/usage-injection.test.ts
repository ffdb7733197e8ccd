// Usage without client cooperation, through real sockets: the upstream is asked for usage, the
// client receives exactly the stream it would have received without infermeter, and the token
// metrics are real. Against the recorded streams, and against an upstream that refuses the field.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from '../../src/log.ts';
import { ownStreams, REAL_STREAMS, realStreamBytes, realStreamsAvailable } from '../helpers/fixtures.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream, type Script } from '../helpers/replay-upstream.ts';
import { sseBlocks } from '../helpers/tap-harness.ts';

const SSE = { 'content-type': 'text/event-stream' };

/** The stream as the upstream sends it when nobody asked for usage: no usage-only chunk. */
function withoutUsageChunk(bytes: Buffer): Buffer {
  return Buffer.concat(
    sseBlocks(bytes)
      .filter((b) => !(b.isEvent && /"choices":\[\]/.test(b.bytes.toString()) && /"usage":\{/.test(b.bytes.toString())))
      .map((b) => b.bytes),
  );
}

/** An upstream that answers like a real engine: usage only when asked for it. */
function engineLike(bytes: Buffer): (body: Buffer) => Script {
  return (body) => {
    const asked = (JSON.parse(body.toString()) as { stream_options?: { include_usage?: boolean } }).stream_options?.include_usage === true;
    return { status: 200, headers: SSE, body: [{ data: asked ? bytes : withoutUsageChunk(bytes) }] };
  };
}

const chatStreams = [
  ...ownStreams()
    .filter((f) => f.api === 'chat' || f.api === 'completions')
    .map((f) => ({ name: f.name, api: f.api, bytes: f.bytes, expect: f.expect })),
  ...(realStreamsAvailable()
    ? REAL_STREAMS.filter((s) => s.api === 'chat' || s.api === 'completions').map((s) => ({
        name: s.file,
        api: s.api,
        bytes: realStreamBytes(s.file),
        expect: s.expect,
      }))
    : []),
];

describe('usage injection', () => {
  it('gives the client the stream it would have had, and the metrics the real token counts', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    let current = chatStreams[0]!;
    const fallbacks: boolean[] = [];
    upstream.respond((req) => engineLike(current.bytes)(req.body));
    const app = await startProxy(t, upstream.url);
    for (const [i, stream] of chatStreams.entries()) {
      current = stream;
      const finished = nextFinished(app, 1);
      const body = `{"model":"m${i}","stream":true,"messages":[{"role":"user","content":"hi"}]}`;
      const path = stream.api === 'chat' ? '/v1/chat/completions' : '/v1/completions';
      const res = await fetch(`${app.dataUrl}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      const received = Buffer.from(await res.arrayBuffer());
      const [sample] = await finished;
      fallbacks.push(sample!.usageSource === 'fallback');
      const sent = upstream.requests.at(-1)!.body.toString();
      assert.equal(sent, `{"stream_options":{"include_usage":true},${body.slice(1)}`, `${stream.name}: injected, the rest byte-identical`);
      assert.ok(received.equals(withoutUsageChunk(stream.bytes)), `${stream.name}: the client sees the stream without the usage chunk`);
      if (stream.expect.promptTokens !== null) {
        assert.equal(sample!.usageSource, 'upstream', `${stream.name}: usage read`);
        assert.deepEqual([sample!.promptTokens, sample!.completionTokens], [stream.expect.promptTokens, stream.expect.completionTokens], stream.name);
      }
    }
    const m = await scrape(app);
    assert.equal(m.value('infermeter_usage_injection_active'), 1);
    assert.equal(m.value('infermeter_usage_injected_total', { body: 'held' }), chatStreams.length);
    const strippable = chatStreams.filter((s) => !withoutUsageChunk(s.bytes).equals(s.bytes)).length;
    assert.ok(strippable >= 5);
    assert.equal(m.value('infermeter_usage_chunks_stripped_total'), strippable);
    // A stream that succeeded without usage even when asked (the zero fallback) is counted as
    // missing its tokens; every other one is not.
    assert.ok(fallbacks.includes(true) && fallbacks.includes(false), `streams with the fallback: ${fallbacks.join(', ')}`);
    for (const [i, stream] of chatStreams.entries()) {
      assert.equal(m.value('infermeter_streams_without_usage_total', { model_name: `m${i}` }), fallbacks[i] ? 1 : 0, stream.name);
    }
  });

  it('leaves a client that asked for usage, or a non-streaming request, untouched', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const stream = ownStreams().find((f) => f.name === 'vllm-chat-usage.sse')!;
    upstream.respond((req) => engineLike(stream.bytes)(req.body));
    const app = await startProxy(t, upstream.url);
    const asked = '{"model":"m","stream":true,"stream_options":{"include_usage":true}}';
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: asked });
    assert.ok(Buffer.from(await res.arrayBuffer()).equals(stream.bytes), 'usage delivered as the upstream sent it');
    assert.equal(upstream.requests[0]!.body.toString(), asked);
    upstream.respond(() => ({ status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{}' }] }));
    await (await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m"}' })).arrayBuffer();
    assert.equal(upstream.requests[1]!.body.toString(), '{"model":"m"}');
    assert.equal((await scrape(app)).sum('infermeter_usage_injected_total'), 0);
  });

  it('retries once without the field when the upstream refuses it, then stops injecting', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const stream = ownStreams().find((f) => f.name === 'ollama-chat-nousage.sse')!;
    upstream.respond((req) =>
      req.body.toString().includes('stream_options')
        ? {
            status: 400,
            headers: { 'content-type': 'application/json' },
            body: [{ data: '{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error"}}' }],
          }
        : { status: 200, headers: SSE, body: [{ data: stream.bytes }] },
    );
    const logs: string[] = [];
    const app = await startProxy(t, upstream.url, {}, { log: createLogger('warn', (line) => logs.push(line)) });
    const body = '{"model":"llama3.2","stream":true}';
    for (let i = 0; i < 2; i++) {
      const finished = nextFinished(app, 1);
      const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body });
      assert.equal(res.status, 200);
      assert.ok(Buffer.from(await res.arrayBuffer()).equals(stream.bytes), 'the client never sees the refusal');
      const [sample] = await finished;
      assert.equal(sample!.outcome, 'success');
      assert.equal(sample!.tokenEvents, 5);
    }
    assert.deepEqual(
      upstream.requests.map((r) => r.body.toString().includes('stream_options')),
      [true, false, false],
      'one refused attempt, its retry, then no more injection',
    );
    assert.equal(upstream.requests[1]!.body.toString(), body, 'the retry is the body as the client wrote it');
    const m = await scrape(app);
    assert.equal(m.value('infermeter_usage_injection_active'), 0);
    assert.equal(m.value('request_failed_total', { model_name: 'llama3.2' }), 0);
    assert.equal(
      m.value('infermeter_streams_without_usage_total', { model_name: 'llama3.2' }),
      2,
      'both streams ended without usage: their tokens are missing, not zero',
    );
    assert.equal(logs.filter((l) => l.includes('refuses stream_options')).length, 1, 'logged once');
  });

  it('passes any other 4xx to the client as it is', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const error = '{"error":{"message":"The model `m` does not exist.","code":404}}';
    upstream.respond(() => ({ status: 404, headers: { 'content-type': 'application/json', 'x-kept': '1' }, body: [{ data: error }] }));
    const app = await startProxy(t, upstream.url);
    const finished = nextFinished(app, 1);
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' });
    assert.equal(res.status, 404);
    assert.equal(res.headers.get('x-kept'), '1');
    assert.equal(await res.text(), error);
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.failure], ['failed', 'upstream_status']);
    assert.equal(upstream.requests.length, 1, 'no retry');
    assert.equal((await scrape(app)).value('infermeter_usage_injection_active'), 1);
  });

  it('passes a 4xx too large to be a refusal through whole, held bytes first', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const big = `{"error":{"message":"${'x'.repeat(200_000)}"}}`;
    upstream.respond(() => ({
      status: 413,
      headers: { 'content-type': 'application/json' },
      body: [{ data: big.slice(0, 50_000) }, { afterMs: 5, data: big.slice(50_000) }],
    }));
    const app = await startProxy(t, upstream.url);
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' });
    assert.equal(res.status, 413);
    assert.equal(await res.text(), big);
  });

  it("injects only into the routes that take stream_options: OpenAI's, never an engine's native route", async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond(() => ({ status: 200, headers: SSE, body: [{ data: 'data: {"content":"t","stop":true}\n\n' }] }));
    const app = await startProxy(t, upstream.url);
    const body = '{"model":"m","stream":true,"prompt":"hi"}';
    // llama-server's /completion, /completions, /infill; vLLM's /invocations; SGLang's and TGI's
    // /generate(_stream); Ollama's /api/chat, /api/generate: bodies of their own shape.
    const native = ['/completion', '/completions', '/infill', '/invocations', '/generate', '/generate_stream', '/api/chat', '/api/generate', '/x/completion'];
    for (const path of native) await (await fetch(`${app.dataUrl}${path}`, { method: 'POST', body })).arrayBuffer();
    assert.deepEqual(
      upstream.requests.map((r) => [r.url, r.body.toString()]),
      native.map((path) => [path, body]),
    );
    assert.equal((await scrape(app)).sum('infermeter_usage_injected_total'), 0);
    // llama-server's /chat/completions (the OpenAI SDK's base URL without /v1) is OpenAI's route.
    const finished = nextFinished(app, 1);
    await (await fetch(`${app.dataUrl}/chat/completions`, { method: 'POST', body })).arrayBuffer();
    assert.equal(upstream.requests.at(-1)!.body.toString(), '{"stream_options":{"include_usage":true},"model":"m","stream":true,"prompt":"hi"}');
    assert.equal((await finished)[0]!.api, 'chat');
  });

  it('leaves every body untouched when off', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const app = await startProxy(t, upstream.url, { INFERMETER_INJECT_USAGE: 'off' });
    await (await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' })).arrayBuffer();
    assert.equal(upstream.requests[0]!.body.toString(), '{"model":"m","stream":true}');
    assert.equal((await scrape(app)).value('infermeter_usage_injection_active'), 0);
  });
});
