import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { forwardHeaders, headerFilter, HOP_BY_HOP_HEADERS } from '../../src/data-plane/hop-by-hop.ts';
import { offersWebsocket } from '../../src/data-plane/data-server.ts';
import { httplibDecode, inferenceRoute, routedPath } from '../../src/data-plane/inference-route.ts';
import { proxyErrorResponse } from '../../src/data-plane/openai-error.ts';
import { pathJoiner } from '../../src/data-plane/upstream-request.ts';
import { seededRandom } from '../helpers/random.ts';
// http-proxy-3's own outgoing-request setup: the measured routes' lean path must join paths as it does.
import { setupOutgoing } from 'http-proxy-3/dist/lib/http-proxy/common.js';

const inferenceApi = (method: string | undefined, url: string | undefined) => inferenceRoute(method, url)?.api;

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
    assert.equal(inferenceApi('POST', '/v1/chats'), undefined);
    assert.equal(inferenceApi('POST', '/v1/chat'), undefined);
    assert.equal(inferenceApi('POST', '/messages'), undefined);
    for (const url of [
      '/tokenize',
      '/detokenize',
      '/apply-template',
      '/rerank',
      '/v1/rerank',
      '/props',
      '/slots/0',
      '/api/tags',
      '/api/show',
      '/v1/messages/count_tokens',
      '/health',
    ]) {
      assert.equal(inferenceApi('POST', url), undefined, url);
    }
  });
  it("meters llama-server's, vLLM's, SGLang's, TGI's and Ollama's own inference routes", () => {
    const routes: ReadonlyArray<[string, string, boolean]> = [
      // llama-server (b4747 and current master), without /v1 and under its --api-prefix.
      ['/chat/completions', 'chat', true],
      ['/completions', 'completions', false],
      ['/completion', 'completions', false],
      ['/infill', 'completions', false],
      ['/embedding', 'embeddings', false],
      ['/embeddings', 'embeddings', false],
      ['/responses', 'responses', false],
      ['/prefix/completion', 'completions', false],
      ['/v2/chat/completions', 'chat', true],
      // vLLM's SageMaker route, SGLang's and TGI's, Ollama's.
      ['/invocations', 'chat', false],
      ['/generate', 'completions', false],
      ['/generate_stream', 'completions', false],
      ['/api/chat', 'chat', false],
      ['/api/generate', 'completions', false],
      ['/api/embed', 'embeddings', false],
      ['/api/embeddings', 'embeddings', false],
      // The OpenAI routes take stream_options (usage injection), under any prefix.
      ['/v1/chat/completions', 'chat', true],
      ['/v1/completions', 'completions', true],
      ['/x/v1/completions', 'completions', true],
      ['/v1/embeddings', 'embeddings', false],
      ['/v1/messages', 'messages', false],
    ];
    for (const [url, api, streamOptions] of routes) {
      assert.deepEqual(inferenceRoute('POST', url), { api, streamOptions }, url);
      assert.deepEqual(inferenceRoute('POST', `${url}/?x=1#y`), { api, streamOptions }, url);
      assert.equal(inferenceRoute('GET', url), undefined, url);
    }
  });
  it('decodes %uXXXX as cpp-httplib does (llama-server), beside the uvicorn reading', () => {
    assert.equal(httplibDecode('/v1/%u0063hat/completions'), '/v1/chat/completions');
    assert.equal(httplibDecode('/v1/chat%u002Fcompletions%2f'), '/v1/chat/completions/');
    // A surrogate decodes to nothing; a malformed %u stays; %U is not an escape.
    assert.equal(httplibDecode('/v1/chat%uD800/completions'), '/v1/chat/completions');
    assert.equal(httplibDecode('/v1/%u006/x%u'), '/v1/%u006/x%u');
    assert.equal(httplibDecode('/v1/%U0063hat'), '/v1/%U0063hat');
    assert.equal(httplibDecode('/v1/%u00e9'), '/v1/\u00e9');
    for (const url of [
      '/v1/%u0063hat/completions',
      '/%u0063ompletion',
      '/v1/chat%uDFFF/completions',
      '/%u0069nfill',
      '/v1/embedding%u0073',
      '/api%u002fchat',
    ]) {
      assert.notEqual(inferenceApi('POST', url), undefined, url);
    }
    assert.equal(inferenceApi('POST', '/v1/%u0063hat/completions'), 'chat');
    // Not a route in either reading: non-ASCII never makes an ASCII letter; uvicorn's %XX reading kept.
    assert.equal(inferenceApi('POST', '/v1/chat/%u0163ompletions'), undefined);
    assert.equal(inferenceApi('POST', '/v1/chat/%U0063ompletions'), undefined);
    assert.equal(inferenceApi('POST', '/x%u/v1/chat%2Fcompletions'), 'chat');
  });
});

