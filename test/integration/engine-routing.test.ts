// The inference route as the engines route it: every spelling of a path that a real uvicorn +
// FastAPI engine (vLLM's and SGLang's server) serves as inference is metered as that
// inference through infermeter, with its tokens; a spelling that some engine's reading routes as
// inference but this engine refuses (404, or 307 to add or drop a slash) is metered as a failed
// request of that inference, and any other is not metered at all. Each spelling is sent as raw
// bytes, once to the engine directly and once through infermeter, and both answers must be the
// same.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InferenceApi } from '../../src/measure/sample.ts';
import { samplesByModel } from '../helpers/samples-by-model.ts';
import { scrape, startProxy } from '../helpers/proxy-harness.ts';
import { seededRandom } from '../helpers/random.ts';
import { startUvicornEngine, uvicornSkip, uvicornVersion } from '../helpers/uvicorn-engine.ts';
import { rawPost } from '../helpers/post.ts';

/** Each route, its API, and whether its last segments alone are a route too (llama-server's `/chat/completions`, ...). */
const ROUTES: ReadonlyArray<[string, InferenceApi, bare: boolean]> = [
  ['/v1/chat/completions', 'chat', true],
  ['/v1/completions', 'completions', true],
  ['/v1/embeddings', 'embeddings', true],
  ['/v1/responses', 'responses', true],
  ['/v1/messages', 'messages', false],
  // vLLM's SageMaker route and SGLang's own.
  ['/invocations', 'chat', false],
  ['/generate', 'completions', false],
];
const SERVED: Readonly<Record<string, InferenceApi>> = {
  chat: 'chat',
  completions: 'completions',
  embeddings: 'embeddings',
  responses: 'responses',
  messages: 'messages',
};

function encode(c: string, upper: boolean): string {
  const h = c.charCodeAt(0).toString(16).padStart(2, '0');
  return `%${upper ? h.toUpperCase() : h}`;
}

/**
 * Spellings of each route: every character escaped alone, the attack's forms, dot and empty
 * segments, and random mixes; each with the API docs/security.md promises to meter it as (the
 * route's, when the path read as the engines read it, decoded once, `\\` as `/`, dot and empty
 * segments resolved, is that route under any prefix), or undefined: not inference, not metered.
 */
function spellings(): Map<string, InferenceApi | undefined> {
  const out = new Map<string, InferenceApi | undefined>();
  const random = seededRandom(30);
  for (const [path, api, bare] of ROUTES) {
    for (let i = 1; i < path.length; i++) {
      out.set(path.slice(0, i) + encode(path[i]!, i % 2 === 0) + path.slice(i + 1), api);
    }
    const [, v1, ...rest] = path.split('/');
    const tail = rest.join('/');
    for (const [form, inference] of [
      [`${path}#x`, true],
      [`${path}#`, true],
      [`${path}?a=1#frag/../x`, true],
      [`${path}/`, true],
      [`${path}/.`, true],
      [`${path}/..`, false],
      [`/${v1}/./${tail}`, true],
      [`/${v1}/x/../${tail}`, true],
      [`/${v1}//${tail}`, true],
      [`//${v1}/${tail}`, true],
      [`/${v1}/%2e/${tail}`, true],
      [`/${v1}/x/%2E%2E/${tail}`, true],
      [`/${v1}%2F${tail}`, true],
      [`/${v1}/${tail.replace('/', '%2F')}`, true],
      [`/${v1}/${tail.replace('/', '%2f')}`, true],
      // An escaped `#` or `?` is part of the path once decoded.
      [`${path}%23x`, false],
      [`${path}%3Fx`, false],
      // `/%v1/chat/completions`: the bare route under the prefix `/%v1`.
      [`${path.replace('/', '/%25')}`, bare],
      [`/x${path}`, true],
      [`/x/..${path}`, true],
      [`${path.slice(0, -1)}%${path.at(-1)!.charCodeAt(0).toString(16)}#%2e`, true],
      // A malformed escape stays as written.
      [`${path}%`, false],
      [`${path}%zz`, false],
      [path.replaceAll('/', '\\').replace('\\', '/'), true],
      [`/${v1}/${tail}\\`, true],
    ] as const)
      out.set(form, inference ? api : undefined);
    // Random mixes: each character escaped with some chance, now and then a fragment.
    for (let n = 0; n < 8; n++) {
      let s = '';
      for (const c of path) s += c !== '/' && random() < 0.3 ? encode(c, random() < 0.5) : c === '/' && random() < 0.1 ? '%2F' : c;
      if (random() < 0.3) s += '#' + 'x'.repeat(1 + Math.floor(random() * 4));
      // Not origin form when its first `/` is escaped: refused (400) by both, never inference.
      out.set(s, s.startsWith('/') ? api : undefined);
    }
  }
  // Not inference, passed through: the engine must get these bytes as they are too.
  for (const other of ['/v1/models/.', '/v1/x/../models', '/v1/models#x', '/v1/%6dodels', '/v1/chat/completions/x', '/v1/chat%252Fcompletions'])
    out.set(other, undefined);
  return out;
}

