// The exposition passes `promtool check metrics` (Debian package prometheus). promtool lints
// names as well as parsing; the only findings allowed are on names the specs fix (MindIE's
// avg_*_throughput_toks_per_s, ModelArts AOM's gauges named *_count / *_total and its megabyte
// units, vLLM's `vllm:` prefix), each listed here on purpose and in docs/metrics.md.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { startSimServer } from '../../src/sim/model-server.ts';
import { startOpenMeter } from '../helpers/openmeter.ts';
import { scrape, startProxy } from '../helpers/proxy-harness.ts';
import { sseScript, startReplayUpstream } from '../helpers/replay-upstream.ts';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NODE_CLIENT_LINT } from '../helpers/exposition.ts';

const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
const available = promtool.status === 0;
// In CI a missing promtool is a failure, not a skip: .ci/run installs it.
const skip = available || process.env.CI ? false : 'promtool not installed (Debian package prometheus; .ci/run installs it)';

const SPEC_MANDATED_LINT = new Set([
  'avg_prompt_throughput_toks_per_s metric names should not contain abbreviated units',
  'avg_generation_throughput_toks_per_s metric names should not contain abbreviated units',
  'infer_service_request_total non-counter metrics should not have "_total" suffix',
  'infer_service_request_connect_count non-histogram and non-summary metrics should not have "_count" suffix',
  'infer_service_token_count non-histogram and non-summary metrics should not have "_count" suffix',
  'ma_container_memory_used_megabytes use base unit "bytes" instead of "megabytes"',
  'ma_container_gpu_mem_used_megabytes use base unit "bytes" instead of "megabytes"',
  'ma_container_npu_memory_used_megabytes use base unit "bytes" instead of "megabytes"',
  // vLLM's names carry its `vllm:` prefix, which promtool reserves for recording rules.
  ...[
    'vllm:num_requests_running',
    'vllm:num_requests_waiting',
    'vllm:kv_cache_usage_perc',
    'vllm:num_preemptions_total',
    'vllm:prompt_tokens_total',
    'vllm:generation_tokens_total',
    'vllm:request_success_total',
    'vllm:request_prompt_tokens',
    'vllm:request_generation_tokens',
    'vllm:time_to_first_token_seconds',
    'vllm:inter_token_latency_seconds',
    'vllm:request_time_per_output_token_seconds',
    'vllm:e2e_request_latency_seconds',
    'vllm:request_decode_time_seconds',
    'vllm:request_queue_time_seconds',
    'vllm:request_prefill_time_seconds',
    'vllm:request_inference_time_seconds',
    'vllm:request_params_max_tokens',
    'vllm:request_max_num_generation_tokens',
    'vllm:request_params_n',
    // vLLM 0.10's names, served beside the new ones.
    'vllm:time_per_output_token_seconds',
    'vllm:time_per_output_tokens_seconds',
    'vllm:gpu_cache_usage_perc',
    // The engine-only families, relabelled from the engine's own /metrics (INFERMETER_UPSTREAM_METRICS).
    'vllm:iteration_tokens_total',
    'vllm:num_requests_waiting_by_reason',
    'vllm:prefix_cache_hits_total',
    'vllm:prefix_cache_queries_total',
    'vllm:prompt_tokens_by_source_total',
  ].map((name) => `${name} metric names should not contain ':'`),
  // vLLM names this histogram (tokens per engine step) with _total; its dashboards query it so.
  'vllm:iteration_tokens_total non-counter metrics should not have "_total" suffix',
  // The Node.js process families under the names prom-client gives them.
  ...NODE_CLIENT_LINT,
]);

