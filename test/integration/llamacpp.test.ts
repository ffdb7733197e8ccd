// Against a real llama.cpp llama-server, when one is given: LLAMA_SERVER (the path of a
// llama-server binary you built; infermeter commits none) and LLAMA_MODEL (a GGUF, e.g. one
// written by bench/llamacpp/tiny-gguf.py). Without them this suite says so and skips, in CI too:
// llama.cpp is not a Debian package. What succeeds directly succeeds through infermeter, and its
// figures follow the engine's: tokens, timings, the in-stream error, the in-flight attribution.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Infermeter } from '../../src/app.ts';
import { ask, type Ask } from '../../bench/llamacpp/client.ts';
import { llamaFromEnv, startLlamaServer, type LlamaServer } from '../../bench/llamacpp/llama-server.ts';
import { billingBasis, ledgerUsageSource } from '../../src/ledger/usage-event.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';

const found = llamaFromEnv();
const skip = typeof found === 'string' ? `${found}: no real llama.cpp server to test against` : false;
const SERVED = 'tiny.gguf';
const base: Omit<Ask, 'requestId'> = {
  api: 'chat',
  stream: true,
  includeUsage: false,
  prompt: 'Tell me about the proxy in front of the model server.',
  maxTokens: 16,
  model: 'gpt-4o-mini',
};

describe('a real llama.cpp llama-server behind infermeter', { skip }, () => {
  let server: LlamaServer;
  let app: Infermeter;
  before(async () => {
    if (typeof found === 'string') return;
    server = await startLlamaServer({ ...found, slots: 4, context: 4096, threads: 2, alias: SERVED });
  });
  after(() => server?.stop());

  it("answers through infermeter as directly, with the engine's token counts and timings in the measurement", async (t) => {
    app = await startProxy(t, server.url, {
      INFERMETER_UPSTREAM_METRICS: `${server.url}/metrics`,
      INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '3600',
      INFERMETER_DIALECTS: 'mindie,vllm',
    });
    // The first stream through shows infermeter whether the engine states its counts unasked: the
    // current llama-server's timings move onto the usage-only chunk infermeter asks for then.
    await ask(app.dataUrl, { ...base, requestId: 'first' });
    const kinds: Array<Omit<Ask, 'requestId'>> = [
      base,
      { ...base, includeUsage: true },
      { ...base, stream: false },
      { ...base, api: 'completions' },
      { ...base, api: 'completions', stream: false },
    ];
    for (const [i, kind] of kinds.entries()) {
      const direct = await ask(server.url, { ...kind, prompt: `${kind.prompt} (direct ${i})`, requestId: `direct-${i}` });
      const finished = nextFinished(app, 1);
      const proxied = await ask(app.dataUrl, { ...kind, prompt: `${kind.prompt} (proxied ${i})`, requestId: `proxied-${i}` });
      const [sample] = await finished;
      const context = `${kind.api}, ${kind.stream ? 'streamed' : 'not streamed'}${kind.includeUsage ? ', include_usage' : ''}: ${JSON.stringify({ direct: { ...direct, body: undefined }, proxied: { ...proxied, body: undefined }, sample })}`;
      assert.equal(direct.status, 200, context);
      assert.equal(proxied.status, 200, context);
      assert.ok(proxied.complete, context);
      assert.equal(sample!.outcome, 'success', context);
      // The engine's counts: its usage, or (the current llama-server, usage not asked) its timings.
      const t = proxied.timings;
      const completion = proxied.completionTokens ?? t?.predictedTokens;
      const prompt = proxied.promptTokens ?? (t === undefined ? undefined : t.promptTokens + (t.cachedTokens ?? 0));
      assert.equal(sample!.completionTokens, completion, context);
      assert.equal(sample!.promptTokens, prompt, context);
      assert.equal(proxied.timings?.predictedTokens, completion, context);
      assert.deepEqual(sample!.engineTimings, proxied.timings, context);
      if (kind.stream) {
        // The client's TTFT and TPOT and infermeter's are one measurement seen from two sides of
        // a loopback hop: infermeter's TTFT comes first; its TPOT spans the same tokens.
        assert.equal(sample!.tokenEvents, proxied.tokenChunks, context);
        assert.ok(sample!.ttft! * 1000 <= proxied.ttftMs!, context);
      }
    }
    // The vLLM prefill histogram holds llama.cpp's own prompt_ms for these requests and the first.
    const x = await scrape(app);
    assert.equal(x.value('infermeter_engine_timings_total', { model_name: 'gpt-4o-mini' }), kinds.length + 1);
    assert.equal(x.value('vllm:request_prefill_time_seconds_count', { model_name: 'gpt-4o-mini', engine: '0' }), kinds.length + 1);
  });

  it('gives a streamed chat without include_usage the bytes it gets directly, and meters the engine token counts', async (t) => {
    app = await startProxy(t, server.url, { INFERMETER_UPSTREAM_METRICS: 'off' });
    // Greedy, and no prompt cache: the same request, the same tokens and counts, on any slot.
    const body = (n: number) =>
      JSON.stringify({
        model: 'gpt-4o-mini',
        stream: true,
        max_tokens: 12,
        temperature: 0,
        cache_prompt: false,
        messages: [{ role: 'user', content: `The same question, asked twice (${n}).` }],
      });
    // The first stream through shows infermeter whether the engine states its counts unasked
    // (the current llama-server: its timings move to the usage-only chunk it asks for).
    await rawStream(app.dataUrl, body(0));
    for (const n of [1, 2]) {
      const direct = await rawStream(server.url, body(n));
      const finished = nextFinished(app, 1);
      const proxied = await rawStream(app.dataUrl, body(n));
      const [sample] = await finished;
      assert.equal(normalised(proxied), normalised(direct), `through infermeter as directly:\n${proxied}\n---\n${direct}`);
      assert.equal(sample!.outcome, 'success', proxied);
      assert.deepEqual([sample!.promptTokens, sample!.completionTokens], engineCounts(proxied), proxied);
    }
  });

  it("counts llama.cpp's refusal of an over-long prompt as a failure: an in-stream error after a 200 (b4747), or a 400 (current master)", async (t) => {
    app = await startProxy(t, server.url, { INFERMETER_UPSTREAM_METRICS: 'off' });
    const finished = nextFinished(app, 1);
    // Longer than a slot's context (4096 / 4 slots), and the server was started with --no-context-shift.
    const answer = await ask(app.dataUrl, { ...base, prompt: 'word '.repeat(700), requestId: 'too-long' });
    const [sample] = await finished;
    assert.equal(sample!.outcome, 'failed');
    assert.equal(sample!.e2e, undefined);
    if (answer.status === 400) {
      // The current llama-server refuses it before any stream (exceed_context_size_error).
      assert.match(answer.body, /exceed/, answer.body);
      assert.equal(sample!.failure, 'upstream_status');
      return;
    }
    assert.equal(answer.status, 200, answer.body);
    assert.ok(answer.streamError, `an error: line came: ${answer.body}`);
    assert.equal(sample!.failure, 'stream_error');
  });

  it('bills a stream cancelled there on the basis delivered, continuous usage on: llama.cpp states usage only at the end', async (t) => {
    app = await startProxy(t, server.url, { INFERMETER_CONTINUOUS_USAGE: 'on' });
    const finished = nextFinished(app, 1);
    const controller = new AbortController();
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, max_tokens: 900, messages: [{ role: 'user', content: 'go on and on' }] }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    let text = '';
    while ((text.match(/"content":"[^"]/g) ?? []).length < 3) text += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    await reader.cancel().catch(() => undefined);
    const [sample] = await finished;
    const context = JSON.stringify(sample);
    assert.equal(sample!.outcome, 'cancelled', context);
    assert.equal(sample!.usageSource, 'events', context);
    assert.equal(billingBasis(ledgerUsageSource(sample!.usageSource, sample!.tokenEvents), sample!.completionTokens), 'delivered', context);
    assert.ok(!text.includes('"usage"'), text);
  });

  it("files the engine's running request under its model once, whatever name the client asked for", async (t) => {
    app = await startProxy(t, server.url, {
      INFERMETER_UPSTREAM_METRICS: `${server.url}/metrics`,
      INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '3600',
      INFERMETER_DIALECTS: 'mindie,vllm',
    });
    // A long generation whose client reads its first token, then leaves once the gauges are read.
    const controller = new AbortController();
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, max_tokens: 900, messages: [{ role: 'user', content: 'go on' }] }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('"content"')) text += new TextDecoder().decode((await reader.read()).value);
    await app.metrics.engineScraper!.scrapeOnce();
    const x = await scrape(app);
    controller.abort();
    await reader.cancel().catch(() => undefined);
    const context = x.text
      .split('\n')
      .filter((l) => l.startsWith('num_requests_') || l.startsWith('vllm:num_requests_'))
      .join('\n');
    assert.equal(x.value('num_requests_running', { model_name: SERVED }), 1, context);
    assert.equal(x.sum('num_requests_running'), 1, context);
    assert.equal(x.sum('num_requests_waiting'), 0, context);
    assert.equal(x.sum('vllm:num_requests_running'), 1, context);
  });
});

