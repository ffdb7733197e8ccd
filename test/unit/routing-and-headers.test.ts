import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { stripHopByHop } from '../../src/data-plane/hop-by-hop.ts';
import { inferenceApi } from '../../src/data-plane/inference-route.ts';
import { proxyErrorResponse } from '../../src/data-plane/openai-error.ts';

describe('inferenceApi', () => {
  it('recognises POST to the OpenAI inference endpoints under any prefix', () => {
    assert.equal(inferenceApi('POST', '/v1/chat/completions'), 'chat');
    assert.equal(inferenceApi('POST', '/v1/completions?x=1'), 'completions');
    assert.equal(inferenceApi('POST', '/openai/v1/responses'), 'responses');
    assert.equal(inferenceApi('POST', '/serving/llama/v1/embeddings/'), 'embeddings');
  });
  it('leaves everything else unmeasured', () => {
    assert.equal(inferenceApi('GET', '/v1/chat/completions'), undefined);
    assert.equal(inferenceApi('POST', '/v1/models'), undefined);
    assert.equal(inferenceApi('POST', '/v1/chat/completions/extra'), undefined);
    assert.equal(inferenceApi('POST', '/v2/chat/completions'), undefined);
    assert.equal(inferenceApi('POST', '/api/chat'), undefined);
  });
});

describe('stripHopByHop', () => {
  it('drops hop-by-hop headers and those the Connection header names', () => {
    const headers = {
      connection: 'keep-alive, x-trace',
      'keep-alive': 'timeout=5',
      'transfer-encoding': 'chunked',
      'x-trace': '1',
      te: 'trailers',
      'content-type': 'application/json',
      authorization: 'Bearer k',
    };
    stripHopByHop(headers);
    assert.deepEqual(headers, { 'content-type': 'application/json', authorization: 'Bearer k' });
  });
});

describe('proxyErrorResponse', () => {
  it('answers in the OpenAI error shape', () => {
    const r = proxyErrorResponse('upstream_unreachable', 'ECONNREFUSED');
    assert.equal(r.status, 502);
    assert.deepEqual(JSON.parse(r.body), {
      error: { message: 'infermeter could not reach the model server (ECONNREFUSED)', type: 'upstream_error', param: null, code: 'upstream_unreachable' },
    });
  });
});
