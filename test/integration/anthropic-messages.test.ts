// Anthropic's Messages API through infermeter: the real recordings replayed by a scripted upstream
// reach the client byte for byte and measure to their figures; an error event after a 200 and an
// error status before the stream fail as they should; and the official @anthropic-ai/sdk, streamed
// and not, against the simulator behind the proxy, sees Anthropic's API while every dialect, the
// access log and the dashboard's feed count its requests.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { createDashboardFeed } from '../../src/management/dashboard-feed.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { startSimServer } from '../../src/sim/model-server.ts';
import { leaveStreamAfter } from '../helpers/client-leaves.ts';
import { REAL_STREAMS, REAL_STREAMS_DIR, realStreamBytes, realStreamsAvailable } from '../helpers/fixtures.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { sseScript, startReplayUpstream } from '../helpers/replay-upstream.ts';
import { sseBlocks } from '../helpers/tap-harness.ts';
import { post } from '../helpers/post.ts';

const FIRST_MS = 40; // before the recording's first event
const GAP_MS = 20; // before each later one
/** Node's whole-millisecond timers may fire up to 1 ms early, each. */
const EARLY_MS = 1;

const RECORDINGS = REAL_STREAMS.filter((s) => s.api === 'messages');

const ANTHROPIC_HEADERS = { 'x-api-key': 'sk-ant-test', 'anthropic-version': '2023-06-01' };

/** Posts and reads the answer as it comes: its bytes, and when (seconds after sending) the client held its first `end` bytes. */
async function readTimed(url: string, body: string): Promise<{ status: number; bytes: Buffer; seenAt: (end: number) => number }> {
  const sentAt = performance.now();
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-test', 'anthropic-version': '2023-06-01' },
    body,
  });
  const reader = res.body!.getReader();
  const pieces: Uint8Array[] = [];
  const arrivals: Array<{ length: number; seconds: number }> = [];
  let length = 0;
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    pieces.push(r.value);
    length += r.value.length;
    arrivals.push({ length, seconds: (performance.now() - sentAt) / 1000 });
  }
  return { status: res.status, bytes: Buffer.concat(pieces), seenAt: (end) => arrivals.find((a) => a.length >= end)!.seconds };
}

