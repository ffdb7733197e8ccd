// The otel dialect against a fake clock: scripted requests (streams, plain answers, failures,
// a cancellation, a stream without usage, completions, embeddings) give exact counts, sums and
// buckets under the semantic-convention names in their Prometheus form, with the conventions'
// attributes as labels. Also: the multi-label histogram, the response model read from the
// upstream's answer and bounded like model_name, and the OTEL_* configuration.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from '@prometheus-io/client';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { VARIABLE_NAMES as VARIABLES } from '../../src/config/variables.ts';
import { classifyBody, classifyEvent } from '../../src/measure/openai-events.ts';
import { createRequestTimer, type RequestTimer } from '../../src/measure/request-timer.ts';
import type { InferenceApi } from '../../src/measure/sample.ts';
import { errorType, prometheusLabel } from '../../src/metrics/dialects/otel.ts';
import { INFERENCE_APIS } from '../../src/measure/inference-apis.ts';
import { registerLabelledHistogram } from '../../src/metrics/exposition/families.ts';
import { createMetrics } from '../../src/metrics/metrics.ts';
import { parseExposition, type Exposition } from '../helpers/exposition.ts';
import { OTEL_BUCKETS, les as specLes } from '../helpers/spec-buckets.ts';

const SERVER = { server_address: 'vllm.internal', server_port: '8000' };

function setup(options: { maxModels?: number; buckets?: Record<string, number[]> } = {}) {
  const clock = { now: 0 };
  const metrics = createMetrics({
    clock: () => clock.now,
    throughputWindowSeconds: 10,
    version: 'test',
    dialects: ['otel'],
    buckets: options.buckets ?? {},
    aom: { periodSeconds: 30, labels: {} },
    otel: { providerName: 'openai', serverAddress: 'vllm.internal', serverPort: 8000 },
    ...(options.maxModels === undefined ? {} : { maxModels: options.maxModels }),
  });
  /** A request starting now; `at(ms)` moves the clock to `ms` after its arrival. */
  const start = (api: InferenceApi, model: string, stream: boolean): { timer: RequestTimer; at: (ms: number) => void } => {
    const t0 = clock.now;
    const timer = createRequestTimer(api, () => clock.now, metrics.sink);
    timer.identify(model, stream);
    return { timer, at: (ms) => (clock.now = t0 + ms) };
  };
  return { metrics, clock, start, scrape: async (): Promise<Exposition> => parseExposition(await metrics.render()) };
}

/** A successful stream: first token at `first` ms, one token event every `gap` ms, `events` of them. */
function stream(
  s: ReturnType<typeof setup>,
  model: string,
  o: {
    first: number;
    gap: number;
    events: number;
    end: number;
    usage?: { promptTokens: number; completionTokens: number };
    responseModel?: string;
    api?: InferenceApi;
  },
): void {
  const { timer, at } = s.start(o.api ?? 'chat', model, true);
  at(5);
  timer.responseHeaders(200, true);
  for (let i = 0; i < o.events; i++) {
    at(o.first + i * o.gap);
    timer.responseBody();
    timer.tokenEvent();
  }
  if (o.responseModel !== undefined) timer.responseModel(o.responseModel);
  if (o.usage !== undefined) timer.usage(o.usage);
  at(o.end);
  timer.responseFinished();
  timer.close(true);
}

const near = (actual: number | undefined, expected: number, what: string): void =>
  assert.ok(actual !== undefined && Math.abs(actual - expected) < 1e-9, `${what}: ${actual} vs ${expected}`);