describe('promtool check metrics', { skip }, () => {
  for (const dialects of ['mindie', 'mindie,aom', 'aom', 'vllm', 'mindie,aom,vllm', 'otel', 'mindie,otel'])
    it(`accepts a live /metrics after mixed traffic (INFERMETER_DIALECTS=${dialects})`, async (t) => {
      assert.ok(available, 'promtool must be installed');
      const upstream = await startReplayUpstream();
      t.after(() => upstream.close());
      const vllm = readFileSync(new URL('../../fixtures/streams/vllm-chat-usage.sse', import.meta.url));
      upstream.respond((req) => {
        const body = req.body.toString();
        if (body.includes('"fail"')) return { status: 500, body: [{ data: 'oops' }] };
        if (body.includes('"stream":true')) return sseScript(vllm, 0, 0);
        return { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{"usage":{"prompt_tokens":3,"completion_tokens":4}}' }] };
      });
      // A clock of our own, so that an AOM collection period can end without waiting for it.
      let now = 0;
      // The usage ledger on, with a sink: its families are linted too.
      const usageDir = mkdtempSync(join(tmpdir(), 'infermeter-promtool-usage-'));
      t.after(() => rmSync(usageDir, { recursive: true, force: true, maxRetries: 5 }));
      const sink = await startOpenMeter(t);
      // Prices too: the cost families are linted (docs/chargeback.md).
      const prices = join(usageDir, 'prices.yaml');
      writeFileSync(
        prices,
        'currency: USD\nversion: v1\nmodels:\n  - match: "*"\n    per_million_tokens: { prompt: 0.2, completion: 0.6 }\n    per_hour: 12.5\n',
      );
      const env = {
        INFERMETER_DIALECTS: dialects,
        INFERMETER_AOM_SERVICE_ID: 'svc "1"',
        INFERMETER_USAGE_DIR: usageDir,
        INFERMETER_USAGE_SINK: sink.url,
        INFERMETER_PRICES_FILE: prices,
      };
      const app = await startProxy(t, upstream.url, env, { clock: () => now });
      const bodies = [
        '{"model":"llama","stream":true}',
        '{"model":"llama"}',
        '{"model":"qu\\"ote\\\\back\\nline","stream":true}',
        '{"model":"fail"}',
        'not json',
      ];
      for (const body of bodies) await (await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body })).arrayBuffer();
      await scrape(app); // a first scrape, so that the exposer summary has observations
      now += 31_000; // one AOM collection period (30 s) ends: its gauges join the exposition
      const text = (await scrape(app)).text;
      if (dialects.includes('aom')) assert.match(text, /infer_service_request_total\{/);
      assert.match(text, /^infermeter_cost_nanos_total\{model_name="llama",kind="completion"\} \d+$/m);
      if (dialects.includes('vllm')) assert.match(text, /vllm:request_time_per_output_token_seconds_bucket\{/);
      if (dialects.includes('otel'))
        assert.match(text, /gen_ai_server_request_duration_seconds_bucket\{.*gen_ai_request_model="qu\\"ote\\\\back_line"/, 'otel: label values escaped');
      // The otel dialect's model label is gen_ai_request_model: model_name comes with the others.
      if (dialects !== 'otel') assert.match(text, /model_name="qu\\"ote\\\\back_line"/, 'label values escaped; the control character replaced');
      const result = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
      const findings = `${result.stdout}\n${result.stderr}`
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l !== '');
      const unexpected = findings.filter((l) => !SPEC_MANDATED_LINT.has(l));
      assert.deepEqual(unexpected, [], 'promtool findings beyond the spec-mandated names');
      // 0: clean; 3: lint findings only (all of them the allowed ones above). 1 would be a parse error.
      assert.ok(result.status === 0 || result.status === 3, `promtool exit ${result.status}`);
    });

  it("accepts a live /metrics with the engine's vLLM families relabelled (INFERMETER_DIALECTS=mindie,vllm, the engine read)", async (t) => {
    assert.ok(available, 'promtool must be installed');
    const sim = await startSimServer({ ttftMs: 1, interTokenMs: 1, defaultTokens: 3, models: ['m'] });
    t.after(() => sim.close());
    const app = await startProxy(t, sim.url, {
      INFERMETER_DIALECTS: 'mindie,vllm',
      INFERMETER_UPSTREAM_METRICS: `${sim.url}/metrics`,
      INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '3600',
    });
    await (await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' })).arrayBuffer();
    await app.metrics.engineScraper!.scrapeOnce();
    const text = (await scrape(app)).text;
    assert.match(text, /^vllm:iteration_tokens_total_bucket\{/m, 'the engine-only families are served');
    const result = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    const findings = `${result.stdout}\n${result.stderr}`
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '');
    assert.deepEqual(
      findings.filter((l) => !SPEC_MANDATED_LINT.has(l)),
      [],
      'promtool findings beyond the documented ones',
    );
    assert.ok(findings.includes('vllm:iteration_tokens_total non-counter metrics should not have "_total" suffix'), findings.join('\n'));
    assert.ok(result.status === 3, `promtool exit ${result.status}`);
  });
});