describe('routedPath: the path as engines route it', () => {
  it('decodes escapes, cuts query and fragment, resolves dot and empty segments and backslashes', () => {
    assert.equal(routedPath('/v1/chat/completions'), '/v1/chat/completions');
    assert.equal(routedPath('/v1/chat%2Fcompletions?x=%2F'), '/v1/chat/completions');
    assert.equal(routedPath('/%761/%63hat/completion%73'), '/v1/chat/completions');
    assert.equal(routedPath('/v1/chat/completions#x?y'), '/v1/chat/completions');
    assert.equal(routedPath('/v1/x/../chat/./completions/'), '/v1/chat/completions/');
    assert.equal(routedPath('/v1/x/%2e%2E/chat//completions'), '/v1/chat/completions');
    assert.equal(routedPath('/../../v1/chat/completions/..'), '/v1/chat/');
    assert.equal(routedPath('/v1\\chat\\completions'), '/v1/chat/completions');
    // Decoded once, as uvicorn decodes: %252F is a literal %2F, not a separator.
    assert.equal(routedPath('/v1/chat%252Fcompletions'), '/v1/chat%2Fcompletions');
    // A malformed escape stays as written.
    assert.equal(routedPath('/v1/chat/completions%zz%4'), '/v1/chat/completions%zz%4');
    assert.equal(routedPath('/'), '/');
  });
  it('makes the spellings uvicorn serves as inference inference', () => {
    for (const url of ['/v1/chat%2Fcompletions', '/v1/%63hat/completions', '/v1/chat/completion%73', '/%761/chat/completions', '/v1/chat/completions#x']) {
      assert.equal(inferenceApi('POST', url), 'chat', url);
    }
    assert.equal(inferenceApi('POST', '/v1/embedding%73'), 'embeddings');
    assert.equal(inferenceApi('POST', '/v1/chat%252Fcompletions'), undefined);
  });
});

describe('offersWebsocket: which upgrades go to the websocket path', () => {
  it('takes a websocket offer, alone or among others, in any case; declines h2c and the rest', () => {
    const offer = (upgrade: string | undefined) => offersWebsocket({ headers: upgrade === undefined ? {} : { upgrade } } as never);
    for (const u of ['websocket', 'WebSocket', 'h2c, websocket', 'websocket ,foo']) assert.equal(offer(u), true, u);
    for (const u of ['h2c', 'HTTP/2.0', 'websockets', 'TLS/1.2', '', undefined]) assert.equal(offer(u), false, String(u));
  });
});

describe('pathJoiner', () => {
  const upstreams = [
    'http://m:8000',
    'http://m:8000/',
    'http://m:8000/serving/llama',
    'http://m:8000/serving/llama/',
    'http://m:8000/p?key=1',
    'http://[::1]:8000/x/',
  ];
  const urls = [
    '/v1/chat/completions',
    '/v1/chat/completions?a=1&b=2',
    '/a//b/v1/embeddings',
    '/%7Euser/v1/responses',
    'http://client.example/v1/chat/completions?z=9',
    '//evil.example/v1/chat/completions',
  ];
  it('joins the upstream prefix and query with the client path as http-proxy-3 does', () => {
    for (const upstream of upstreams) {
      const join = pathJoiner(new URL(upstream));
      for (const url of urls) {
        const expected = (
          setupOutgoing({} as never, { target: new URL(upstream) }, { url, headers: {}, method: 'POST', httpVersionMajor: 1 } as never) as { path: string }
        ).path;
        assert.equal(join(url), expected, `${upstream} + ${url}`);
      }
    }
  });
  it('puts one slash between prefix and path and merges the queries, upstream first', () => {
    assert.equal(pathJoiner(new URL('http://m/serving/llama/'))('/v1/chat/completions'), '/serving/llama/v1/chat/completions');
    assert.equal(pathJoiner(new URL('http://m/p?key=1'))('/v1/completions?a=2'), '/p/v1/completions?key=1&a=2');
  });
  it('leaves an origin-form path as the client sent it (http-proxy-3 would normalise it through URL)', () => {
    assert.equal(pathJoiner(new URL('http://m/'))('/v1/completions?'), '/v1/completions?');
    assert.equal(pathJoiner(new URL('http://m/p'))('/x/../v1/chat/completions'), '/p/x/../v1/chat/completions');
  });
});

