// The engine mapping against fixture expositions written from each engine's documented names.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { detectEngine } from '../../src/engine/engine-map.ts';
import { readEngineState, readMindieJson, type EngineSnapshot } from '../../src/engine/engine-state.ts';
import { parseExposition } from '../../src/engine/exposition-parser.ts';

const fixture = (name: string) => readFileSync(new URL(`../../fixtures/engine-metrics/${name}`, import.meta.url), 'utf8');
const read = (name: string, previous?: EngineSnapshot) => readEngineState(parseExposition(fixture(name)), { servedModel: 'served-model', previous })!;
const values = (s: EngineSnapshot) => Object.fromEntries([...s.values].map(([family, byModel]) => [family, Object.fromEntries(byModel)]));

describe("engine state from each engine's exposition", () => {
  it('vLLM v1: data-parallel engines summed or averaged, hit rate from counters, free blocks', () => {
    const s = read('vllm-v1.prom');
    assert.equal(s.engine, 'vllm');
    const m = 'meta-llama/Llama-3.1-8B-Instruct';
    assert.deepEqual(values(s), {
      num_requests_running: { [m]: 5 },
      num_requests_waiting: { [m]: 1 },
      num_preemptions_total: { [m]: 7 },
      npu_cache_usage_perc: { [m]: 0.5 },
      npu_prefix_cache_hit_rate: { [m]: 0.4 }, // 800 hits / 2000 queries over the engine's lifetime
    });
    assert.equal(s.remainBlocks, 1000, '2000 blocks, half in use');
  });

  it('vLLM v1: the hit rate over the increase since the previous scrape', () => {
    const first = read('vllm-v1.prom');
    const later = fixture('vllm-v1.prom')
      .replace(/prefix_cache_queries_total\{engine="0"(.*)\} 1000.0/, 'prefix_cache_queries_total{engine="0"$1} 1500.0')
      .replace(/prefix_cache_hits_total\{engine="0"(.*)\} 300.0/, 'prefix_cache_hits_total{engine="0"$1} 700.0');
    const s = readEngineState(parseExposition(later), { servedModel: 'x', previous: first })!;
    assert.equal(s.values.get('npu_prefix_cache_hit_rate')?.get('meta-llama/Llama-3.1-8B-Instruct'), 400 / 500);
  });

  it('vLLM v0: swapped requests, GPU and CPU cache usage, the hit-rate gauge', () => {
    const s = read('vllm-v0.prom');
    const m = 'Qwen/Qwen2.5-7B-Instruct';
    assert.deepEqual(values(s), {
      num_requests_running: { [m]: 7 },
      num_requests_waiting: { [m]: 4 },
      num_requests_swapped: { [m]: 1 },
      num_preemptions_total: { [m]: 12 },
      npu_cache_usage_perc: { [m]: 0.9 },
      cpu_cache_usage_perc: { [m]: 0.1 },
      npu_prefix_cache_hit_rate: { [m]: 0.42 },
    });
    assert.equal(s.remainBlocks, 500);
  });

  it('SGLang: tensor-parallel ranks counted once', () => {
    const s = read('sglang.prom');
    const m = 'Qwen/Qwen2.5-7B-Instruct';
    assert.equal(s.engine, 'sglang');
    assert.deepEqual(values(s), {
      num_requests_running: { [m]: 6 },
      num_requests_waiting: { [m]: 2 },
      npu_cache_usage_perc: { [m]: 0.35 },
      npu_prefix_cache_hit_rate: { [m]: 0.6 },
    });
    assert.equal(s.remainBlocks, undefined, 'SGLang reports tokens, not blocks');
  });

  it('TGI and llama.cpp: no model label, so the model the server serves', () => {
    const tgi = read('tgi.prom');
    assert.equal(tgi.engine, 'tgi');
    assert.deepEqual(values(tgi), { num_requests_running: { 'served-model': 4 }, num_requests_waiting: { 'served-model': 9 } });
    const llama = read('llamacpp.prom');
    assert.equal(llama.engine, 'llamacpp');
    assert.deepEqual(values(llama), {
      num_requests_running: { 'served-model': 1 },
      num_requests_waiting: { 'served-model': 3 },
      npu_cache_usage_perc: { 'served-model': 0.125 },
    });
  });

  it('MindIE: its own names, and its /metrics-json', () => {
    const s = read('mindie.prom');
    const m = 'llama3-70b';
    assert.equal(s.engine, 'mindie');
    assert.deepEqual(values(s), {
      num_requests_running: { [m]: 12 },
      num_requests_waiting: { [m]: 5 },
      num_requests_swapped: { [m]: 2 },
      num_preemptions_total: { [m]: 637 },
      npu_cache_usage_perc: { [m]: 0.8 },
      cpu_cache_usage_perc: { [m]: 0 },
      npu_prefix_cache_hit_rate: { [m]: 0.5 },
    });
    assert.deepEqual(readMindieJson(JSON.parse(fixture('mindie-metrics-json.json'))), { remainBlocks: 1024, waiting: 5, processing: 12 });
  });

  it('knows no engine in an unrelated exposition', () => {
    assert.equal(detectEngine(['process_cpu_seconds_total', 'http_requests_total']), undefined);
    assert.equal(readEngineState(parseExposition('# TYPE up gauge\nup 1\n'), { servedModel: 'x' }), undefined);
  });
});
