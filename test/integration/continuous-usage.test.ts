// INFERMETER_CONTINUOUS_USAGE in front of the simulator (taught vLLM's continuous_usage_stats):
// a client that asked for no usage gets the bytes it gets from the simulator directly, though
// every chunk infermeter received carried usage; a stream the client cancels after N tokens is
// recorded with its exact prompt tokens and N completion tokens, basis `engine`, in the usage
// record, the access log and the cost counters. An upstream that refuses the field is handled
// as one that refuses include_usage: the request is sent again without it, injection goes off.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startInfermeter } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import type { UsageEvent } from '../../src/ledger/usage-event.ts';
import { readSpool } from '../../src/ledger/spool-reader.ts';
import { startSimServer } from '../../src/sim/model-server.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';
import { silentLogger } from '../../src/log.ts';
import { post } from '../helpers/post.ts';

const MODEL = 'sim-llama-8b';
const MESSAGES = [{ role: 'user', content: 'how much did this cost, exactly?' }];
const PRICES = `currency: USD
version: "v1"
models:
  - match: "*"
    per_million_tokens: { prompt: 1.0, completion: 2.0 }
`;

/** The simulator's randomised parts (ids, created) made equal. */
const normalised = (bytes: Buffer): string =>
  bytes
    .toString()
    .replace(/"id":"[^"]*"/g, '"id":"x"')
    .replace(/"created":\d+/g, '"created":0');

/** A POST that reads the whole answer. */

/** A stream the client leaves once `n` content chunks arrived (the simulator holds after them). */
function cancelAfter(url: string, n: number): Promise<string> {
  const body = JSON.stringify({ model: MODEL, stream: true, messages: MESSAGES, max_tokens: 40 });
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'x-tenant': 'team-a', 'x-sim-ttft-ms': '0', 'x-sim-gap-ms': '0', 'x-sim-hold-after': String(n) },
      },
      (res) => {
        let seen = '';
        res.on('data', (c: Buffer) => {
          seen += c.toString();
          if ((seen.match(/"delta":\{"content":"[^"]/g) ?? []).length === n) {
            req.destroy();
            resolve(seen);
          }
        });
        res.on('end', () => reject(new Error(`the stream ended before ${n} tokens: ${seen}`)));
      },
    );
    req.on('error', (e) => (req.destroyed ? undefined : reject(e)));
    req.end(body);
  });
}

