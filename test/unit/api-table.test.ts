// A new inference endpoint is one row of the API table (measure/inference-apis.ts): its routes,
// whether its OpenAI route takes `stream_options`, whether it generates tokens, whether it gets
// a goodput verdict, its canonical route (AOM's path, vLLM's handler), its OpenTelemetry
// operation and provider; plus an event reader only when its answer has a shape none reads (the
// response tap picks the reader by the answer's content type). The two dummy APIs below are such
// rows, written here and added to a table of this test's own ([...INFERENCE_APIS, DUMMY, ...]),
// passed to startInfermeter: INFERENCE_APIS itself is never changed, so nothing leaks into other
// tests. With their rows alone they are routed, injected into or not, and measured end to end in
// every dialect and in goodput and the accounting families, each as its row says.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { startInfermeter } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createInferenceRouter, inferenceRoute } from '../../src/data-plane/inference-route.ts';
import { silentLogger } from '../../src/log.ts';
import { INFERENCE_APIS, inferenceApis, type InferenceApiRow } from '../../src/measure/inference-apis.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { nextFinished, scrape } from '../helpers/proxy-harness.ts';
import { startReplayUpstream, type RecordedRequest, type Script } from '../helpers/replay-upstream.ts';

// ---- The dummy APIs' rows: one that generates (and so takes stream_options and gets a verdict), one that does not. ----

const GENERATE: InferenceApiRow = {
  name: 'dummy',
  routes: { 'dummy/transcribe': ['openai', 'own'] },
  streamOptions: true,
  generates: true,
  goodput: true,
  path: '/v1/dummy/transcribe',
  otelOperation: 'generate_content',
  otelProvider: 'dummy_provider',
};

const EMBED: InferenceApiRow = {
  name: 'dummy_embed',
  routes: { 'dummy/embed': ['openai', 'openai'] },
  streamOptions: false,
  generates: false,
  goodput: false,
  path: '/v1/dummy/embed',
  otelOperation: 'embeddings',
};

const TABLE: readonly InferenceApiRow[] = [...INFERENCE_APIS, GENERATE, EMBED];

// ---- The upstream: an engine serving both, usage in a stream only when asked for it. ----

const SSE = { 'content-type': 'text/event-stream' };
const JSON_TYPE = { 'content-type': 'application/json' };
const delta = (text: string) => `data: {"choices":[{"index":0,"delta":{"content":"${text}"},"finish_reason":null}]}\n\n`;
const FINISH = 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n';
const USAGE = 'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}\n\n';

function engine(req: RecordedRequest): Script {
  const body = JSON.parse(req.body.toString()) as { model: string; stream?: boolean; stream_options?: { include_usage?: boolean } };
  // A model named cut-*: the answer breaks off after its first bytes (output began, no usage).
  if (body.model.startsWith('cut')) return { status: 200, headers: JSON_TYPE, body: [{ data: '{"da' }], end: 'reset' };
  if (req.url.includes('embed'))
    return { status: 200, headers: JSON_TYPE, body: [{ data: '{"data":[{"embedding":[0.5]}],"usage":{"prompt_tokens":4,"total_tokens":4}}' }] };
  const usage = body.stream_options?.include_usage === true ? USAGE : '';
  return { status: 200, headers: SSE, body: [{ data: delta('a') + delta('b') + delta('c') + FINISH + usage + 'data: [DONE]\n\n' }] };
}

async function post(url: string, body: string): Promise<void> {
  await (await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } })).arrayBuffer().catch(() => undefined);
}

// ---- The tests. ----