describe('otel dialect', () => {
  it('maps scripted requests to the four semantic-convention histograms, exactly', async () => {
    const s = setup();
    const served = 'llama-3.1-8b-instruct';
    // Two chat streams with usage, the response naming the served model.
    stream(s, 'llama', { first: 100, gap: 25, events: 5, end: 210, usage: { promptTokens: 12, completionTokens: 5 }, responseModel: served });
    stream(s, 'llama', { first: 300, gap: 50, events: 2, end: 400, usage: { promptTokens: 20, completionTokens: 3 }, responseModel: served });
    // A non-streamed completion: no TTFT, no TPOT.
    {
      const { timer, at } = s.start('completions', 'llama', false);
      at(40);
      timer.responseHeaders(200, false);
      at(50);
      timer.responseBody();
      timer.usage({ promptTokens: 7, completionTokens: 9 });
      timer.responseModel(served);
      at(80);
      timer.responseFinished();
      timer.close(true);
    }
    // The upstream answers 503.
    {
      const { timer, at } = s.start('chat', 'llama', false);
      at(10);
      timer.responseHeaders(503, false);
      at(15);
      timer.responseFinished();
      timer.close(true);
    }
    // An error event inside a stream, after one token.
    {
      const { timer, at } = s.start('chat', 'llama', true);
      timer.responseHeaders(200, true);
      at(60);
      timer.tokenEvent();
      at(70);
      timer.streamError();
      at(90);
      timer.responseFinished();
      timer.close(true);
    }
    // The client leaves after one token.
    {
      const { timer, at } = s.start('chat', 'llama', true);
      timer.responseHeaders(200, true);
      at(100);
      timer.tokenEvent();
      at(150);
      timer.close(false);
    }
    // A stream without usage: TTFT and TPOT, but no token counts (never the zero fallback).
    stream(s, 'qwen', { first: 100, gap: 20, events: 2, end: 130 });
    // Embeddings: input tokens only.
    {
      const { timer, at } = s.start('embeddings', 'bge', false);
      timer.responseHeaders(200, false);
      at(20);
      timer.responseBody();
      timer.usage({ promptTokens: 4, completionTokens: undefined });
      timer.responseFinished();
      timer.close(true);
    }

    const m = await s.scrape();
    const l = (labels: Record<string, string>) => ({ gen_ai_provider_name: 'openai', ...SERVER, ...labels });
    const chat = l({ gen_ai_operation_name: 'chat', gen_ai_request_model: 'llama', gen_ai_response_model: served });
    const completion = l({ gen_ai_operation_name: 'text_completion', gen_ai_request_model: 'llama', gen_ai_response_model: served });
    const chatNoModel = l({ gen_ai_operation_name: 'chat', gen_ai_request_model: 'llama' });
    const qwen = l({ gen_ai_operation_name: 'chat', gen_ai_request_model: 'qwen' });
    const bge = l({ gen_ai_operation_name: 'embeddings', gen_ai_request_model: 'bge' });

    // Time to first token: the two chat streams (0.1 s, 0.3 s) and qwen's; failures and cancellations left out.
    const ttft = 'gen_ai_server_time_to_first_token_seconds';
    assert.equal(m.value(`${ttft}_count`, chat), 2);
    near(m.value(`${ttft}_sum`, chat), 0.4, 'TTFT sum');
    assert.equal(m.value(`${ttft}_bucket`, { ...chat, le: '0.08' }), 0);
    assert.equal(m.value(`${ttft}_bucket`, { ...chat, le: '0.1' }), 1, 'a value on a bound counts in it');
    assert.equal(m.value(`${ttft}_bucket`, { ...chat, le: '0.25' }), 1);
    assert.equal(m.value(`${ttft}_bucket`, { ...chat, le: '0.5' }), 2);
    assert.equal(m.value(`${ttft}_bucket`, { ...chat, le: '+Inf' }), 2);
    assert.equal(m.value(`${ttft}_count`, qwen), 1);
    assert.deepEqual(m.series(`${ttft}_count`).length, 2, 'no TTFT for the plain answer, the failures or the cancellation');

    // Time per output token: one observation per request, (last - first) / (tokens - 1).
    const tpot = 'gen_ai_server_time_per_output_token_seconds';
    assert.equal(m.value(`${tpot}_count`, chat), 2);
    near(m.value(`${tpot}_sum`, chat), 0.025 + 0.025, 'TPOT sum: 100 ms / 4 and 50 ms / 2');
    assert.equal(m.value(`${tpot}_bucket`, { ...chat, le: '0.025' }), 2);
    assert.equal(m.value(`${tpot}_bucket`, { ...chat, le: '0.01' }), 0);
    near(m.value(`${tpot}_sum`, qwen), 0.02, 'TPOT without usage: over the token events');

    // Request duration: every request, error.type on those that did not succeed.
    const duration = 'gen_ai_server_request_duration_seconds';
    assert.equal(m.value(`${duration}_count`, chat), 2);
    near(m.value(`${duration}_sum`, chat), 0.61, 'chat durations 0.21 + 0.4');
    assert.equal(m.value(`${duration}_bucket`, { ...chat, le: '0.16' }), 0);
    assert.equal(m.value(`${duration}_bucket`, { ...chat, le: '0.32' }), 1);
    assert.equal(m.value(`${duration}_bucket`, { ...chat, le: '0.64' }), 2);
    near(m.value(`${duration}_sum`, completion), 0.08, 'completion duration');
    assert.equal(m.value(`${duration}_bucket`, { ...completion, le: '0.08' }), 1);
    near(m.value(`${duration}_sum`, { ...chatNoModel, error_type: '503' }), 0.015, 'the 503');
    near(m.value(`${duration}_sum`, { ...chatNoModel, error_type: 'stream_error' }), 0.09, 'the stream error');
    near(m.value(`${duration}_sum`, { ...chatNoModel, error_type: 'cancelled' }), 0.15, 'the cancellation: until the client left');
    near(m.value(`${duration}_sum`, qwen), 0.13, 'qwen');
    near(m.value(`${duration}_sum`, bge), 0.02, 'embeddings');
    assert.equal(m.series(`${duration}_count`).length, 7);

    // Token usage: input and output as reported; a cut stream's delivered tokens; no zero fallback.
    const tokens = 'gen_ai_client_token_usage';
    const t = (labels: Record<string, string>, type: string) => ({ ...labels, gen_ai_token_type: type });
    assert.deepEqual([m.value(`${tokens}_count`, t(chat, 'input')), m.value(`${tokens}_sum`, t(chat, 'input'))], [2, 32]);
    assert.deepEqual([m.value(`${tokens}_count`, t(chat, 'output')), m.value(`${tokens}_sum`, t(chat, 'output'))], [2, 8]);
    assert.equal(m.value(`${tokens}_bucket`, { ...t(chat, 'input'), le: '16' }), 1);
    assert.equal(m.value(`${tokens}_bucket`, { ...t(chat, 'input'), le: '64' }), 2);
    assert.equal(m.value(`${tokens}_bucket`, { ...t(chat, 'output'), le: '4' }), 1);
    assert.equal(m.value(`${tokens}_bucket`, { ...t(chat, 'output'), le: '16' }), 2);
    assert.deepEqual([m.value(`${tokens}_sum`, t(completion, 'input')), m.value(`${tokens}_sum`, t(completion, 'output'))], [7, 9]);
    assert.deepEqual(
      [m.value(`${tokens}_count`, t(chatNoModel, 'output')), m.value(`${tokens}_sum`, t(chatNoModel, 'output'))],
      [2, 2],
      'the broken and the cancelled stream delivered one token each',
    );
    assert.equal(m.value(`${tokens}_sum`, t(bge, 'input')), 4);
    assert.equal(m.value(`${tokens}_count`, t(bge, 'output')), undefined, 'embeddings have no output tokens');
    assert.equal(m.sum(`${tokens}_count`, { gen_ai_request_model: 'qwen' }), undefined, 'a stream without usage reports no tokens');
    assert.equal(m.series(`${tokens}_count`).length, 6);

    // The conventions' buckets, in full.
    for (const family of [
      'gen_ai_server_time_to_first_token_seconds',
      'gen_ai_server_time_per_output_token_seconds',
      'gen_ai_server_request_duration_seconds',
      'gen_ai_client_token_usage',
    ] as const) {
      const les = m
        .series(`${family}_bucket`)
        .filter(
          (x) =>
            x.labels.gen_ai_request_model === 'llama' &&
            x.labels.error_type === undefined &&
            x.labels.gen_ai_operation_name === 'chat' &&
            x.labels.gen_ai_token_type !== 'output',
        )
        .map((x) => x.labels.le);
      assert.deepEqual(les, specLes(OTEL_BUCKETS[family]), family);
    }
    assert.match(
      m.text,
      /# HELP gen_ai_server_time_to_first_token_seconds Time to generate first token for successful responses\.\n# TYPE gen_ai_server_time_to_first_token_seconds histogram/,
    );
    assert.doesNotMatch(m.text, /^(request_received_total|infer_service_|vllm:)/m, 'otel alone');
    s.metrics.close();
  });

  it('takes bucket overrides by the Prometheus family name', async () => {
    const s = setup({ buckets: { gen_ai_server_time_to_first_token_seconds: [0.5, 2] } });
    stream(s, 'm', { first: 100, gap: 10, events: 2, end: 120 });
    const m = await s.scrape();
    assert.deepEqual(
      m.series('gen_ai_server_time_to_first_token_seconds_bucket').map((x) => x.labels.le),
      ['0.5', '2', '+Inf'],
    );
    assert.equal(m.series('gen_ai_server_request_duration_seconds_bucket').length, OTEL_BUCKETS.gen_ai_server_request_duration_seconds.length + 1);
    s.metrics.close();
  });

  it('bounds the response model like model_name', async () => {
    const s = setup({ maxModels: 1 });
    stream(s, 'a', { first: 10, gap: 10, events: 2, end: 30, usage: { promptTokens: 1, completionTokens: 2 }, responseModel: 'a-2024-08-06' });
    stream(s, 'a', { first: 10, gap: 10, events: 2, end: 30, usage: { promptTokens: 1, completionTokens: 2 }, responseModel: 'a' });
    const m = await s.scrape();
    const models = m.series('gen_ai_server_request_duration_seconds_count').map((x) => x.labels.gen_ai_response_model);
    assert.deepEqual(models, ['other', 'a'], 'the cap (1) was taken by the request model: a new response model is counted under other');
    s.metrics.close();
  });

  it('names operations and errors by the conventions', () => {
    assert.deepEqual(Object.fromEntries(INFERENCE_APIS.map((api) => [api.name, api.otelOperation])), {
      chat: 'chat',
      completions: 'text_completion',
      responses: 'chat',
      embeddings: 'embeddings',
      messages: 'chat',
    });
    const base = { outcome: 'failed', status: 0, failure: undefined } as const;
    assert.equal(errorType({ ...base, failure: 'upstream_status', status: 429 } as never), '429');
    assert.equal(errorType({ ...base, failure: 'upstream_timeout', status: 504 } as never), 'upstream_timeout');
    assert.equal(errorType({ ...base, failure: 'upstream_unreachable', status: 502 } as never), 'upstream_unreachable');
    assert.equal(errorType({ ...base, outcome: 'cancelled' } as never), 'cancelled');
    assert.equal(errorType({ ...base, outcome: 'success' } as never), undefined);
    assert.equal(prometheusLabel('gen_ai.request.model'), 'gen_ai_request_model');
    assert.equal(prometheusLabel('error.type'), 'error_type');
  });
});

