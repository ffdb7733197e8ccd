// Usage counted honestly (issue 49, findings 5 and 13) through two workers: a stream the client
// asked without usage (`include_usage: false`) keeps the spec's zeros on the spec's families,
// and infermeter counts what it delivered beside them, per model and per tenant, and in the
// access log; usage that lies (a part larger than its whole, a count of 2^53 - 1) is cut or
// refused, and counted.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startClusterPrimary } from '../../src/cluster/primary.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/log.ts';
import { keyTenant } from '../../src/tenants/tenant-of.ts';
import { parseExposition } from '../helpers/exposition.ts';
import { clusterEnv } from '../helpers/proxy-harness.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';

const SSE = { 'content-type': 'text/event-stream' };
const token = (t: string) => `data: {"choices":[{"index":0,"delta":{"content":"${t}"}}]}\n\n`;
const usage = (u: string) => `data: {"choices":[],"usage":${u}}\n\ndata: [DONE]\n\n`;

function send(url: string, body: string, key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/chat/completions`,
      { method: 'POST', agent: false, headers: { connection: 'close', 'content-type': 'application/json', authorization: `Bearer ${key}` } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('usage counted honestly', () => {
  it('counts the streams without usage and what they delivered per model and tenant, and cuts or refuses usage that lies, across workers', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    // The engine answers by the model asked: what each case needs.
    upstream.respond((req) => {
      const model = /"model":"([^"]+)"/.exec(req.body.toString())?.[1];
      if (model === 'nousage') return { status: 200, headers: SSE, body: [{ data: token('a') + token('b') }, { data: `${token('c')}data: [DONE]\n\n` }] };
      if (model === 'huge')
        return { status: 200, headers: SSE, body: [{ data: token('a') + token('b') + usage(`{"prompt_tokens":${2 ** 53 - 1},"completion_tokens":2}`) }] };
      if (model === 'reason')
        return {
          status: 200,
          headers: SSE,
          body: [{ data: token('a') + usage('{"prompt_tokens":5,"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":9}}') }],
        };
      return {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: [
          { data: '{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":4,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":10}}}' },
        ],
      };
    });
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-usage-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const log = join(dir, 'access.log');
    const env = clusterEnv(upstream.url, { INFERMETER_TENANT: 'api-key', INFERMETER_ACCESS_LOG: log });
    const app = await startClusterPrimary(loadConfig(env), env, { log: createLogger('warn', () => undefined), workers: 2 });
    let closed = false;
    t.after(() => (closed ? undefined : app.close()));

    const noUsage = '{"model":"nousage","stream":true,"stream_options":{"include_usage":false},"messages":[]}';
    const jobs: Array<Promise<number>> = [];
    for (let i = 0; i < 4; i++) jobs.push(send(app.dataUrl, noUsage, 'sk-alpha'));
    for (let i = 0; i < 2; i++) jobs.push(send(app.dataUrl, noUsage, 'sk-beta'));
    jobs.push(send(app.dataUrl, '{"model":"huge","stream":true,"messages":[]}', 'sk-alpha'));
    jobs.push(send(app.dataUrl, '{"model":"reason","stream":true,"messages":[]}', 'sk-alpha'));
    jobs.push(send(app.dataUrl, '{"model":"cached","messages":[]}', 'sk-alpha'));
    assert.deepEqual(await Promise.all(jobs), Array(9).fill(200));
    assert.ok(new Set(upstream.requests.map((r) => r.remotePort)).size >= 2, 'the requests came through more than one worker');

    const m = parseExposition(await (await fetch(app.metricsUrl!)).text());
    const alpha = keyTenant('sk-alpha');
    const beta = keyTenant('sk-beta');
    // The spec's families keep the spec's zeros for a stream without usage.
    assert.equal(m.value('generation_tokens_total', { model_name: 'nousage' }), 0);
    assert.equal(m.value('prompt_tokens_total', { model_name: 'nousage' }), 0);
    assert.equal(m.value('infermeter_streams_without_usage_total', { model_name: 'nousage' }), 6);
    // Beside them, what was delivered: 3 token events a stream.
    assert.equal(m.value('infermeter_streams_without_usage_token_events_total', { model_name: 'nousage' }), 18);
    assert.equal(m.value('infermeter_tenant_streams_without_usage_total', { tenant: alpha, model_name: 'nousage' }), 4);
    assert.equal(m.value('infermeter_tenant_streams_without_usage_total', { tenant: beta, model_name: 'nousage' }), 2);
    assert.equal(m.value('infermeter_tenant_streams_without_usage_token_events_total', { tenant: alpha, model_name: 'nousage' }), 12);
    assert.equal(m.value('infermeter_tenant_streams_without_usage_token_events_total', { tenant: beta, model_name: 'nousage' }), 6);

    // 2^53 - 1 prompt tokens: the report refused, the stream counted as without usage.
    assert.equal(m.value('infermeter_usage_rejected_total', { model_name: 'huge', reason: 'too_large' }), 1);
    assert.equal(m.value('prompt_tokens_total', { model_name: 'huge' }), 0);
    assert.equal(m.value('infermeter_tenant_prompt_tokens_total', { tenant: alpha, model_name: 'huge' }), 0);
    assert.equal(m.value('infermeter_streams_without_usage_total', { model_name: 'huge' }), 1);
    assert.equal(m.value('infermeter_streams_without_usage_token_events_total', { model_name: 'huge' }), 2);
    // Parts cut to their wholes.
    assert.equal(m.value('infermeter_reasoning_tokens_total', { model_name: 'reason' }), 3);
    assert.equal(m.value('infermeter_usage_rejected_total', { model_name: 'reason', reason: 'reasoning_over_completion' }), 1);
    assert.equal(m.value('infermeter_cached_prompt_tokens_total', { model_name: 'cached' }), 4);
    assert.equal(m.value('infermeter_usage_rejected_total', { model_name: 'cached', reason: 'cached_over_prompt' }), 1);
    assert.equal(m.value('infermeter_usage_rejected_total', { model_name: 'nousage', reason: 'too_large' }), 0);

    await app.close(); // flushes every worker's access log
    closed = true;
    const lines = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(lines.length, 9);
    const pick = (l: Record<string, unknown>) => [l.usage_source, l.prompt_tokens, l.completion_tokens];
    for (const l of lines.filter((l) => l.model === 'nousage')) assert.deepEqual(pick(l), ['events', undefined, 3], 'what the stream delivered');
    assert.deepEqual(pick(lines.find((l) => l.model === 'huge')!), ['events', undefined, 2]);
    assert.deepEqual(pick(lines.find((l) => l.model === 'reason')!), ['upstream', 5, 3]);
  });
});
