// The vllm dialect's engine-only families and HTTP labels: the engine's series relabelled as the
// dialect's own (engine="0", data-parallel engines summed, other ranks left out, every other
// label as written), and the bounded handler and method labels of forwarded routes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseExposition } from '../../src/engine/exposition-parser.ts';
import { relabelEngineOnly } from '../../src/engine/vllm-families.ts';
import { vllmHandler, vllmMethod } from '../../src/metrics/dialects/vllm-http.ts';

const ENGINE = `# HELP vllm:num_requests_waiting_by_reason Number of requests waiting.
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 3.0
vllm:num_requests_waiting_by_reason{engine="1",model_name="m",reason="capacity"} 2.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="deferred"} 1.0
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_bucket{engine="0",le="1.0",model_name="m"} 4.0
vllm:iteration_tokens_total_bucket{engine="1",le="1.0",model_name="m"} 6.0
vllm:iteration_tokens_total_bucket{engine="0",le="+Inf",model_name="m"} 5.0
vllm:iteration_tokens_total_bucket{engine="1",le="+Inf",model_name="m"} 7.0
vllm:iteration_tokens_total_count{engine="0",model_name="m"} 5.0
vllm:iteration_tokens_total_count{engine="1",model_name="m"} 7.0
vllm:iteration_tokens_total_sum{engine="0",model_name="m"} 40.0
vllm:iteration_tokens_total_sum{engine="1",model_name="m"} 60.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m",tp_rank="0"} 10.0
vllm:prefix_cache_hits_total{engine="0",model_name="m",tp_rank="1"} 10.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1.0
`;

describe('engine-only vLLM families', () => {
  it('are relabelled as the dialect\'s own: engines summed under engine="0", tensor-parallel ranks other than 0 left out', () => {
    const out = relabelEngineOnly(parseExposition(ENGINE));
    const lines = (name: string) => (out.get(name) ?? []).map((s) => `${s.name}${JSON.stringify(s.labels)} ${s.value}`);
    assert.deepEqual(lines('vllm:num_requests_waiting_by_reason'), [
      'vllm:num_requests_waiting_by_reason{"model_name":"m","engine":"0","reason":"capacity"} 5',
      'vllm:num_requests_waiting_by_reason{"model_name":"m","engine":"0","reason":"deferred"} 1',
    ]);
    assert.deepEqual(lines('vllm:iteration_tokens_total'), [
      'vllm:iteration_tokens_total_bucket{"model_name":"m","engine":"0","le":"1.0"} 10',
      'vllm:iteration_tokens_total_bucket{"model_name":"m","engine":"0","le":"+Inf"} 12',
      'vllm:iteration_tokens_total_count{"model_name":"m","engine":"0"} 12',
      'vllm:iteration_tokens_total_sum{"model_name":"m","engine":"0"} 100',
    ]);
    assert.deepEqual(lines('vllm:prefix_cache_hits_total'), ['vllm:prefix_cache_hits_total{"model_name":"m","engine":"0"} 10']);
    assert.equal(out.has('vllm:num_requests_running'), false, 'not an engine-only family: the in-flight rule serves it');
    assert.equal(out.has('vllm:mm_cache_hits_total'), false, 'absent from the engine: absent here');
  });

  it("label forwarded routes by vLLM's templates, bounded", () => {
    assert.equal(vllmHandler('/v1/models'), '/v1/models');
    assert.equal(vllmHandler('/tokenize?x=1'), '/tokenize');
    assert.equal(vllmHandler('/health'), undefined, "vLLM's instrumentator leaves it out");
    assert.equal(vllmHandler('/metrics'), undefined);
    assert.equal(vllmHandler('/v1/models/some-model'), 'none', 'an untemplated path is "none"');
    assert.equal(vllmHandler(`/${'x'.repeat(5000)}`), 'none');
    assert.equal(vllmMethod('GET'), 'GET');
    assert.equal(vllmMethod('BREW'), 'OTHER');
    assert.equal(vllmMethod(undefined), 'OTHER');
  });
});
