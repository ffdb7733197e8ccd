// The AOM dialect over the same measurement as MindIE's: for a scripted mix of requests the
// histograms agree (same counts, sums equal up to the seconds-to-milliseconds factor), the
// service labels are on every series, and each dialect can be on alone.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { hostname as hostname_ } from 'node:os';
import { describe, it } from 'node:test';
import { onPath } from '../../src/metrics/container/container-sampler.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { sseScript, startReplayUpstream } from '../helpers/replay-upstream.ts';

const fixture = (name: string) => readFileSync(new URL(`../../fixtures/streams/${name}`, import.meta.url));

const PAIRS = [
  ['time_to_first_token_seconds', 'infer_service_first_token_cost', 1000],
  ['time_per_output_token_seconds', 'infer_service_per_token_cost', 1000],
  ['e2e_request_latency_seconds', 'infer_service_request_cost', 1000],
  ['request_prompt_tokens', 'infer_service_input_token_quantity', 1],
  ['request_generation_tokens', 'infer_service_output_token_quantity', 1],
] as const;

describe('AOM dialect', () => {
  it('agrees with the MindIE histograms over a scripted mix, with the service labels', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const streams = [
      fixture('vllm-chat-usage.sse'),
      fixture('ollama-chat-nousage.sse'),
      fixture('vllm-chat-error-midstream.sse'),
      fixture('tgi-chat-usage.sse'),
    ];
    let n = 0;
    upstream.respond((req) => {
      const body = JSON.parse(req.body.toString()) as { stream?: boolean };
      const i = n++;
      if (body.stream) return sseScript(streams[i % streams.length]!, 10 + i * 7, 3 + (i % 4));
      if (i % 5 === 4) return { status: 429, headers: { 'content-type': 'application/json' }, body: [{ data: '{"error":{"message":"slow down"}}' }] };
      return {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: [{ afterMs: 5, data: JSON.stringify({ usage: { prompt_tokens: 5 + i, completion_tokens: 2 * i } }) }],
      };
    });
    const app = await startProxy(t, upstream.url, {
      INFERMETER_DIALECTS: 'mindie,aom',
      INFERMETER_AOM_SERVICE_ID: '6d26f238-52b0-4184-8b50-d621a0c80eb4',
      INFERMETER_AOM_PROJECT_ID: 'proj-1',
      INFERMETER_AOM_SOURCE: 'pod-a',
    });
    const total = 16;
    const finished = nextFinished(app, total);
    for (let i = 0; i < total; i++) {
      const model = i % 3 === 0 ? 'qwen' : 'llama';
      const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model, stream: i % 2 === 0 }) });
      await res.arrayBuffer();
    }
    await finished;
    const m = await scrape(app);
    const service = { service_id: '6d26f238-52b0-4184-8b50-d621a0c80eb4', project_id: 'proj-1', source: 'pod-a' };
    for (const model of ['qwen', 'llama']) {
      for (const [mindie, aom, factor] of PAIRS) {
        const count = m.value(`${mindie}_count`, { model_name: model });
        assert.ok(count !== undefined && count > 0, `${mindie} has observations for ${model}`);
        assert.equal(m.value(`${aom}_count`, { ...service, model_name: model }), count, `${aom}_count for ${model}`);
        const sum = m.value(`${mindie}_sum`, { model_name: model })!;
        const aomSum = m.value(`${aom}_sum`, { ...service, model_name: model })!;
        assert.ok(Math.abs(aomSum - sum * factor) <= 1e-9 * Math.max(1, aomSum), `${aom}_sum ${aomSum} vs ${sum} x ${factor}`);
        assert.equal(m.value(`${aom}_bucket`, { ...service, model_name: model, le: '+Inf' }), count);
      }
    }
    // Every AOM series carries the service labels; unset ones (group_id, ...) are not emitted.
    for (const line of m.text.split('\n').filter((l) => /^(infer_service|ma_container)_/.test(l))) {
      assert.match(line, /service_id="6d26f238-52b0-4184-8b50-d621a0c80eb4"/, line);
      assert.match(line, /source="pod-a"/, line);
      assert.doesNotMatch(line, /group_id=|instance_name=|service_name=/, line);
    }
  });

  it('counts the client connections open on the data plane', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond(() => ({ status: 200, body: [], end: 'hang' }));
    const app = await startProxy(t, upstream.url, { INFERMETER_DIALECTS: 'aom' });
    const { port, hostname } = new URL(app.dataUrl);
    const sockets = [1, 2, 3].map(() =>
      connect(Number(port), hostname, function (this: Socket) {
        this.write(`GET /hold HTTP/1.1\r\nHost: x\r\n\r\n`);
      }),
    );
    t.after(() => {
      for (const s of sockets) s.destroy();
    });
    await upstream.received(3); // each connection's request reached the upstream: all three are accepted
    assert.equal((await scrape(app)).value('infer_service_request_connect_count', { source: hostname_() }), 3);
  });

  it('serves AOM alone, without the MindIE families', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const app = await startProxy(t, upstream.url, { INFERMETER_DIALECTS: 'aom' });
    await (await fetch(`${app.dataUrl}/v1/completions`, { method: 'POST', body: '{"model":"m"}' })).arrayBuffer();
    const text = (await scrape(app)).text;
    assert.match(text, /# TYPE infer_service_request_cost histogram/);
    assert.match(text, /# TYPE ma_container_memory_util gauge/);
    assert.doesNotMatch(text, /request_received_total|exposer_scrapes_total|time_to_first_token_seconds/);
    // The GPU and NPU families exist exactly where their tool is on the PATH: absent, not zero.
    assert.equal(/# TYPE ma_container_gpu_util gauge/.test(text), onPath('nvidia-smi'));
    assert.equal(/# TYPE ma_container_npu_util gauge/.test(text), onPath('npu-smi'));
  });

  it('serves MindIE alone by default, without the AOM families', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const app = await startProxy(t, upstream.url);
    const text = (await scrape(app)).text;
    assert.match(text, /# TYPE request_received_total counter/);
    assert.doesNotMatch(text, /infer_service_|ma_container_/);
  });

  it('applies bucket overrides to the families they name', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const app = await startProxy(t, upstream.url, {
      INFERMETER_DIALECTS: 'mindie,aom',
      INFERMETER_BUCKETS_INFER_SERVICE_REQUEST_COST: '100,2000',
      INFERMETER_BUCKETS_TIME_TO_FIRST_TOKEN_SECONDS: '0.5,2',
    });
    await (await fetch(`${app.dataUrl}/v1/completions`, { method: 'POST', body: '{"model":"m"}' })).arrayBuffer();
    const m = await scrape(app);
    assert.deepEqual(
      m.series('infer_service_request_cost_bucket').map((s) => s.labels.le),
      ['100', '2000', '+Inf'],
    );
    assert.match(m.text, /e2e_request_latency_seconds_bucket\{model_name="m",le="2.5"\}/, 'other families keep their defaults');
  });
});