describe('labelled histogram', () => {
  it('renders several labels, leaves undefined ones out, escapes values', async () => {
    const registry = new Registry();
    const h = registerLabelledHistogram(registry, { name: 'x_seconds', help: 'h', buckets: [1], labelNames: ['a', 'b'] });
    h.observe(['p', undefined], 0.5);
    h.observe(['p', 'q"\\'], 2);
    h.observe(['p', undefined], 1, 2);
    h.observe(['p', undefined], Number.NaN);
    const lines = (await registry.metrics()).split('\n').filter((line) => line.startsWith('x_seconds'));
    assert.deepEqual(lines, [
      'x_seconds_bucket{a="p",le="1"} 3',
      'x_seconds_bucket{a="p",le="+Inf"} 3',
      'x_seconds_sum{a="p"} 2.5',
      'x_seconds_count{a="p"} 3',
      'x_seconds_bucket{a="p",b="q\\"\\\\",le="1"} 0',
      'x_seconds_bucket{a="p",b="q\\"\\\\",le="+Inf"} 1',
      'x_seconds_sum{a="p",b="q\\"\\\\"} 2',
      'x_seconds_count{a="p",b="q\\"\\\\"} 1',
    ]);
    assert.throws(() => registerLabelledHistogram(registry, { name: 'y', help: 'h', buckets: [1], labelNames: ['a.b'] }), /invalid label name/);
    assert.equal(h.get().values.length, 8);
  });
});