describe('the API table: a new endpoint is one row', () => {
  it('routes a row as it says: its routes with and without /v1, stream_options only on its OpenAI route', () => {
    const route = createInferenceRouter(TABLE);
    assert.deepEqual(route('POST', '/v1/dummy/transcribe'), { api: 'dummy', streamOptions: true });
    assert.deepEqual(route('POST', '/serving/v1/dummy/transcribe/?x=1'), { api: 'dummy', streamOptions: true }, 'under any prefix, as every route');
    assert.deepEqual(route('POST', '/dummy/transcribe'), { api: 'dummy', streamOptions: false }, "without /v1: an engine's own route");
    assert.deepEqual(route('POST', '/v1/dummy/embed'), { api: 'dummy_embed', streamOptions: false }, 'its row takes no stream_options');
    assert.equal(route('GET', '/v1/dummy/transcribe'), undefined);
    assert.equal(route('POST', '/v1/dummy/transcribes'), undefined);
    // The real routes are routed as by the real table.
    for (const url of ['/v1/chat/completions', '/completions', '/v1/messages', '/messages', '/api/embed', '/x/v1/%u0063hat/completions'])
      assert.deepEqual(route('POST', url), inferenceRoute('POST', url), url);
    // Without the rows (the real table): not inference; nothing leaked.
    assert.equal(inferenceRoute('POST', '/v1/dummy/transcribe'), undefined);
    assert.ok(!INFERENCE_APIS.some((row) => row.name.startsWith('dummy')));
  });

  it('refuses a route or a name two rows claim', () => {
    assert.throws(() => createInferenceRouter([...TABLE, { ...EMBED, name: 'other' }]), /the route dummy\/embed is in two rows of the API table/);
    assert.throws(() => inferenceApis([...TABLE, { ...EMBED, routes: {} }]), /two inference APIs named dummy_embed in the API table/);
  });

  it('is measured end to end: injection, every dialect, goodput and the accounting, as each row says', async (t: TestContext) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond(engine);
    // A clock that stands still until the test moves it: the AOM period is published when the
    // test says, and every request takes 0 s, within any SLO.
    let now = 0;
    const config = loadConfig({
      INFERMETER_UPSTREAM: upstream.url,
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_UPSTREAM_METRICS: 'off',
      INFERMETER_DIALECTS: 'mindie,aom,vllm,otel',
      INFERMETER_AOM_PERIOD_SECONDS: '60',
      INFERMETER_SLO: 'ttft:1000 e2el:1000',
    });
    const app = await startInfermeter(config, { log: silentLogger, clock: () => now, apiTable: TABLE });
    t.after(() => app.close());

    const finished = nextFinished(app, 6);
    const streamed = '{"model":"gen","stream":true}';
    await post(`${app.dataUrl}/v1/dummy/transcribe`, streamed);
    await post(`${app.dataUrl}/dummy/transcribe`, streamed);
    await post(`${app.dataUrl}/v1/dummy/embed`, '{"model":"emb","stream":true,"max_tokens":9}');
    await post(`${app.dataUrl}/v1/dummy/transcribe`, '{"model":"cut-gen","max_tokens":9}');
    await post(`${app.dataUrl}/v1/dummy/embed`, '{"model":"cut-emb"}');
    await post(`${app.dataUrl}/v1/chat/completions`, '{"model":"chat"}');
    const samples = new Map<string, RequestSample[]>();
    for (const s of await finished) samples.set(s.model, [...(samples.get(s.model) ?? []), s]);

    // Usage injection: on the row's OpenAI route only.
    const sent = upstream.requests.map((r) => [r.url, r.body.toString()]);
    assert.deepEqual(sent.slice(0, 3), [
      ['/v1/dummy/transcribe', `{"stream_options":{"include_usage":true},${streamed.slice(1)}`],
      ['/dummy/transcribe', streamed],
      ['/v1/dummy/embed', '{"model":"emb","stream":true,"max_tokens":9}'],
    ]);
    assert.deepEqual(
      samples.get('gen')!.map((s) => [s.api, s.outcome, s.usageSource, s.completionTokens]),
      [
        ['dummy', 'success', 'upstream', 3],
        ['dummy', 'success', 'fallback', 0],
      ],
      'the injected usage read (and stripped), the one without it the fallback',
    );
    assert.deepEqual(
      samples.get('emb')!.map((s) => [s.api, s.outcome, s.promptTokens]),
      [['dummy_embed', 'success', 4]],
    );
    assert.deepEqual([samples.get('cut-gen')![0]!.outcome, samples.get('cut-emb')![0]!.outcome], ['failed', 'failed']);

    now = 61_000; // the AOM period of the requests is published
    const m = await scrape(app);
    // MindIE: every request, as for any API.
    assert.equal(m.value('request_received_total', { model_name: 'gen' }), 2);
    assert.equal(m.value('request_received_total', { model_name: 'emb' }), 1);
    // AOM and vLLM: under the row's canonical route, whatever route the client used.
    assert.equal(m.sum('infer_service_request_total', { model_name: 'gen', path: '/v1/dummy/transcribe', code: '2xx' }), 2);
    assert.equal(m.sum('infer_service_request_total', { model_name: 'emb', path: '/v1/dummy/embed', code: '2xx' }), 1);
    assert.equal(m.value('http_requests_total', { handler: '/v1/dummy/transcribe', method: 'POST', status: '2xx' }), 3, 'gen twice, cut-gen');
    assert.equal(m.value('http_requests_total', { handler: '/v1/dummy/embed', method: 'POST', status: '2xx' }), 2, 'emb, cut-emb');
    // vLLM's sampling parameters: of a row that generates only.
    assert.equal(m.sum('vllm:request_params_n_count', { model_name: 'gen' }), 2);
    assert.equal(m.sum('vllm:request_params_n_count', { model_name: 'emb' }) ?? 0, 0);
    // OpenTelemetry: the row's operation, and its provider in place of the default `openai`.
    const otel = (operation: string, provider: string, model: string) =>
      m.sum('gen_ai_server_request_duration_seconds_count', { gen_ai_operation_name: operation, gen_ai_provider_name: provider, gen_ai_request_model: model });
    assert.equal(otel('generate_content', 'dummy_provider', 'gen'), 2);
    assert.equal(otel('embeddings', 'openai', 'emb'), 1);
    assert.equal(otel('chat', 'openai', 'chat'), 1, 'a real API beside them, as before');
    // Goodput: a verdict for the row that gets one, an exclusion under its name for the other.
    assert.equal(m.value('infermeter_goodput_requests_total', { model_name: 'gen', verdict: 'good' }), 2);
    assert.equal(m.value('infermeter_goodput_excluded_requests_total', { model_name: 'emb', reason: 'dummy_embed' }), 1);
    assert.equal(m.sum('infermeter_goodput_requests_total', { model_name: 'emb' }) ?? 0, 0);
    // The accounting: a cut answer whose output began left prompt tokens uncounted, for a row that generates only.
    assert.equal(m.value('infermeter_prompt_tokens_unknown_total', { model_name: 'cut-gen', outcome: 'failed' }), 1);
    assert.equal(m.value('infermeter_prompt_tokens_unknown_total', { model_name: 'cut-emb', outcome: 'failed' }), 0);
  });
});
