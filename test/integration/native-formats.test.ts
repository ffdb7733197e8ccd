// The engines' own routes, answered in their own formats, through real sockets: llama-server's
// `/completion` (its native events, the counts on the last), Ollama's `/api/chat` and
// `/api/generate` (newline-delimited JSON, the counts on the `done` object), and the routes whose
// format carries no counts infermeter reads (TGI's `/generate_stream`, SGLang's `/generate`):
// metered as requests with their latency; vLLM's `/invocations` answers OpenAI's shape, read so.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream, type Script } from '../helpers/replay-upstream.ts';

const SSE = { 'content-type': 'text/event-stream' };
const NDJSON = { 'content-type': 'application/x-ndjson' };
const JSON_TYPE = { 'content-type': 'application/json' };

// As llama-server writes them (b4747's and master's to_json_non_oaicompat_partial / _final).
const llamaEvent = (content: string, n: number) =>
  `data: {"index":0,"content":"${content}","tokens":[],"stop":false,"id_slot":-1,"tokens_predicted":${n},"tokens_evaluated":3}\n\n`;
const llamaLast =
  'data: {"index":0,"content":"","tokens":[],"id_slot":0,"stop":true,"model":"gguf","tokens_predicted":7,"tokens_evaluated":3,"stop_type":"limit","timings":{"prompt_n":3,"prompt_ms":2.0,"predicted_n":7,"predicted_ms":12.0}}\n\n';
// As Ollama writes them (api/types.go's ChatResponse and GenerateResponse).
const ollamaChat = (content: string) =>
  `{"model":"llama3.2","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"${content}"},"done":false}\n`;
const ollamaDone =
  '{"model":"llama3.2","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":1,"load_duration":1,"prompt_eval_count":3,"prompt_eval_duration":1,"eval_count":7,"eval_duration":1}\n';

describe("the engines' own formats", () => {
  it("reads the tokens of llama-server's /completion and Ollama's /api/chat and /api/generate, streamed and not", async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    let script: Script = {};
    upstream.respond(() => script);
    const app = await startProxy(t, upstream.url);
    const cases: ReadonlyArray<[path: string, api: string, streamed: boolean, Script]> = [
      [
        '/completion',
        'completions',
        true,
        { status: 200, headers: SSE, body: [...Array.from({ length: 7 }, (_, i) => ({ data: llamaEvent(`t${i}`, i + 1) })), { data: llamaLast }] },
      ],
      [
        '/infill',
        'completions',
        false,
        { status: 200, headers: JSON_TYPE, body: [{ data: llamaLast.slice(6, -2).replace('"content":""', '"content":"all of it"') }] },
      ],
      // A line cut across chunks, and the last line without its newline.
      [
        '/api/chat',
        'chat',
        true,
        {
          status: 200,
          headers: NDJSON,
          body: [
            ...Array.from({ length: 6 }, (_, i) => ({ data: ollamaChat(`t${i}`) })),
            { data: ollamaChat('t6').slice(0, 20) },
            { data: ollamaChat('t6').slice(20) + ollamaDone.slice(0, 30) },
            { data: ollamaDone.slice(30, -1) },
          ],
        },
      ],
      [
        '/api/generate',
        'completions',
        false,
        { status: 200, headers: JSON_TYPE, body: [{ data: ollamaDone.replace('"message":{"role":"assistant","content":""}', '"response":"all of it"') }] },
      ],
    ];
    for (const [path, api, streamed, answer] of cases) {
      script = answer;
      const finished = nextFinished(app, 1);
      const res = await fetch(`${app.dataUrl}${path}`, { method: 'POST', body: `{"model":"m","stream":${streamed}}` });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      const [s] = await finished;
      assert.equal(s!.api, api, path);
      assert.equal(s!.outcome, 'success', path);
      assert.equal(s!.promptTokens, 3, path);
      assert.equal(s!.completionTokens, 7, path);
      assert.equal(s!.usageSource, 'upstream', path);
      if (streamed) {
        assert.ok(s!.ttft !== undefined, `${path}: ttft`);
        assert.equal(s!.tpot?.tokens, 6, `${path}: tpot`);
      }
    }
    assert.equal((await scrape(app)).value('infermeter_stream_tap_problems_total', { kind: 'malformed_body' }) ?? 0, 0);
  });

  it('meters the routes whose format it does not read as requests, and /invocations by its OpenAI answer', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    let script: Script = {};
    upstream.respond(() => script);
    const app = await startProxy(t, upstream.url);
    // TGI's /generate_stream and SGLang's /generate: requests, failures and latency; no counts.
    const tgi = 'data:{"index":1,"token":{"id":1,"text":"a","logprob":0,"special":false},"generated_text":null,"details":null}\n\n';
    for (const path of ['/generate_stream', '/generate']) {
      script = { status: 200, headers: SSE, body: [{ data: tgi }] };
      const finished = nextFinished(app, 1);
      await (await fetch(`${app.dataUrl}${path}`, { method: 'POST', body: '{"inputs":"hi","parameters":{}}' })).arrayBuffer();
      const [s] = await finished;
      assert.equal(s!.api, 'completions', path);
      assert.equal(s!.model, 'unknown', path);
      assert.equal(s!.outcome, 'success', path);
      assert.ok(s!.e2e !== undefined, path);
    }
    script = { status: 422, headers: JSON_TYPE, body: [{ data: '{"error":"Input validation error"}' }] };
    let finished = nextFinished(app, 1);
    await (await fetch(`${app.dataUrl}/generate`, { method: 'POST', body: '{}' })).arrayBuffer();
    assert.equal((await finished)[0]!.outcome, 'failed');
    // vLLM's SageMaker route: a chat body, OpenAI's answer, its usage read.
    const chunk = (content: string) =>
      `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"${content}"},"finish_reason":null}]}\n\n`;
    script = {
      status: 200,
      headers: SSE,
      body: [
        { data: chunk('a') + chunk('b') },
        {
          data: 'data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\ndata: [DONE]\n\n',
        },
      ],
    };
    finished = nextFinished(app, 1);
    await (await fetch(`${app.dataUrl}/invocations`, { method: 'POST', body: '{"model":"m","stream":true,"messages":[]}' })).arrayBuffer();
    const [s] = await finished;
    assert.equal(s!.api, 'chat');
    assert.equal(s!.model, 'm');
    assert.equal(s!.completionTokens, 2);
  });
});
