// The inference route as llama-server routes it: every spelling of a path that a real cpp-httplib
// server with llama-server's route table (b4747's and current master's) serves as inference is
// metered as that inference through infermeter, with its tokens; a spelling it does not serve as
// inference is never counted a success. cpp-httplib decodes `%uXXXX` as well as `%XX` and serves
// OpenAI's routes without /v1 too (`/chat/completions`, what the OpenAI SDK sends when its base
// URL lacks /v1) and its own (`/completion`, `/infill`, `/embedding`). Each spelling is sent as
// raw bytes, once to the engine directly and once through infermeter, and both answers must be
// the same. Against Debian's cpp-httplib by default; CPPHTTPLIB_HEADER=<path to httplib.h> runs
// it against llama.cpp's vendored one.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InferenceApi } from '../../src/measure/sample.ts';
import { httplibSkip, httplibVersion, startHttplibEngine } from '../helpers/httplib-engine.ts';
import { samplesByModel } from '../helpers/samples-by-model.ts';
import { startProxy } from '../helpers/proxy-harness.ts';
import { seededRandom } from '../helpers/random.ts';
import { rawPost } from '../helpers/post.ts';

/** llama-server's inference routes (test/peers/httplib_engine.cpp registers the same). */
const ROUTES: ReadonlyArray<[string, InferenceApi]> = [
  ['/completion', 'completions'],
  ['/completions', 'completions'],
  ['/v1/completions', 'completions'],
  ['/chat/completions', 'chat'],
  ['/v1/chat/completions', 'chat'],
  ['/infill', 'completions'],
  ['/embedding', 'embeddings'],
  ['/embeddings', 'embeddings'],
  ['/v1/embeddings', 'embeddings'],
  ['/responses', 'responses'],
  ['/v1/responses', 'responses'],
  ['/v1/messages', 'messages'],
];
const SERVED: Readonly<Record<string, InferenceApi>> = {
  chat: 'chat',
  completions: 'completions',
  embeddings: 'embeddings',
  responses: 'responses',
  messages: 'messages',
};

const hex2 = (c: string, upper: boolean): string => {
  const h = c.charCodeAt(0).toString(16).padStart(2, '0');
  return `%${upper ? h.toUpperCase() : h}`;
};
const hex4 = (c: string, upper: boolean): string => {
  const h = c.charCodeAt(0).toString(16).padStart(4, '0');
  return `%u${upper ? h.toUpperCase() : h}`;
};

/** Spellings of each route: every character escaped alone (%XX and %uXXXX), surrogates, the finding's forms, and random mixes. */
function spellings(): string[] {
  const out = new Set<string>();
  const random = seededRandom(49);
  for (const [path] of ROUTES) {
    for (let i = 1; i < path.length; i++) {
      out.add(path.slice(0, i) + hex2(path[i]!, i % 2 === 0) + path.slice(i + 1));
      out.add(path.slice(0, i) + hex4(path[i]!, i % 2 === 1) + path.slice(i + 1));
    }
    const last = path.lastIndexOf('/');
    for (const form of [
      path,
      `${path}#x`,
      `${path}?a=%u0041`,
      `${path}/`,
      `/x${path}`,
      `${path.slice(0, last)}%uD800${path.slice(last)}`,
      `${path.slice(0, last)}%u002F${path.slice(last + 1)}`,
      `${path.slice(0, last)}%u002f${path.slice(last + 1)}`,
      `${path}%uDFFF`,
      `${path}%u00`,
      `${path}%U0073`,
      `${path.slice(0, -1)}%U${path.at(-1)!.charCodeAt(0).toString(16).padStart(4, '0')}`,
      `${path.slice(0, -1)}%u01${path.at(-1)!.charCodeAt(0).toString(16)}`,
    ])
      out.add(form);
    for (let n = 0; n < 6; n++) {
      let s = '';
      for (const c of path) {
        const r = random();
        s += c === '/' ? (r < 0.15 ? '%u002F' : c) : r < 0.2 ? hex4(c, random() < 0.5) : r < 0.4 ? hex2(c, random() < 0.5) : c;
      }
      out.add(s);
    }
  }
  // The finding's spellings, and routes of other engines llama-server refuses (metered as failed).
  for (const other of ['/v1/%u0063hat/completions', '/invocations', '/api/chat', '/generate', '/generate_stream', '/api/generate', '/v1/messages/count_tokens'])
    out.add(other);
  // Not inference, passed through: the engine must get these bytes as they are too.
  for (const other of ['/tokenize', '/rerank', '/v1/rerank', '/apply-template', '/%u0074okenize', '/v1/%u0072erank']) out.add(other);
  return [...out];
}

function bodyFor(model: string): string {
  return JSON.stringify({ model, stream: true, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }], prompt: 'hi', input: 'hi' });
}

describe(`inference routes as cpp-httplib routes them, llama-server's table (${httplibVersion ?? 'cpp-httplib missing'})`, { skip: httplibSkip }, () => {
  it('meters every spelling llama-server serves as inference, as that inference, with its tokens', async (t) => {
    const engine = await startHttplibEngine(t);
    const app = await startProxy(t, engine, { INFERMETER_MAX_MODELS: '10000' });
    const { samples, arrived, allArrived } = samplesByModel(app);

    const served: Array<{ target: string; model: string; api: InferenceApi }> = [];
    const notServed: Array<{ target: string; model: string; status: number }> = [];
    let refusedTargets = 0;
    for (const [i, target] of spellings().entries()) {
      const model = `probe-${i}`;
      const direct = await rawPost(engine, target, bodyFor(model));
      const proxied = await rawPost(app.dataUrl, target, bodyFor(model));
      if (!target.startsWith('/')) {
        // Not origin form until decoded (`%uD800/completion`): cpp-httplib serves it, infermeter
        // refuses the target (400, never forwarded), so it is never served unmetered.
        assert.equal(proxied.status, 400, target);
        refusedTargets++;
        continue;
      }
      assert.equal(proxied.status, direct.status, `${target}: status through infermeter ${proxied.status}, directly ${direct.status}`);
      assert.equal(proxied.served, direct.served, `${target}: served by ${proxied.served} through infermeter, ${direct.served} directly`);
      const api = direct.served === undefined ? undefined : SERVED[direct.served];
      if (direct.status === 200 && api !== undefined) served.push({ target, model, api });
      else notServed.push({ target, model, status: direct.status });
    }
    // Every spelling served: one finished sample each (bounded, so that one never metered fails
    // with its name instead of hanging).
    await allArrived(served);
    // Then a last request: what finished before it has been recorded.
    await rawPost(app.dataUrl, '/v1/chat/completions', bodyFor('sentinel'));
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
    // Other engines' routes llama-server refuses: metered, as failed requests.
    for (const target of ['/invocations', '/api/chat', '/generate']) {
      const refused = notServed.find((s) => s.target === target)!;
      await arrived(refused.model);
      assert.equal(samples.get(refused.model)!.outcome, 'failed', target);
    }
    // The finding's spellings are among those served, so the test covers them.
    for (const target of ['/v1/%u0063hat/completions', '/chat/completions', '/completion', '/completions', '/infill', '/embedding', '/embeddings']) {
      assert.ok(
        served.some((s) => s.target === target),
        `${target} was not served by the engine`,
      );
    }
    assert.ok(served.length > 200, `${served.length} spellings served`);
    assert.ok(refusedTargets > 0, `${refusedTargets} targets refused`);
  });
});
