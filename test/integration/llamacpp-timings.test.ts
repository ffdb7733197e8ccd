// The current llama-server states a stream's token counts without being asked (its `timings`,
// on the last chunk), and moves them onto the usage-only chunk when usage is asked: infermeter,
// once it has seen that, stops injecting include_usage, so a client that did not ask gets the
// very bytes it gets directly (timings included), and the counts are still the engine's.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { currentLlama, currentLlamaStream, type LlamaCounts } from '../helpers/llamacpp-current.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';
import { post } from '../helpers/post.ts';

const COUNTS: LlamaCounts = { promptN: 9, cacheN: 3, predictedN: 4 };
const BODY = '{"model":"tiny","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}';

describe('in front of the current llama.cpp', () => {
  it('stops injecting once the engine shows it states the counts itself: the same bytes as directly, the engine token counts', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) => currentLlama(COUNTS)(req.body));
    const app = await startProxy(t, upstream.url);
    const direct = (await post(`${upstream.url}/v1/chat/completions`, BODY)).bytes;
    assert.ok(direct.toString().includes('"timings":{"cache_n":3,"prompt_n":9'), 'directly, the last chunk carries the timings');

    // The first stream is injected (nothing is known yet): its usage-only chunk carries the timings.
    let finished = nextFinished(app, 1);
    await post(`${app.dataUrl}/v1/chat/completions`, BODY);
    let [sample] = await finished;
    assert.equal(upstream.requests.at(-1)!.body.toString(), `{"stream_options":{"include_usage":true},${BODY.slice(1)}`);
    assert.deepEqual([sample!.promptTokens, sample!.completionTokens, sample!.usageSource], [12, 4, 'upstream']);

    // From then on: nothing injected, the client's bytes as directly, the counts from the timings.
    for (let i = 0; i < 3; i++) {
      finished = nextFinished(app, 1);
      const proxied = (await post(`${app.dataUrl}/v1/chat/completions`, BODY)).bytes;
      [sample] = await finished;
      assert.equal(upstream.requests.at(-1)!.body.toString(), BODY, 'the body went as the client wrote it');
      assert.ok(proxied.equals(direct), `byte-identical to the direct answer:\n${proxied.toString()}\n---\n${direct.toString()}`);
      assert.equal(sample!.outcome, 'success');
      assert.deepEqual(
        [sample!.promptTokens, sample!.completionTokens, sample!.cachedPromptTokens, sample!.usageSource],
        [COUNTS.promptN + COUNTS.cacheN, COUNTS.predictedN, COUNTS.cacheN, 'timings'],
      );
    }
    // A client that asks for usage gets it, timings and all, as directly.
    const asking = `{"stream_options":{"include_usage":true},${BODY.slice(1)}`;
    assert.ok((await post(`${app.dataUrl}/v1/chat/completions`, asking)).bytes.equals(Buffer.from(currentLlamaStream(COUNTS, true))));
    const m = await scrape(app);
    assert.equal(m.value('infermeter_usage_injection_active'), 0, 'not injecting: the engine states the counts');
    assert.equal(m.value('infermeter_usage_injected_total', { body: 'held' }), 1);
    assert.equal(m.value('infermeter_usage_chunks_stripped_total'), 1);
    assert.equal(m.value('infermeter_streams_without_usage_total', { model_name: 'tiny' }), 0);
    assert.equal(m.value('prompt_tokens_total', { model_name: 'tiny' }), 5 * 12);
  });

  it('injects again, for good, when a stream it did not inject states no counts', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    let engine = currentLlama(COUNTS);
    upstream.respond((req) => engine(req.body));
    const app = await startProxy(t, upstream.url);
    await post(`${app.dataUrl}/v1/chat/completions`, BODY); // learns: the engine states its counts
    // The engine behind changes to one that states nothing unless asked (no timings).
    const silent = (body: Buffer) => {
      const script = currentLlama(COUNTS)(body);
      const text = String(script.body![0]!.data).replace(/,"timings":\{[^}]*\}/, '');
      return { ...script, body: [{ data: text }] };
    };
    engine = silent;
    let finished = nextFinished(app, 1);
    await post(`${app.dataUrl}/v1/chat/completions`, BODY);
    let [sample] = await finished;
    assert.equal(upstream.requests.at(-1)!.body.toString(), BODY, 'not injected while the engine was believed');
    assert.equal(sample!.usageSource, 'fallback', 'this one stream states nothing');
    finished = nextFinished(app, 1);
    await post(`${app.dataUrl}/v1/chat/completions`, BODY);
    [sample] = await finished;
    assert.equal(upstream.requests.at(-1)!.body.toString(), `{"stream_options":{"include_usage":true},${BODY.slice(1)}`, 'injected again');
    assert.deepEqual([sample!.promptTokens, sample!.completionTokens, sample!.usageSource], [12, 4, 'upstream']);
    // The sign again does not turn injection off a second time: no flapping that loses a count each turn.
    engine = currentLlama(COUNTS);
    await post(`${app.dataUrl}/v1/chat/completions`, BODY);
    await post(`${app.dataUrl}/v1/chat/completions`, BODY);
    assert.equal(upstream.requests.at(-1)!.body.toString(), `{"stream_options":{"include_usage":true},${BODY.slice(1)}`);
    assert.equal((await scrape(app)).value('infermeter_usage_injection_active'), 1);
  });
});
