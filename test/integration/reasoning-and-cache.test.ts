// The real recordings replayed through the proxy over real sockets: the usage's details
// (reasoning tokens, prompt tokens a cache served, Anthropic's cache writes) per model and per
// tenant exactly as each recording's usage states them, and nothing for a model whose usage
// states none.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it, type TestContext } from 'node:test';
import type { Infermeter } from '../../src/app.ts';
import { realStreamBytes, realStreamsSkip } from '../helpers/fixtures.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { sseScript, startReplayUpstream } from '../helpers/replay-upstream.ts';

const own = (file: string) => readFileSync(new URL(`../../fixtures/streams/${file}`, import.meta.url));

/** Recording per model: the request's model picks what the upstream replays. */
const RECORDINGS: Record<string, { bytes: () => Buffer; path: string }> = {
  'deepseek-reasoner': { bytes: () => realStreamBytes('vercelai-deepseek-tool-call.chunks.txt'), path: '/v1/chat/completions' },
  'gpt-5-nano': { bytes: () => realStreamBytes('aigateway-openai-chat-stream-detailed-usage.sse'), path: '/v1/chat/completions' },
  'gpt-4o-mini': { bytes: () => realStreamBytes('otel-openai-responses-stream.sse'), path: '/v1/responses' },
  'claude-text': { bytes: () => realStreamBytes('vercelai-anthropic-text.chunks.txt'), path: '/v1/messages' },
  'claude-nocache': { bytes: () => realStreamBytes('vercelai-anthropic-message-delta-input-tokens.chunks.txt'), path: '/v1/messages' },
  'claude-thinking': { bytes: () => own('anthropic-thinking-cache.sse'), path: '/v1/messages' },
};

async function proxyFor(t: TestContext, env: Record<string, string> = {}): Promise<Infermeter> {
  const upstream = await startReplayUpstream();
  t.after(() => upstream.close());
  upstream.respond((req) => {
    const model = (JSON.parse(req.body.toString()) as { model: string }).model;
    return sseScript(RECORDINGS[model]!.bytes(), 1, 0);
  });
  return startProxy(t, upstream.url, { INFERMETER_TENANT: 'header:x-team', ...env });
}

async function send(app: Infermeter, model: string, team: string): Promise<void> {
  const res = await fetch(`${app.dataUrl}${RECORDINGS[model]!.path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-team': team },
    body: JSON.stringify({ model, stream: true, max_tokens: 100 }),
  });
  await res.arrayBuffer();
}

describe('reasoning and cached prompt tokens from the usage', () => {
  it('add up per model and per tenant as the recordings state them, and nothing where they state none', { skip: realStreamsSkip }, async (t) => {
    const app = await proxyFor(t);
    const sends: Array<[string, string]> = [
      ['deepseek-reasoner', 'a'],
      ['deepseek-reasoner', 'b'],
      ['deepseek-reasoner', 'b'],
      ['gpt-5-nano', 'a'],
      ['gpt-4o-mini', 'a'],
      ['claude-text', 'a'],
      ['claude-nocache', 'a'],
      ['claude-thinking', 'b'],
    ];
    const finished = nextFinished(app, sends.length);
    for (const [model, team] of sends) await send(app, model, team);
    const samples = await finished;
    assert.deepEqual(
      samples.map((s) => s.outcome),
      sends.map(() => 'success'),
    );
    const m = await scrape(app);
    const perModel = (family: string, model: string) => m.value(`infermeter_${family}`, { model_name: model });
    const perTenant = (family: string, tenant: string, model: string) => m.value(`infermeter_tenant_${family}`, { tenant, model_name: model });
    // DeepSeek: 39 reasoning tokens, 320 of 339 prompt tokens cached (cached_tokens and
    // prompt_cache_hit_tokens both say 320: counted once).
    assert.equal(perModel('reasoning_tokens_total', 'deepseek-reasoner'), 3 * 39);
    assert.equal(perModel('cached_prompt_tokens_total', 'deepseek-reasoner'), 3 * 320);
    assert.equal(perTenant('reasoning_tokens_total', 'a', 'deepseek-reasoner'), 39);
    assert.equal(perTenant('reasoning_tokens_total', 'b', 'deepseek-reasoner'), 2 * 39);
    assert.equal(perTenant('cached_prompt_tokens_total', 'b', 'deepseek-reasoner'), 2 * 320);
    // gpt-5-nano spent all 100 tokens on reasoning; none of its 12 prompt tokens was cached.
    assert.equal(perModel('reasoning_tokens_total', 'gpt-5-nano'), 100);
    assert.equal(perModel('cached_prompt_tokens_total', 'gpt-5-nano'), 0);
    // The Responses API's input_tokens_details / output_tokens_details.
    assert.equal(perModel('reasoning_tokens_total', 'gpt-4o-mini'), 0);
    assert.equal(perModel('cached_prompt_tokens_total', 'gpt-4o-mini'), 0);
    // Anthropic: cache reads and writes stated (0 here), reasoning tokens never stated.
    assert.equal(perModel('cached_prompt_tokens_total', 'claude-text'), 0);
    assert.equal(perModel('cache_write_prompt_tokens_total', 'claude-text'), 0);
    assert.equal(perModel('reasoning_tokens_total', 'claude-text'), undefined, 'no reasoning_tokens in the usage: no series');
    // A usage without any detail: no series at all.
    for (const family of ['reasoning_tokens_total', 'cached_prompt_tokens_total', 'cache_write_prompt_tokens_total']) {
      assert.equal(perModel(family, 'claude-nocache'), undefined, `${family} for a usage without details`);
      assert.equal(perTenant(family, 'a', 'claude-nocache'), undefined, `tenant ${family} for a usage without details`);
    }
    // The own thinking stream: 1200 tokens read from the cache, 300 written; its prompt counts them all.
    assert.equal(perModel('cached_prompt_tokens_total', 'claude-thinking'), 1200);
    assert.equal(perModel('cache_write_prompt_tokens_total', 'claude-thinking'), 300);
    assert.equal(perTenant('cache_write_prompt_tokens_total', 'b', 'claude-thinking'), 300);
    assert.equal(m.value('prompt_tokens_total', { model_name: 'claude-thinking' }), 10 + 1200 + 300);
    // The details are parts of the token counts, never added to them.
    assert.equal(m.value('generation_tokens_total', { model_name: 'gpt-5-nano' }), 100);
    assert.equal(m.value('prompt_tokens_total', { model_name: 'deepseek-reasoner' }), 3 * 339);
  });

  it('registers no tenant families without per-tenant metering', { skip: realStreamsSkip }, async (t) => {
    const app = await proxyFor(t, { INFERMETER_TENANT: 'off' });
    const finished = nextFinished(app, 1);
    await send(app, 'deepseek-reasoner', 'a');
    await finished;
    const m = await scrape(app);
    assert.equal(m.value('infermeter_reasoning_tokens_total', { model_name: 'deepseek-reasoner' }), 39);
    assert.equal(m.text.includes('infermeter_tenant_'), false);
  });
});
