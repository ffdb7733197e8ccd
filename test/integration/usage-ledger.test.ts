// The usage ledger end to end: a scripted mix (streams with and without usage, non-streamed,
// failures, cancels; two tenants, two models) gives exactly one record per request, with the
// figures the metrics recorded, and `infermeter usage report` and `verify` agree with /metrics.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startInfermeter } from '../../src/app.ts';
import { runUsage, usageTotals } from '../../src/cli/usage-command.ts';
import { loadConfig } from '../../src/config/config.ts';
import { readSpool } from '../../src/ledger/spool-reader.ts';
import type { UsageEvent } from '../../src/ledger/usage-event.ts';
import { silentLogger } from '../../src/log.ts';
import { nextFinished } from '../helpers/proxy-harness.ts';
import { startReplayUpstream, type Script } from '../helpers/replay-upstream.ts';

const KINDS = ['usage', 'nousage', 'json', 'fail', 'cancel'] as const;
const token = (text: string) => ({ data: `data: {"choices":[{"index":0,"delta":{"content":"${text}"}}]}\n\n` });
const SSE = { 'content-type': 'text/event-stream' };

/** The upstream's answer to each kind; prompt sizes differ by model so that a mix-up shows. */
function answer(body: string): Script {
  const kind = /"content":"(\w+)"/.exec(body)![1]!;
  const prompt = body.includes('"m2"') ? 20 : 10;
  switch (kind) {
    case 'usage':
      return {
        status: 200,
        headers: SSE,
        body: [
          token('a'),
          token('b'),
          {
            data: `data: {"choices":[],"usage":{"prompt_tokens":${prompt},"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":1},"prompt_tokens_details":{"cached_tokens":4}}}\n\ndata: [DONE]\n\n`,
          },
        ],
      };
    case 'nousage':
      return { status: 200, headers: SSE, body: [token('a'), token('b'), token('c'), { data: 'data: [DONE]\n\n' }] };
    case 'json':
      return {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: [{ data: `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":${prompt},"completion_tokens":7}}` }],
      };
    case 'fail':
      return { status: 500, headers: { 'content-type': 'application/json' }, body: [{ data: '{"error":{"message":"boom"}}' }] };
    default: // cancel: three tokens, then nothing until the client leaves
      return { status: 200, headers: SSE, body: [token('x'), token('y'), token('z')], end: 'hang' };
  }
}

