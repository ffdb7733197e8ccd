// The inference route as the engines route it: every spelling of a path that a real uvicorn +
// FastAPI engine (vLLM's and SGLang's server) serves as inference is metered as that
// inference through infermeter, with its tokens; a spelling the engine does not serve as
// inference is never counted a success. Each spelling is sent as raw bytes, once to the engine
// directly and once through infermeter, and both answers must be the same.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InferenceApi } from '../../src/measure/sample.ts';
import { samplesByModel } from '../helpers/samples-by-model.ts';
import { startProxy } from '../helpers/proxy-harness.ts';
import { seededRandom } from '../helpers/random.ts';
import { rawExchange } from '../helpers/raw-peers.ts';
import { startUvicornEngine, uvicornSkip, uvicornVersion } from '../helpers/uvicorn-engine.ts';

const ROUTES: ReadonlyArray<[string, InferenceApi]> = [
  ['/v1/chat/completions', 'chat'],
  ['/v1/completions', 'completions'],
  ['/v1/embeddings', 'embeddings'],
  ['/v1/responses', 'responses'],
  ['/v1/messages', 'messages'],
  // vLLM's SageMaker route and SGLang's own.
  ['/invocations', 'chat'],
  ['/generate', 'completions'],
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

/** Spellings of each route: every character escaped alone, the attack's forms, dot and empty segments, and random mixes. */
function spellings(): string[] {
  const out = new Set<string>();
  const random = seededRandom(30);
  for (const [path] of ROUTES) {
    for (let i = 1; i < path.length; i++) {
      out.add(path.slice(0, i) + encode(path[i]!, i % 2 === 0) + path.slice(i + 1));
    }
    const [, v1, ...rest] = path.split('/');
    const tail = rest.join('/');
    for (const form of [
      `${path}#x`,
      `${path}#`,
      `${path}?a=1#frag/../x`,
      `${path}/`,
      `${path}/.`,
      `${path}/..`,
      `/${v1}/./${tail}`,
      `/${v1}/x/../${tail}`,
      `/${v1}//${tail}`,
      `//${v1}/${tail}`,
      `/${v1}/%2e/${tail}`,
      `/${v1}/x/%2E%2E/${tail}`,
      `/${v1}%2F${tail}`,
      `/${v1}/${tail.replace('/', '%2F')}`,
      `/${v1}/${tail.replace('/', '%2f')}`,
      `${path}%23x`,
      `${path}%3Fx`,
      `${path.replace('/', '/%25')}`,
      `/x${path}`,
      `/x/..${path}`,
      `${path.slice(0, -1)}%${path.at(-1)!.charCodeAt(0).toString(16)}#%2e`,
      `${path}%`,
      `${path}%zz`,
      path.replaceAll('/', '\\').replace('\\', '/'),
      `/${v1}/${tail}\\`,
    ])
      out.add(form);
    // Random mixes: each character escaped with some chance, now and then a fragment.
    for (let n = 0; n < 8; n++) {
      let s = '';
      for (const c of path) s += c !== '/' && random() < 0.3 ? encode(c, random() < 0.5) : c === '/' && random() < 0.1 ? '%2F' : c;
      if (random() < 0.3) s += '#' + 'x'.repeat(1 + Math.floor(random() * 4));
      out.add(s);
    }
  }
  // Not inference, passed through: the engine must get these bytes as they are too.
  for (const other of ['/v1/models/.', '/v1/x/../models', '/v1/models#x', '/v1/%6dodels', '/v1/chat/completions/x', '/v1/chat%252Fcompletions']) out.add(other);
  return [...out];
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

interface Answer {
  readonly status: number;
  readonly served: string | undefined;
  readonly body: string;
}

async function post(base: string, target: string, body: string): Promise<Answer> {
  const head = `POST ${target} HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
  const { text } = await rawExchange(base, head + body);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
  const served = /\r\nx-served: ([a-z]+)\r\n/i.exec(text)?.[1];
  const split = text.indexOf('\r\n\r\n');
  return { status, served, body: split === -1 ? '' : text.slice(split + 4) };
}

describe(`inference routes as uvicorn routes them (${uvicornVersion ?? 'uvicorn missing'})`, { skip: uvicornSkip }, () => {
  it('meters every spelling the engine serves as inference, as that inference, with its tokens', async (t) => {
    const engine = await startUvicornEngine(t);
    // One model name per spelling, each its own label.
    const app = await startProxy(t, engine, { INFERMETER_MAX_MODELS: '10000' });
    const { samples, arrived, allArrived } = samplesByModel(app);

    const served: Array<{ target: string; model: string; api: InferenceApi }> = [];
    const notServed: Array<{ target: string; model: string; status: number }> = [];
    const all = spellings();
    for (const [i, target] of all.entries()) {
      const model = `probe-${i}`;
      const direct = await post(engine, target, bodyFor(target, model));
      const proxied = await post(app.dataUrl, target, bodyFor(target, model));
      assert.equal(proxied.status, direct.status, `${target}: status through infermeter ${proxied.status}, directly ${direct.status}`);
      assert.equal(proxied.served, direct.served, `${target}: served by ${proxied.served} through infermeter, ${direct.served} directly`);
      const api = direct.served === undefined ? undefined : SERVED[direct.served];
      if (direct.status === 200 && api !== undefined) served.push({ target, model, api });
      else notServed.push({ target, model, status: direct.status });
    }
    // Every spelling the engine served: one finished sample each (waited for, event by event;
    // bounded, so that one never metered fails with its name instead of hanging).
    await allArrived(served);
    // Then a last request: what finished before it has been recorded.
    await post(app.dataUrl, '/v1/chat/completions', bodyFor('/v1/chat/completions', 'sentinel'));
    await arrived('sentinel');

    for (const { target, model, api } of served) {
      const s = samples.get(model)!;
      assert.equal(s.api, api, `${target}: metered as ${s.api}, served as ${api}`);
      assert.equal(s.outcome, 'success', `${target}: ${s.outcome}`);
      assert.equal(s.completionTokens, api === 'embeddings' ? undefined : 7, `${target}: tokens`);
      assert.equal(s.promptTokens, 3, `${target}: prompt tokens`);
    }
    for (const { target, model, status } of notServed) {
      const s = samples.get(model);
      assert.ok(s === undefined || s.outcome !== 'success', `${target}: the engine answered ${status}, not inference, but it was counted a success`);
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
  });
});