function bodyFor(path: string, model: string): string {
  if (/messages/i.test(decodeURIComponentSafe(path))) return JSON.stringify({ model, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
  if (/embeddings/i.test(decodeURIComponentSafe(path))) return JSON.stringify({ model, input: 'hi' });
  if (/responses/i.test(decodeURIComponentSafe(path))) return JSON.stringify({ model, input: 'hi' });
  return JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'hi' }], prompt: 'hi' });
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

describe(`inference routes as uvicorn routes them (${uvicornVersion ?? 'uvicorn missing'})`, { skip: uvicornSkip }, () => {
  it('meters every spelling the engine serves as inference, as that inference, with its tokens; one it refuses, as a failed request; any other not at all', async (t) => {
    const engine = await startUvicornEngine(t);
    // One model name per spelling, each its own label.
    const app = await startProxy(t, engine, { INFERMETER_MAX_MODELS: '10000' });
    const { samples, arrived, allArrived } = samplesByModel(app);

    const served: Array<{ target: string; model: string; api: InferenceApi }> = [];
    const refused: Array<{ target: string; model: string; api: InferenceApi; status: number }> = [];
    const notInference: Array<{ target: string; model: string }> = [];
    for (const [i, [target, promised]] of [...spellings()].entries()) {
      const model = `probe-${i}`;
      const direct = await rawPost(engine, target, bodyFor(target, model));
      const proxied = await rawPost(app.dataUrl, target, bodyFor(target, model));
      assert.equal(proxied.status, direct.status, `${target}: status through infermeter ${proxied.status}, directly ${direct.status}`);
      assert.equal(proxied.served, direct.served, `${target}: served by ${proxied.served} through infermeter, ${direct.served} directly`);
      const api = direct.served === undefined ? undefined : SERVED[direct.served];
      if (direct.status === 200 && api !== undefined) {
        assert.equal(promised, api, `${target}: served as ${api}, the test expects ${promised}`);
        served.push({ target, model, api });
      } else if (promised !== undefined) refused.push({ target, model, api: promised, status: direct.status });
      else notInference.push({ target, model });
    }
    // Every spelling the engine served, and every one it refused that is inference by the
    // engines' reading: one finished sample each (waited for, event by event; bounded, so that
    // one never metered fails with its name instead of hanging).
    await allArrived(served);
    await allArrived(refused, undefined, 'inference refused by the engine');
    // Then a last request: what finished before it has been recorded.
    await rawPost(app.dataUrl, '/v1/chat/completions', bodyFor('/v1/chat/completions', 'sentinel'));
    await arrived('sentinel');

    for (const { target, model, api } of served) {
      const s = samples.get(model)!;
      assert.equal(s.api, api, `${target}: metered as ${s.api}, served as ${api}`);
      assert.equal(s.outcome, 'success', `${target}: ${s.outcome}`);
      assert.equal(s.completionTokens, api === 'embeddings' ? undefined : 7, `${target}: tokens`);
      assert.equal(s.promptTokens, 3, `${target}: prompt tokens`);
    }
    // Refused by this engine, inference by the engines' reading: metered as a failed request of
    // that inference, with the engine's status, and counted so on /metrics.
    const exposition = await scrape(app);
    for (const { target, model, api, status } of refused) {
      const s = samples.get(model)!;
      assert.deepEqual([s.api, s.outcome, s.failure, s.status], [api, 'failed', 'upstream_status', status], `${target}: the engine answered ${status}`);
      assert.equal(exposition.sum('request_failed_total', { model_name: model }), 1, `${target}: request_failed_total`);
      assert.equal(exposition.sum('request_success_total', { model_name: model }) ?? 0, 0, `${target}: request_success_total`);
    }
    // Not inference by any engine's reading: passed through, never metered.
    for (const { target, model } of notInference) {
      assert.equal(samples.get(model), undefined, `${target}: not inference, but metered`);
      assert.equal(exposition.sum('request_received_total', { model_name: model }), undefined, `${target}: request_received_total`);
    }
    // The attack's spellings are among those served, so the test covers them.
    for (const target of [
      '/v1/chat%2Fcompletions',
      '/v1/%63hat/completions',
      '/v1/chat/completion%73',
      '/%761/chat/completions',
      '/v1/chat/completions#x',
      '/invocations',
      '/invocation%73',
      '/generate',
      '/%67enerate',
    ]) {
      assert.ok(
        served.some((s) => s.target === target),
        `${target} was not served by the engine`,
      );
    }
    assert.ok(served.length > 100, `${served.length} spellings served`);
    assert.ok(refused.length > 80, `${refused.length} spellings refused, metered as failed`);
  });
});