/** One request; a `cancel` leaves once its three tokens arrived. */
function send(dataUrl: string, id: string, tenant: string, model: string, kind: (typeof KINDS)[number]): Promise<void> {
  const stream = kind !== 'json' && kind !== 'fail';
  const body = JSON.stringify({ model, stream, messages: [{ role: 'user', content: kind }] });
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${dataUrl}/v1/chat/completions`,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'x-request-id': id, 'x-tenant': tenant } },
      (res) => {
        let seen = '';
        res.on('data', (c: Buffer) => {
          seen += c.toString();
          if (kind === 'cancel' && seen.includes('"z"')) {
            req.destroy();
            resolve();
          }
        });
        res.on('end', resolve);
      },
    );
    req.on('error', (e) => (req.destroyed && kind === 'cancel' ? resolve() : reject(e)));
    req.end(body);
  });
}

describe('usage ledger', () => {
  it('records a scripted mix once per request, with the figures the metrics recorded; report and verify agree with /metrics', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) => answer(req.body.toString()));
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-usage-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const config = loadConfig({
      INFERMETER_UPSTREAM: upstream.url,
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_UPSTREAM_METRICS: 'off',
      INFERMETER_TENANT: 'header:x-tenant',
      INFERMETER_USAGE_DIR: dir,
      INFERMETER_USAGE_SOURCE: 'infermeter://test-instance',
      INFERMETER_USAGE_FSYNC_MS: '10',
    });
    const app = await startInfermeter(config, { log: silentLogger });
    let closed = false;
    t.after(() => (closed ? undefined : app.close()));

    const plan: Array<{ id: string; tenant: string; model: string; kind: (typeof KINDS)[number] }> = [];
    for (const tenant of ['t1', 't2'])
      for (const model of ['m1', 'm2']) for (const kind of KINDS) plan.push({ id: `${tenant}-${model}-${kind}`, tenant, model, kind });
    // Each request twice, the second with the same X-Request-Id as the first: a client's id may repeat.
    const all = [...plan, ...plan];
    const finished = nextFinished(app, all.length);
    await Promise.all(all.map((r) => send(app.dataUrl, r.id, r.tenant, r.model, r.kind)));
    const samples = await finished;
    const exposition = await (await fetch(app.metricsUrl!)).text();
    await app.close(); // writes and syncs what waits
    closed = true;

    const events: UsageEvent[] = [];
    const read = await readSpool(dir, (e) => events.push(e));
    assert.equal(read.malformed, 0);
    assert.equal(events.length, all.length, 'one record per request');
    assert.equal(new Set(events.map((e) => e.id)).size, all.length, 'event ids unique though client ids repeat');
    assert.deepEqual(
      events.map((e) => e.data.seq).sort((a, b) => a - b),
      Array.from({ length: all.length }, (_, i) => i + 1),
    );
    assert.equal(new Set(events.map((e) => e.data.process_start_id)).size, 1);
    assert.ok(events.every((e) => e.source === 'infermeter://test-instance' && e.subject === e.data.tenant));

    // Each record's figures are its sample's (the metrics' input), request by request.
    const byRequest = (id: string) => ({
      records: events.filter((e) => e.data.request_id === id).map((e) => e.data),
      samples: samples.filter((s) => s.requestId === id),
    });
    for (const { id, kind, tenant, model } of plan) {
      const { records, samples: theirs } = byRequest(id);
      assert.equal(records.length, 2, id);
      const r = records[0]!;
      const s = theirs[0]!;
      assert.equal(r.tenant, tenant);
      assert.equal(r.model, model);
      assert.equal(r.route, 'chat');
      assert.equal(r.outcome, s.outcome, id);
      assert.equal(r.prompt_tokens, s.promptTokens ?? null, id);
      assert.equal(r.completion_tokens, s.completionTokens ?? null, id);
      const expected = {
        usage: ['success', 'engine', 'engine'],
        nousage: ['success', 'fallback', 'none'],
        json: ['success', 'engine', 'engine'],
        fail: ['failed', 'none', 'none'],
        cancel: ['cancelled', 'events', 'delivered'],
      }[kind];
      assert.deepEqual([r.outcome, r.usage_source, r.billing_basis], expected, id);
      if (kind === 'usage') assert.deepEqual([r.reasoning_tokens, r.cached_prompt_tokens], [1, 4]);
      if (kind === 'cancel') assert.deepEqual([r.prompt_tokens, r.completion_tokens], [null, 3], 'the tokens that reached the client, no prompt invented');
      if (kind === 'fail') assert.equal(r.failure, 'upstream_status');
    }

    // The bill: per tenant and model, the records' sums are the metrics' counters.
    const metricsFile = join(dir, 'scrape.prom');
    writeFileSync(metricsFile, exposition);
    const verified = await runUsage(['verify', '--dir', dir, '--metrics', metricsFile]);
    assert.equal(verified.code, 0, verified.out);
    assert.match(verified.out, /the records' sums equal the scrape's counters/);
    const { totals } = await usageTotals(dir);
    for (const p of totals) {
      const requests = [
        ...exposition.matchAll(new RegExp(`^infermeter_tenant_requests_total\\{tenant="${p.tenant}",model_name="${p.model}",outcome="\\w+"\\} (\\d+)`, 'gm')),
      ];
      assert.equal(
        p.requests,
        requests.reduce((n, m) => n + Number(m[1]), 0),
        `${p.tenant} ${p.model}`,
      );
      const counter = (name: string) => Number(new RegExp(`^${name}\\{tenant="${p.tenant}",model_name="${p.model}"\\} (\\d+)`, 'm').exec(exposition)?.[1]);
      assert.equal(p.prompt, counter('infermeter_tenant_prompt_tokens_total'));
      assert.equal(p.completion, counter('infermeter_tenant_generation_tokens_total'));
    }
    assert.deepEqual(
      totals.map((p) => `${p.tenant} ${p.model}`),
      ['t1 m1', 't1 m2', 't2 m1', 't2 m2'],
    );
    const csv = await runUsage(['report', '--dir', dir, '--format', 'csv']);
    assert.equal(csv.code, 0);
    assert.equal(
      csv.out.split('\n')[0],
      'tenant,model,requests,prompt_tokens,completion_tokens,reasoning_tokens,cached_prompt_tokens,price_version,cost_nanos',
    );
    // t1, m1: usage 10+2 (x2), json 10+7 (x2), nousage 0+0 (x2), cancel 3 (x2).
    assert.equal(csv.out.split('\n')[1], 't1,m1,10,40,24,2,8,,');
    const table = await runUsage(['report', '--dir', dir]);
    assert.match(
      table.out.split('\n')[0]!,
      /^tenant\s+model\s+requests\s+prompt_tokens\s+completion_tokens\s+reasoning_tokens\s+cached_prompt_tokens\s+price_version\s+cost_nanos$/,
    );
    assert.match(table.out.split('\n')[1]!, /^t1\s+m1\s+10\s+40\s+24\s+2\s+8\s+-\s+-$/);
    for (const bad of [['report'], ['report', '--dir', dir, '--format', 'xml'], ['report', '--dir', dir, '--from', 'yesterday'], ['bill']]) {
      const refused = await runUsage(bad);
      assert.equal(refused.code, 2, bad.join(' '));
      assert.match(refused.err, /infermeter usage report --dir D/, 'the usage is shown');
    }
    // A range that holds none of them.
    const none = await runUsage(['report', '--dir', dir, '--to', '2000-01-01']);
    assert.equal(none.out.trim().split('\n').length, 1, 'the header only');
    assert.ok(readdirSync(dir).some((n) => n.endsWith('.jsonl')));
  });

  it("verify finds a gap in a writer's sequence and a repeated id", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-usage-verify-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const rec = (id: string, seq: number) =>
      JSON.stringify({
        specversion: '1.0',
        id,
        source: 's',
        type: 't',
        time: '2026-12-01T00:00:00Z',
        data: { seq, process_start_id: 'p', model: 'm', tenant: null },
      });
    writeFileSync(join(dir, 'usage-20261201T000000000Z-000000.jsonl'), [rec('a', 1), rec('b', 2), rec('b', 2), rec('d', 5), '{"torn'].join('\n') + '\n');
    const out = await runUsage(['verify', '--dir', dir]);
    assert.equal(out.code, 1);
    assert.match(out.out, /gap: writer s p: seq 3-4 missing \(of 1-5\)/);
    assert.match(out.out, /duplicates: 1 records/);
    assert.match(out.out, /malformed: 1 lines/);
    assert.equal(readFileSync(join(dir, 'usage-20261201T000000000Z-000000.jsonl'), 'utf8').split('\n').length, 6);
  });
});