/**
 * The reference the raw-list filter is held to, on a headers object as Node parses one (names in
 * lower case, repeats joined): RFC 9110's hop-by-hop headers and those the Connection header
 * names go, but Content-Length, which frames the message.
 */
function stripHopByHop(headers: Record<string, string>): void {
  const listed = (headers.connection ?? '').split(',').map((n) => n.trim().toLowerCase());
  for (const name of [...HOP_BY_HOP_HEADERS, ...listed]) if (name !== 'content-length') delete headers[name];
}

/** An object's headers as a raw list (name, value, ...), in its order. */
const raw = (headers: Record<string, string>): string[] => Object.entries(headers).flat();

describe('forwardHeaders', () => {
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
    assert.deepEqual(forwardHeaders(raw(headers), headerFilter(), []), ['content-type', 'application/json', 'authorization', 'Bearer k']);
  });
  it('drops each hop-by-hop header of RFC 9110, alone or all together', () => {
    assert.deepEqual([...HOP_BY_HOP_HEADERS].sort(), ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
    const all: Record<string, string> = { accept: '*/*' };
    for (const name of HOP_BY_HOP_HEADERS) {
      assert.deepEqual(forwardHeaders(raw({ [name]: 'x', accept: '*/*' }), headerFilter(), []), ['accept', '*/*'], name);
      all[name] = 'close';
    }
    assert.deepEqual(forwardHeaders(raw(all), headerFilter(), []), ['accept', '*/*']);
  });
  it('keeps Content-Length when the Connection header names it (the body would go unframed)', () => {
    assert.deepEqual(forwardHeaders(['Connection', 'content-length, x-a', 'Content-Length', '3', 'X-A', '1'], headerFilter(), []), ['Content-Length', '3']);
  });
  it('drops what stripHopByHop drops, keeping the rest as written: spelling, order, repeats', () => {
    const random = seededRandom(7);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const names = [...HOP_BY_HOP_HEADERS, 'Connection', 'Keep-Alive', 'TE', 'Content-Type', 'x-trace', 'X-Trace', 'user-agent', 'Authorization', 'accept'];
    const connections = ['keep-alive', 'close', '', 'x-trace', 'Keep-Alive, X-Trace', ' upgrade ,x-trace,', 'authorization'];
    for (let i = 0; i < 500; i++) {
      const raw: string[] = [];
      for (let n = Math.floor(random() * 8); n > 0; n--) {
        const name = pick(names);
        raw.push(name, name.toLowerCase() === 'connection' ? pick(connections) : `v${n}`);
      }
      const out = forwardHeaders(raw, headerFilter(), []);
      // What Node's headers object would hold after stripHopByHop, lower-cased and joined.
      const expected: Record<string, string> = {};
      for (let j = 0; j < raw.length; j += 2) {
        const key = raw[j]!.toLowerCase();
        expected[key] = key in expected ? `${expected[key]}, ${raw[j + 1]}` : raw[j + 1]!;
      }
      stripHopByHop(expected);
      const kept = raw
        .filter((_, j) => j % 2 === 0)
        .map((name, j) => [name, raw[2 * j + 1]!] as const)
        .filter(([name]) => name.toLowerCase() in expected);
      assert.deepEqual(out, kept.flat(), JSON.stringify(raw));
    }
  });
  it('drops the names a filter adds, in any spelling', () => {
    const out = forwardHeaders(['Host', 'a', 'Content-Length', '3', 'X-Request-Id', 'r', 'Accept', '*/*'], headerFilter(['host', 'content-length']), []);
    assert.deepEqual(out, ['X-Request-Id', 'r', 'Accept', '*/*']);
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