describe('continuous usage (INFERMETER_CONTINUOUS_USAGE)', () => {
  it('gives a client that asked for no usage the bytes it gets directly, and the simulator gives usage on every chunk when asked', async (t) => {
    const sim = await startSimServer({ ttftMs: 0, interTokenMs: 0 });
    t.after(() => sim.close());
    const app = await startProxy(t, sim.url, { INFERMETER_CONTINUOUS_USAGE: 'on', INFERMETER_MAX_INSPECT_BYTES: '65536' });
    for (const api of ['chat', 'completions'] as const) {
      const path = api === 'chat' ? '/v1/chat/completions' : '/v1/completions';
      const request =
        api === 'chat' ? { model: MODEL, stream: true, messages: MESSAGES, max_tokens: 7 } : { model: MODEL, stream: true, prompt: 'hi', max_tokens: 7 };
      const asked = (await post(`${sim.url}${path}`, { ...request, stream_options: { include_usage: true, continuous_usage_stats: true } })).bytes;
      const chunks = asked
        .toString()
        .split('\n\n')
        .filter((e) => e.startsWith('data: {'));
      assert.ok(chunks.length >= 8, `${api}: ${asked}`);
      assert.ok(
        chunks.every((e) => /,"usage":\{"prompt_tokens":\d+,[^{}]*"completion_tokens":\d+[^{}]*\}\}$/.test(e)),
        `${api}: the simulator writes usage as every chunk's last member: ${asked}`,
      );
      const direct = (await post(`${sim.url}${path}`, request)).bytes;
      assert.ok(!direct.toString().includes('usage'), `${api}: no usage when not asked`);
      const finished = nextFinished(app, 1);
      const through = (await post(`${app.dataUrl}${path}`, request)).bytes;
      const [sample] = await finished;
      assert.equal(normalised(through), normalised(direct), `${api}: the same bytes as directly`);
      assert.deepEqual([sample!.usageSource, sample!.completionTokens], ['upstream', 7], api);
    }
    // A body past INFERMETER_MAX_INSPECT_BYTES streams through, the field appended at its end (the
    // upstream is known to take it by now): the same bytes again.
    const large = { model: MODEL, stream: true, messages: [{ role: 'user', content: 'x'.repeat(100_000) }], max_tokens: 5 };
    const direct = (await post(`${sim.url}/v1/chat/completions`, large)).bytes;
    const finished = nextFinished(app, 1);
    const through = (await post(`${app.dataUrl}/v1/chat/completions`, large)).bytes;
    const [sample] = await finished;
    assert.equal(normalised(through), normalised(direct), 'a streamed body: the same bytes as directly');
    assert.deepEqual([sample!.usageSource, sample!.completionTokens], ['upstream', 5]);
    const m = await scrape(app);
    assert.equal(m.value('infermeter_usage_injected_total', { body: 'held' }), 2);
    assert.equal(m.value('infermeter_usage_injected_total', { body: 'streamed' }), 1);
    assert.equal(m.value('infermeter_usage_chunks_stripped_total'), 3, 'the usage-only chunks');
  });

  it("removes the usage members a client's own continuous_usage_stats brings once include_usage is injected, the option off", async (t) => {
    const sim = await startSimServer({ ttftMs: 0, interTokenMs: 0 });
    t.after(() => sim.close());
    const app = await startProxy(t, sim.url, { INFERMETER_MAX_INSPECT_BYTES: '65536' });
    // vLLM takes continuous_usage_stats only with include_usage: directly, this client gets no usage.
    for (const content of ['hi', 'x'.repeat(100_000)]) {
      const request = { model: MODEL, stream: true, messages: [{ role: 'user', content }], max_tokens: 4, stream_options: { continuous_usage_stats: true } };
      const direct = (await post(`${sim.url}/v1/chat/completions`, request)).bytes;
      assert.ok(!direct.toString().includes('usage'));
      const through = (await post(`${app.dataUrl}/v1/chat/completions`, request)).bytes;
      assert.equal(normalised(through), normalised(direct), `a body of ${content.length} characters`);
    }
    const m = await scrape(app);
    assert.equal(m.value('infermeter_usage_injected_total', { body: 'held' }), 1);
    assert.equal(m.value('infermeter_usage_injected_total', { body: 'streamed' }), 1);
  });

  it('records a stream cancelled after N tokens with its exact prompt tokens and N completion tokens, basis engine, and prices them', async (t) => {
    const sim = await startSimServer({ ttftMs: 0, interTokenMs: 0 });
    t.after(() => sim.close());
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-continuous-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const prices = join(dir, 'prices.yaml');
    writeFileSync(prices, PRICES);
    const accessLog = join(dir, 'access.log');
    const config = loadConfig({
      INFERMETER_UPSTREAM: sim.url,
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_UPSTREAM_METRICS: 'off',
      INFERMETER_TENANT: 'header:x-tenant',
      INFERMETER_USAGE_DIR: join(dir, 'spool'),
      INFERMETER_USAGE_FSYNC_MS: '10',
      INFERMETER_PRICES_FILE: prices,
      INFERMETER_ACCESS_LOG: accessLog,
      INFERMETER_CONTINUOUS_USAGE: 'on',
    });
    const app = await startInfermeter(config, { log: silentLogger });
    let closed = false;
    t.after(() => (closed ? undefined : app.close()));

    // The prompt's tokens as the engine counts them: its final usage, asked directly.
    const whole = (
      await post(`${sim.url}/v1/chat/completions`, {
        model: MODEL,
        stream: true,
        messages: MESSAGES,
        max_tokens: 1,
        stream_options: { include_usage: true },
      })
    ).bytes;
    const promptTokens = Number(/"prompt_tokens":(\d+)/.exec(whole.toString())![1]);
    assert.ok(promptTokens > 1);

    const N = 5;
    const finished = nextFinished(app, 1);
    const seen = await cancelAfter(`${app.dataUrl}/v1/chat/completions`, N);
    assert.ok(!seen.includes('usage'), `the client that asked for none sees no usage: ${seen}`);
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.usageSource, sample!.promptTokens, sample!.completionTokens], ['cancelled', 'upstream', promptTokens, N]);
    const cost = BigInt(promptTokens * 1000 + N * 2000); // 1 and 2 USD per million tokens: 1000 and 2000 nanos a token
    const m = await scrape(app);
    assert.equal(
      BigInt(m.value('infermeter_tenant_cost_nanos_total', { tenant: 'team-a', model_name: MODEL, kind: 'prompt' })!) +
        BigInt(m.value('infermeter_tenant_cost_nanos_total', { tenant: 'team-a', model_name: MODEL, kind: 'completion' })!),
      cost,
    );
    await app.close();
    closed = true;

    const events: UsageEvent[] = [];
    await readSpool(join(dir, 'spool'), (e) => events.push(e));
    assert.equal(events.length, 1);
    const r = events[0]!.data;
    assert.deepEqual(
      [r.outcome, r.usage_source, r.billing_basis, r.prompt_tokens, r.completion_tokens, r.cost_nanos],
      ['cancelled', 'engine', 'engine', promptTokens, N, Number(cost)],
    );
    const line = JSON.parse(readFileSync(accessLog, 'utf8').trim()) as Record<string, unknown>;
    assert.deepEqual(
      [line.outcome, line.usage_source, line.billing_basis, line.prompt_tokens, line.completion_tokens],
      ['cancelled', 'upstream', 'engine', promptTokens, N],
    );
  });

  it('treats an upstream that refuses continuous_usage_stats as one that refuses include_usage: sent again without it, injection off', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const refusal = JSON.stringify({
      object: 'error',
      message: "[{'type': 'extra_forbidden', 'loc': ('body', 'stream_options', 'continuous_usage_stats'), 'msg': 'Extra inputs are not permitted'}]",
      type: 'BadRequestError',
      param: null,
      code: 400,
    });
    upstream.respond((req) =>
      req.body.toString().includes('continuous_usage_stats')
        ? { status: 400, headers: { 'content-type': 'application/json' }, body: [{ data: refusal }] }
        : {
            status: 200,
            headers: { 'content-type': 'text/event-stream' },
            body: [{ data: 'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n' }],
          },
    );
    const app = await startProxy(t, upstream.url, { INFERMETER_CONTINUOUS_USAGE: 'on' });
    const body = { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] };
    const first = (await post(`${app.dataUrl}/v1/chat/completions`, body)).bytes;
    assert.equal(first.toString(), 'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n', 'the client gets the answer to its own body');
    assert.equal(upstream.requests.length, 2);
    assert.equal(
      upstream.requests[0]!.body.toString(),
      `{"stream_options":{"include_usage":true,"continuous_usage_stats":true},${JSON.stringify(body).slice(1)}`,
    );
    assert.equal(upstream.requests[1]!.body.toString(), JSON.stringify(body), 'sent again as the client wrote it');
    await post(`${app.dataUrl}/v1/chat/completions`, body);
    assert.equal(upstream.requests.length, 3);
    assert.equal(upstream.requests[2]!.body.toString(), JSON.stringify(body), 'injection is off');
    assert.equal((await scrape(app)).value('infermeter_usage_injection_active'), 0);
  });
});