describe('Anthropic Messages API through infermeter', () => {
  it('replays the real recordings byte for byte, with their TTFT, tokens, finish reason and outcome', {
    skip: realStreamsAvailable() ? false : `real recordings not found at ${REAL_STREAMS_DIR}`,
  }, async (t) => {
    assert.equal(RECORDINGS.length, 3);
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    let current = realStreamBytes(RECORDINGS[0]!.file);
    upstream.respond(() => sseScript(current, FIRST_MS, GAP_MS));
    // Under a path prefix, as vLLM's routes may be: the route is matched at its end.
    const app = await startProxy(t, `${upstream.url}/serving`);
    for (const { file, expect } of RECORDINGS) {
      current = realStreamBytes(file);
      const finished = nextFinished(app, 1);
      const body = `{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"h\u00e9"}]}`;
      const res = await readTimed(`${app.dataUrl}/anthropic/v1/messages`, body);
      assert.equal(res.status, 200, file);
      assert.ok(res.bytes.equals(current), `${file}: the client's bytes are the upstream's`);
      assert.equal(upstream.requests.at(-1)!.url, '/serving/anthropic/v1/messages');
      assert.equal(upstream.requests.at(-1)!.body.toString(), body, `${file}: the body forwarded as written, no usage injected`);
      const [s] = (await finished) as [RequestSample];
      const context = `${file}: ${JSON.stringify(s)}`;
      assert.deepEqual([s.api, s.model, s.stream, s.streamed, s.outcome, s.failure], ['messages', 'claude-test', true, true, 'success', undefined], context);
      assert.deepEqual(
        [s.promptTokens, s.completionTokens, s.usageSource, s.tokenEvents],
        [expect.promptTokens, expect.completionTokens, 'upstream', expect.tokenEvents],
        context,
      );
      assert.ok(s.finishReason === 'end_turn' || s.finishReason === 'tool_use', context);
      assert.match(s.responseModel ?? '', /^claude-/, context);
      // Event i leaves the upstream FIRST_MS + i * GAP_MS (less a millisecond a timer) after the
      // request reached it: no event is seen before that; and the proxy sees an event before the
      // client does. So TTFT lies between event k's sending and the client's receiving it: k is
      // the first text delta, after message_start, its block's start and pings.
      const ends = sseBlocks(current)
        .filter((b) => b.isEvent)
        .map((b) => b.end);
      const k = expect.firstTokenEvent!;
      const last = expect.lastTokenEvent!;
      const sent = (i: number) => (FIRST_MS + i * GAP_MS - (i + 1) * EARLY_MS) / 1000;
      assert.ok(s.ttft! >= sent(k) && s.ttft! <= res.seenAt(ends[k]!), `${context}: TTFT at event ${k}, which the client saw at ${res.seenAt(ends[k]!)} s`);
      assert.ok(
        s.lastToken! >= sent(last) && s.lastToken! <= res.seenAt(ends[last]!),
        `${context}: last token at event ${last}, which the client saw at ${res.seenAt(ends[last]!)} s`,
      );
      // TPOT: the time from the first to the last token event, over the final output_tokens - 1.
      assert.equal(s.tpot?.tokens, expect.completionTokens! - 1, context);
      assert.ok(Math.abs(s.tpot.seconds - (s.lastToken! - s.ttft!) / (expect.completionTokens! - 1)) < 1e-9, context);
    }
    const m = await scrape(app);
    const model = { model_name: 'claude-test' };
    assert.equal(m.value('request_success_total', model), 3);
    assert.equal(m.value('prompt_tokens_total', model), 12 + 565 + 61);
    assert.equal(m.value('generation_tokens_total', model), 30 + 48 + 2);
    assert.equal(m.value('time_to_first_token_seconds_count', model), 3);
    assert.equal(m.value('time_per_output_token_seconds_count', model), 29 + 47 + 1);
  });

  it('fails a stream on an error event after the 200, and a request on an error status before it', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const overloaded =
      'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}\n\n' +
      'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n' +
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n' +
      'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n';
    const refused = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}';
    upstream.respond((req) =>
      req.body.toString().includes('"stream":true')
        ? sseScript(Buffer.from(overloaded), 5, 5)
        : { status: 529, headers: { 'content-type': 'application/json' }, body: [{ data: refused }] },
    );
    const app = await startProxy(t, upstream.url);
    const finished = nextFinished(app, 2);
    const streamed = await post(`${app.dataUrl}/v1/messages`, '{"model":"claude-x","max_tokens":8,"stream":true,"messages":[]}', ANTHROPIC_HEADERS);
    assert.equal(streamed.status, 200);
    assert.equal(streamed.bytes.toString(), overloaded, 'the error event reaches the client as sent');
    const status = await post(`${app.dataUrl}/v1/messages`, '{"model":"claude-x","max_tokens":8,"messages":[]}', ANTHROPIC_HEADERS);
    assert.equal(status.status, 529);
    assert.equal(status.bytes.toString(), refused);
    const [a, b] = (await finished) as [RequestSample, RequestSample];
    assert.deepEqual(
      [a.outcome, a.failure, a.status, a.tokenEvents, a.promptTokens, a.completionTokens],
      ['failed', 'stream_error', 200, 1, 9, 1],
      JSON.stringify(a),
    );
    assert.ok(a.ttft !== undefined, 'the token before the error still has its TTFT');
    assert.deepEqual([b.outcome, b.failure, b.status, b.streamed, b.promptTokens], ['failed', 'upstream_status', 529, false, undefined], JSON.stringify(b));
    const m = await scrape(app);
    assert.equal(m.value('request_failed_total', { model_name: 'claude-x' }), 2);
    assert.equal(m.value('request_success_total', { model_name: 'claude-x' }), 0);
  });

  it('keeps the prompt of message_start and the tokens delivered when the client leaves mid-stream', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const events = [
      'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"cache_read_input_tokens":100,"output_tokens":1}}}\n\n',
      'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
      ...['one', ' two', ' three', ' MARK'].map(
        (text) => `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"${text}"}}\n\n`,
      ),
    ];
    upstream.respond(() => ({
      status: 200,
      headers: { 'content-type': 'text/event-stream' },
      body: events.map((data) => ({ afterMs: 5, data })),
      end: 'hang',
    }));
    const app = await startProxy(t, upstream.url);
    const finished = nextFinished(app, 1);
    await leaveStreamAfter(app.dataUrl, { model: 'claude-x', max_tokens: 64, stream: true, messages: [] }, 'MARK', '/v1/messages');
    const [s] = (await finished) as [RequestSample];
    assert.deepEqual([s.outcome, s.cancelPhase, s.tokenEvents, s.usageSource], ['cancelled', 'decoding', 4, 'upstream'], JSON.stringify(s));
    assert.deepEqual(
      [s.promptTokens, s.completionTokens, s.tpot?.tokens],
      [120, 4, 3],
      "message_start's prompt; its output_tokens (1) was counted before the four deltas came",
    );
    assert.equal(await upstream.requests[0]!.abandoned, true, 'the upstream request is aborted');
  });

  it('serves the official @anthropic-ai/sdk from the simulator, streamed and not, and every view counts it', async (t) => {
    const MODEL = 'sim-claude';
    const TTFT_MS = 30;
    const GAP = 5;
    const sim = await startSimServer({ models: [MODEL], ttftMs: TTFT_MS, interTokenMs: GAP });
    t.after(() => sim.close());
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-messages-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const logFile = join(dir, 'access.log');
    const app = await startProxy(t, sim.url, { INFERMETER_DIALECTS: 'mindie,aom,vllm,otel', INFERMETER_ACCESS_LOG: logFile });
    const feed = createDashboardFeed({ metrics: app.metrics });
    const finished = nextFinished(app, 4);
    const client = new Anthropic({ baseURL: app.dataUrl, apiKey: 'sk-ant-test', maxRetries: 0 });
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Tell me about metering proxies.' }];

    // 1. Streamed, through the SDK's MessageStream: text deltas, then the final message.
    const stream = client.messages.stream({ model: MODEL, max_tokens: 12, messages });
    let text = '';
    stream.on('text', (delta) => (text += delta));
    const streamed = await stream.finalMessage();
    assert.equal(streamed.type, 'message');
    assert.match(streamed.id, /^msg_01[1-9A-HJ-NP-Za-km-z]{22}$/);
    assert.equal(streamed.model, MODEL);
    assert.equal(streamed.stop_reason, 'max_tokens');
    assert.deepEqual(streamed.content, [{ type: 'text', text }]);
    assert.ok(text.length > 0);
    assert.equal(streamed.usage.output_tokens, 12);
    assert.equal(streamed.usage.cache_read_input_tokens, 0);

    // 2. Streamed, raw events, with extended thinking and a cached system prompt.
    const events: string[] = [];
    const raw = await client.messages.create({
      model: MODEL,
      max_tokens: 8,
      stream: true,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      system: [{ type: 'text', text: 'You are terse. '.repeat(20), cache_control: { type: 'ephemeral' } }],
      messages,
    });
    let thinking = '';
    let input = 0;
    let cacheRead = 0;
    let output = 0;
    for await (const event of raw) {
      events.push(event.type === 'content_block_delta' ? `${event.type}:${event.delta.type}` : event.type);
      if (event.type === 'content_block_delta' && event.delta.type === 'thinking_delta') thinking += event.delta.thinking;
      if (event.type === 'message_start') [input, cacheRead] = [event.message.usage.input_tokens, event.message.usage.cache_read_input_tokens ?? 0];
      if (event.type === 'message_delta') output = event.usage.output_tokens;
    }
    assert.deepEqual(events, [
      'message_start',
      ...[
        'content_block_start',
        'content_block_delta:thinking_delta',
        'content_block_delta:thinking_delta',
        'content_block_delta:signature_delta',
        'content_block_stop',
      ],
      ...['content_block_start', ...Array<string>(6).fill('content_block_delta:text_delta'), 'content_block_stop'],
      'message_delta',
      'message_stop',
    ]);
    assert.ok(thinking.length > 0 && cacheRead > 0 && input > 0, `thinking ${thinking}, cache read ${cacheRead}, input ${input}`);
    assert.equal(output, 8);

    // 3. and 4. Not streamed: the whole message as one body (with thinking, then without).
    const answer = await client.messages.create({ model: MODEL, max_tokens: 4, thinking: { type: 'enabled', budget_tokens: 1024 }, messages });
    assert.deepEqual(
      answer.content.map((b) => b.type),
      ['thinking', 'text'],
    );
    assert.equal(answer.stop_reason, 'max_tokens');
    assert.equal(answer.usage.output_tokens, 4);
    const plain = await client.messages.create({ model: MODEL, max_tokens: 3, messages });
    assert.equal(plain.content[0]!.type, 'text');

    const samples = await finished;
    for (const s of samples) assert.deepEqual([s.api, s.model, s.outcome, s.finishReason], ['messages', MODEL, 'success', 'max_tokens'], JSON.stringify(s));
    const [s1, s2, s3, s4] = samples as [RequestSample, RequestSample, RequestSample, RequestSample];
    // Prompt tokens count the cache read as well: the same total the first request reported.
    assert.deepEqual([s1.promptTokens, s1.completionTokens, s1.tokenEvents], [streamed.usage.input_tokens, 12, 12]);
    assert.deepEqual([s2.promptTokens, s2.completionTokens, s2.tokenEvents], [input + cacheRead, 8, 8], 'thinking deltas are tokens, the signature is not');
    assert.deepEqual([s3.streamed, s3.ttft, s3.promptTokens, s3.completionTokens], [false, undefined, answer.usage.input_tokens, 4]);
    assert.equal(s4.completionTokens, 3);
    for (const s of [s1, s2]) {
      // The simulator sleeps TTFT_MS before the first token and GAP before each later one.
      const n = s.completionTokens!;
      assert.ok(s.ttft! >= (TTFT_MS - EARLY_MS) / 1000, `TTFT ${s.ttft}`);
      assert.ok(s.lastToken! >= (TTFT_MS + (n - 1) * GAP - n * EARLY_MS) / 1000, `last token ${s.lastToken}`);
      assert.equal(s.tpot!.tokens, n - 1);
      assert.ok(Math.abs(s.tpot!.seconds - (s.lastToken! - s.ttft!) / (n - 1)) < 1e-9, `TPOT ${s.tpot!.seconds}`);
    }

    const m = await scrape(app);
    const model = { model_name: MODEL };
    const prompt = s1.promptTokens! + s2.promptTokens! + s3.promptTokens! + s4.promptTokens!;
    // MindIE
    assert.equal(m.value('request_success_total', model), 4);
    assert.equal(m.value('prompt_tokens_total', model), prompt);
    assert.equal(m.value('generation_tokens_total', model), 12 + 8 + 4 + 3);
    assert.equal(m.value('time_to_first_token_seconds_count', model), 2);
    // vLLM: a max_tokens stop is vLLM's "length"
    assert.equal(m.sum('vllm:request_success_total', { model_name: MODEL, finished_reason: 'length' }), 4);
    assert.equal(m.sum('vllm:request_success_total', { model_name: MODEL, finished_reason: 'stop' }), 0);
    assert.equal(m.sum('vllm:prompt_tokens_total', model), prompt);
    // OpenTelemetry: the chat operation
    assert.equal(m.sum('gen_ai_server_request_duration_seconds_count', { gen_ai_operation_name: 'chat', gen_ai_request_model: MODEL }), 4);
    assert.equal(m.sum('gen_ai_client_token_usage_sum', { gen_ai_operation_name: 'chat', gen_ai_token_type: 'input' }), prompt);
    // AOM: the request histograms count them (the path label of the period gauges: unit test)
    assert.equal(m.sum('infer_service_request_cost_count', model), 4);

    feed.snapshot();
    const dashboard = feed.data().models.find((d) => d.model === MODEL);
    assert.deepEqual(dashboard?.totals, {
      received: 4,
      success: 4,
      failed: 0,
      cancelled: 0,
      promptTokens: prompt,
      generationTokens: 27,
      clientErrors: 0,
      streams: 2,
    });

    await app.close(); // flushes the access log
    const lines = readFileSync(logFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      lines.map((l) => [l.path, l.model, l.stream, l.outcome, l.prompt_tokens, l.completion_tokens, l.usage_injected]),
      samples.map((s) => ['/v1/messages', MODEL, s.stream, 'success', s.promptTokens, s.completionTokens, false]),
    );
  });

  it("answers a Messages request without max_tokens or messages in Anthropic's error shape", async (t) => {
    const sim = await startSimServer({ models: ['sim-claude'], ttftMs: 0, interTokenMs: 0 });
    t.after(() => sim.close());
    const res = await post(`${sim.url}/v1/messages`, '{"model":"sim-claude","messages":[{"role":"user","content":"hi"}]}', ANTHROPIC_HEADERS);
    assert.equal(res.status, 400);
    const body = JSON.parse(res.bytes.toString()) as { type: string; error: { type: string; message: string } };
    assert.deepEqual([body.type, body.error.type], ['error', 'invalid_request_error']);
    assert.match(body.error.message, /max_tokens/);
    const client = new Anthropic({ baseURL: sim.url, apiKey: 'sk-ant-test', maxRetries: 0 });
    await assert.rejects(client.messages.create({ model: 'sim-claude', max_tokens: 4, messages: [] }), (e: unknown) => e instanceof Anthropic.BadRequestError);
  });
});