describe('response model', () => {
  it('is read where the answer is parsed anyway', () => {
    const finish = classifyEvent(JSON.stringify({ model: 'gpt-4o-2024-08-06', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
    assert.equal(finish.model, 'gpt-4o-2024-08-06');
    const usage = classifyEvent(JSON.stringify({ model: 'm-1', choices: [], usage: { prompt_tokens: 1, completion_tokens: 2 } }));
    assert.equal(usage.model, 'm-1');
    assert.equal(
      classifyEvent(
        JSON.stringify({ type: 'response.completed', response: { model: 'm-2', status: 'completed', usage: { input_tokens: 1, output_tokens: 1 } } }),
      ).model,
      'm-2',
    );
    assert.equal(classifyBody(JSON.stringify({ model: 'm-3', usage: { prompt_tokens: 1 } })).model, 'm-3');
    assert.equal(classifyBody(JSON.stringify({ model: '', usage: { prompt_tokens: 1 } })).model, undefined);
    assert.equal('model' in classifyBody('{"usage":{"prompt_tokens":1}}'), false, 'absent, not undefined, when the body names none');
  });

  it('is the first one the upstream named', () => {
    let responseModel: string | undefined;
    const timer = createRequestTimer('chat', () => 0, { started() {}, firstOutput() {}, finished: (s) => (responseModel = s.responseModel) });
    timer.identify('m', true);
    timer.responseModel('first');
    timer.responseModel('second');
    timer.close(true);
    assert.equal(responseModel, 'first');
  });
});

describe('OTEL_* configuration', () => {
  const host = { hostname: 'pod-1' };
  it('turns the export on with an endpoint, with the specified defaults', () => {
    assert.equal(loadConfig({}).otel.export, undefined);
    assert.equal(loadConfig({}).otel.providerName, 'openai');
    const c = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, host).otel.export!;
    assert.equal(c.url.href, 'http://collector:4318/v1/metrics');
    assert.deepEqual([c.protocol, c.intervalMs, c.timeoutMs], ['http/protobuf', 60_000, 30_000]);
    assert.deepEqual(c.resource, { 'service.name': 'infermeter', 'service.instance.id': 'pod-1' });
    assert.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://c.example/otlp/' }).otel.export!.url.href, 'https://c.example/otlp/v1/metrics');
    assert.equal(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'http://b:9000/m' }).otel.export!.url.href,
      'http://b:9000/m',
    );
  });

  it('reads protocol, headers, interval, timeout and resource', () => {
    const c = loadConfig(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-a=1',
        OTEL_EXPORTER_OTLP_METRICS_HEADERS: 'x-a=2',
        OTEL_METRIC_EXPORT_INTERVAL: '5000',
        OTEL_METRIC_EXPORT_TIMEOUT: '9000',
        OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attributes,k8s.pod.name=p%2C1',
        OTEL_SERVICE_NAME: 'svc',
        INFERMETER_OTEL_PROVIDER_NAME: 'vllm',
      },
      host,
    );
    const e = c.otel.export!;
    assert.equal(e.protocol, 'http/json', 'the _METRICS_ variable wins');
    assert.deepEqual(e.headers, { authorization: 'Bearer abc', 'x-a': '2' });
    assert.deepEqual([e.intervalMs, e.timeoutMs], [5000, 5000], 'the timeout is at most the interval');
    assert.deepEqual(e.resource, { 'service.name': 'svc', 'service.instance.id': 'pod-1', 'k8s.pod.name': 'p,1' });
    assert.equal(c.otel.providerName, 'vllm');
  });

  it("reads an export's deadline as the specification defines it: OTEL_EXPORTER_OTLP_METRICS_TIMEOUT over OTEL_EXPORTER_OTLP_TIMEOUT, 10 s by default", () => {
    const timeout = (env: Record<string, string>) => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', ...env }, host).otel.export!.requestTimeoutMs;
    assert.equal(timeout({}), 10_000);
    assert.equal(timeout({ OTEL_EXPORTER_OTLP_TIMEOUT: '2500' }), 2500);
    assert.equal(timeout({ OTEL_EXPORTER_OTLP_TIMEOUT: '2500', OTEL_EXPORTER_OTLP_METRICS_TIMEOUT: '700' }), 700);
    for (const variable of ['OTEL_EXPORTER_OTLP_TIMEOUT', 'OTEL_EXPORTER_OTLP_METRICS_TIMEOUT'])
      assert.throws(() => timeout({ [variable]: '10s' }), new RegExp(`${variable}: expected milliseconds`));
  });

  it('is switched off by OTEL_SDK_DISABLED or OTEL_METRICS_EXPORTER=none', () => {
    assert.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }).otel.export, undefined);
    assert.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_METRICS_EXPORTER: 'none' }).otel.export, undefined);
  });

  it('refuses bad values at start, naming the variable, never echoing headers', () => {
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (error) {
        assert.ok(error instanceof ConfigError);
        return error.problems;
      }
      return [];
    };
    assert.deepEqual(
      problems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }).map((p) => p.variable),
      ['OTEL_EXPORTER_OTLP_ENDPOINT'],
    );
    assert.deepEqual(
      problems({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'ftp://x/' }).map((p) => p.variable),
      ['OTEL_EXPORTER_OTLP_METRICS_ENDPOINT'],
    );
    assert.match(problems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })[0]!.expected, /grpc is not supported/);
    const secret = problems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_HEADERS: 'token%zz=secret-value,broken' })[0]!;
    assert.equal(secret.variable, 'OTEL_EXPORTER_OTLP_HEADERS');
    assert.equal(secret.got, undefined, 'a header value is never echoed');
    assert.deepEqual(
      problems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_METRIC_EXPORT_INTERVAL: '0' }).map((p) => p.variable),
      ['OTEL_METRIC_EXPORT_INTERVAL'],
    );
    assert.deepEqual(
      problems({ OTEL_METRICS_EXPORTER: 'prometheus' }).map((p) => p.variable),
      ['OTEL_METRICS_EXPORTER'],
    );
    assert.deepEqual(
      problems({ INFERMETER_OTEL_PROVIDER_NAME: 'a\u0001b' }).map((p) => p.variable),
      ['INFERMETER_OTEL_PROVIDER_NAME'],
    );
    // Without an endpoint the export's own variables are not read.
    assert.deepEqual(problems({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), []);
  });

  it('lists the variables it reads', () => {
    for (const v of [
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT',
      'OTEL_EXPORTER_OTLP_HEADERS',
      'OTEL_METRIC_EXPORT_INTERVAL',
      'OTEL_SERVICE_NAME',
      'OTEL_RESOURCE_ATTRIBUTES',
      'INFERMETER_OTEL_PROVIDER_NAME',
    ]) {
      assert.ok((VARIABLES as readonly string[]).includes(v), v);
    }
    assert.ok(loadConfig({ INFERMETER_DIALECTS: 'mindie,otel' }).dialects.includes('otel'));
  });
});