/** A streamed chat's whole body, as the client reads it. */
async function rawStream(base: string, body: string): Promise<string> {
  const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return text;
}

/** What differs run to run: the id, the time, and the timings' milliseconds and rates. */
function normalised(sse: string): string {
  return sse
    .replace(/"id":"chatcmpl-[^"]*"/g, '"id":"ID"')
    .replace(/"created":\d+/g, '"created":0')
    .replace(/"(prompt|predicted)_(ms|per_token_ms|per_second)":[-+0-9.eE]+/g, '"$1_$2":0');
}

/** The counts the engine states in a stream: its usage, else its timings (prompt_n + cache_n, predicted_n). */
function engineCounts(sse: string): [number | undefined, number | undefined] {
  let counts: [number | undefined, number | undefined] = [undefined, undefined];
  for (const line of sse.split('\n')) {
    if (!line.startsWith('data: {')) continue;
    const p = JSON.parse(line.slice(6)) as {
      usage?: { prompt_tokens: number; completion_tokens: number };
      timings?: { prompt_n: number; cache_n?: number; predicted_n: number };
    };
    if (p.usage !== undefined) return [p.usage.prompt_tokens, p.usage.completion_tokens];
    if (p.timings !== undefined) counts = [p.timings.prompt_n + (p.timings.cache_n ?? 0), p.timings.predicted_n];
  }
  return counts;
}
