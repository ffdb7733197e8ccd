// vLLM's own metric names (vllm/v1/metrics/loggers.py of vLLM v0.12, the V1 engine; vLLM's
// "Production Metrics" page): names, HELP texts, types, buckets and the `model_name` and
// `engine` labels of the request-level families a vLLM Grafana dashboard reads, so that such a
// dashboard works unchanged in front of any engine. Same measurement as every other dialect:
// this module maps names and labels, and vLLM's per-request TPOT (one observation per request,
// where MindIE's is one per token). The queue and scheduler figures come from the engine's own
// /metrics when it is read, as in the MindIE dialect; the request phases from the engine's own
// timings where its answers carry them (llama.cpp), else from the proxy's estimate.
import type { Registry } from '@prometheus-io/client';
import type { EngineFamily } from '../../engine/engine-map.ts';
import { VLLM_ENGINE_ONLY } from '../../engine/vllm-families.ts';
import { inFlightNow } from '../state/in-flight.ts';
import type { RequestSample } from '../../measure/sample.ts';
import { bucketsFor, type BucketTable } from '../exposition/buckets.ts';
import { phaseSplit } from './phase-split.ts';
import { registerDerived, registerHistogram, registerLabelledHistogram, type Family, type MetricValue } from '../exposition/families.ts';
import { formatPythonFloat } from '../exposition/text-format.ts';
import type { MeasurementState, ModelState } from '../state/recorder.ts';
import type { Dialect, DialectContext } from './dialect.ts';

const MODEL = 'model_name';
/** vLLM's data-parallel engine index label: infermeter is one engine to its clients, "0". */
const ENGINE = 'engine';
const ENGINE_INDEX = '0';

/** vLLM's `finished_reason` values (FinishReason of vllm/v1/engine), each with a series from the start. */
const VLLM_FINISHED_REASONS = ['stop', 'length', 'abort', 'error'] as const;
export type VllmFinishedReason = (typeof VLLM_FINISHED_REASONS)[number];

/**
 * The `finished_reason` vLLM would count a request under, or undefined for one it would not
 * count. Cancelled by the client: abort. Failed: "error" (vLLM's FinishReason.ERROR, a request
 * the engine took and could not finish) for every failure but a 4xx answer of the upstream: a
 * 5xx, an upstream unreachable, silent past a timeout or cut, an error event inside a stream, a
 * worker lost. A 4xx is a request vLLM refuses before its engine (bad parameters, unknown
 * model) and never counts here; http_requests_total{status="4xx"} shows those. Successful:
 * "length" when the upstream's finish_reason says so (or the Messages API's stop_reason
 * `max_tokens`, what vLLM itself sends for a length stop there), "abort" likewise, else "stop"
 * (stop sequences, EOS, tool calls, content filters, or no finish_reason at all: generation
 * ended on its own).
 */
export function vllmFinishedReason(sample: RequestSample): VllmFinishedReason | undefined {
  if (sample.outcome === 'cancelled') return 'abort';
  if (sample.outcome === 'failed') return sample.failure === 'upstream_status' && sample.status >= 400 && sample.status < 500 ? undefined : 'error';
  if (sample.outcome !== 'success') return undefined;
  if (sample.finishReason === 'max_tokens') return 'length';
  return sample.finishReason === 'length' || sample.finishReason === 'abort' ? sample.finishReason : 'stop';
}

/** A bucket bound of get() (a number, or "+Inf") in Python's spelling. */
const formatLe = (le: string | number): string => (typeof le === 'number' ? formatPythonFloat(le) : le);

/** Default buckets of the vLLM histograms (INFERMETER_BUCKETS_<FAMILY> overrides them, `:` written `_`). */
export const VLLM_BUCKETS = {
  // vLLM (seconds, tokens): vLLM's own buckets. Its token buckets are 1-2-5 steps up to the
  // served model's max_model_len, which a proxy does not know: these are what vLLM emits for a
  // max_model_len from 100000 to 199999 (131072, say).
  'vllm:time_to_first_token_seconds': [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560],
  'vllm:inter_token_latency_seconds': [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80],
  'vllm:request_time_per_output_token_seconds': [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80],
  'vllm:e2e_request_latency_seconds': [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680],
  'vllm:request_decode_time_seconds': [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680],
  'vllm:request_queue_time_seconds': [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680],
  'vllm:request_prefill_time_seconds': [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680],
  'vllm:request_inference_time_seconds': [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680],
  'vllm:request_prompt_tokens': [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000],
  'vllm:request_generation_tokens': [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000],
  'vllm:request_params_max_tokens': [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000],
  'vllm:request_max_num_generation_tokens': [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000],
  'vllm:request_params_n': [1, 2, 5, 10, 20],
} as const satisfies BucketTable;

export function createVllmDialect(registry: Registry, state: MeasurementState, context: DialectContext): Dialect {
  const names: string[] = [];
  // Finished requests by vLLM's finished_reason, per model (the split is this dialect's own).
  const finished = new Map<string, Record<VllmFinishedReason, number>>();

  const labels = (model: string): Record<string, string> => ({ [MODEL]: model, [ENGINE]: ENGINE_INDEX });
  const perModel = (read: (m: ModelState) => number) => (): MetricValue[] => {
    const values: MetricValue[] = [];
    for (const m of state.models.values()) values.push({ value: read(m), labels: labels(m.model) });
    return values;
  };
  /** Running or waiting per model_name, by the one rule of in-flight.ts. */
  const inFlight = (which: 'running' | 'waiting') => (): MetricValue[] =>
    [...inFlightNow(state.models.values(), context.engine())[which]].map(([model, value]) => ({ value, labels: labels(model) }));
  const engineOnly = (family: EngineFamily) => (): MetricValue[] =>
    [...(context.engine()?.values.get(family) ?? [])].map(([model, value]) => ({ value, labels: labels(model) }));

  const family = (name: string, help: string, type: Family['type'], collect: () => MetricValue[], aggregator: 'sum' | 'average' = 'sum'): void => {
    registerDerived(registry, { name, help, type, aggregator, collect });
    names.push(name);
  };

  family('vllm:num_requests_running', 'Number of requests in model execution batches.', 'gauge', inFlight('running'));
  family('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', 'gauge', inFlight('waiting'));
  family('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', 'gauge', engineOnly('npu_cache_usage_perc'), 'average');
  // The name of vLLM 0.10 and earlier, beside the new one (see the older names below).
  family('vllm:gpu_cache_usage_perc', 'GPU KV-cache usage. 1 means 100 percent usage.', 'gauge', engineOnly('npu_cache_usage_perc'), 'average');
  family('vllm:num_preemptions_total', 'Cumulative number of preemption from the engine.', 'counter', engineOnly('num_preemptions_total'));
  family(
    'vllm:prompt_tokens_total',
    'Number of prefill tokens processed.',
    'counter',
    perModel((m) => m.promptTokens),
  );
  family(
    'vllm:generation_tokens_total',
    'Number of generation tokens processed.',
    'counter',
    perModel((m) => m.generationTokens),
  );
  family('vllm:request_success_total', 'Count of successfully processed requests.', 'counter', () => {
    const values: MetricValue[] = [];
    for (const m of state.models.values()) {
      const counts = finished.get(m.model);
      for (const reason of VLLM_FINISHED_REASONS) values.push({ value: counts?.[reason] ?? 0, labels: { ...labels(m.model), finished_reason: reason } });
    }
    return values;
  });
  // The engine-only families (vllm-families.ts), as the engine reported them in its last read.
  for (const f of VLLM_ENGINE_ONLY) {
    family(f.name, f.help, f.type, () =>
      (context.engine()?.engineOnly?.get(f.name) ?? []).map((s) => ({ value: s.value, labels: s.labels, metricName: s.name })),
    );
  }
  // vLLM's HTTP layer (prometheus-fastapi-instrumentator, as vLLM configures it): requests by
  // route template, method and status class ("2xx"), and their duration: the inference routes
  // from their samples, the other routes infermeter forwards from the data plane's
  // httpRequest (labels bounded by vllm-http.ts).
  const http = new Map<string, { handler: string; method: string; status: string; count: number }>();
  family('http_requests_total', 'Total number of requests by method, status and handler.', 'counter', () =>
    [...http.values()].map((h) => ({ value: h.count, labels: { handler: h.handler, method: h.method, status: h.status } })),
  );
  const httpDuration = registerLabelledHistogram(registry, {
    name: 'http_request_duration_seconds',
    help: 'Latency with only few buckets by handler. Made to be only used if aggregation by handler is important.',
    buckets: [0.1, 0.5, 1],
    labelNames: ['handler', 'method'],
    formatBound: formatPythonFloat,
  });
  names.push('http_request_duration_seconds');
  const httpRequest = (handler: string, method: string, statusCode: number, seconds: number | undefined): void => {
    const status = `${Math.floor(statusCode / 100)}xx`;
    const key = `${handler} ${method} ${status}`;
    const h = http.get(key);
    if (h === undefined) http.set(key, { handler, method, status, count: 1 });
    else h.count++;
    if (seconds !== undefined) httpDuration.observe([handler, method], seconds);
  };

  const histogram = (name: keyof typeof VLLM_BUCKETS, help: string) => {
    const h = registerHistogram(registry, {
      name,
      help,
      buckets: bucketsFor(VLLM_BUCKETS, name, context.buckets),
      labelName: MODEL,
      constLabels: { [ENGINE]: ENGINE_INDEX },
      // `le` as vLLM (Python's prometheus_client) writes it, "1.0": dashboards match it as text.
      formatBound: formatPythonFloat,
    });
    names.push(name);
    return h;
  };
  /**
   * Another name for a histogram's series (vLLM 0.10's names of the same measure), served always
   * beside the new one: an older dashboard keeps working with no setting to find, as it did on
   * vLLM itself while it served both names.
   */
  const alias = (of: Family, name: string, help: string): void => {
    const source = `${of.name}_`;
    family(name, help, 'histogram', () =>
      of.get().values.map((v) => ({
        ...v,
        labels: 'le' in v.labels ? { ...v.labels, le: formatLe(v.labels.le!) } : v.labels,
        metricName: `${name}_${v.metricName!.slice(source.length)}`,
      })),
    );
  };
  // In the order of vLLM's loggers.py.
  const promptTokens = histogram('vllm:request_prompt_tokens', 'Number of prefill tokens processed.');
  const generationTokens = histogram('vllm:request_generation_tokens', 'Number of generation tokens processed.');
  const maxGeneration = histogram('vllm:request_max_num_generation_tokens', 'Histogram of maximum number of requested generation tokens.');
  const nParam = histogram('vllm:request_params_n', 'Histogram of the n request parameter.');
  const maxTokensParam = histogram('vllm:request_params_max_tokens', 'Histogram of the max_tokens request parameter.');
  const ttft = histogram('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.');
  const itl = histogram('vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.');
  const requestTpot = histogram('vllm:request_time_per_output_token_seconds', 'Histogram of time_per_output_token_seconds per request.');
  const e2e = histogram('vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.');
  const queue = histogram('vllm:request_queue_time_seconds', 'Histogram of time spent in WAITING phase for request.');
  const inference = histogram('vllm:request_inference_time_seconds', 'Histogram of time spent in RUNNING phase for request.');
  const prefill = histogram('vllm:request_prefill_time_seconds', 'Histogram of time spent in PREFILL phase for request.');
  const decode = histogram('vllm:request_decode_time_seconds', 'Histogram of time spent in DECODE phase for request.');
  // vLLM 0.10 and earlier: the per-token TPOT (what inter_token_latency_seconds now holds), and
  // one revision of its example dashboard's spelling of it.
  alias(itl, 'vllm:time_per_output_token_seconds', 'Histogram of time per output token in seconds.');
  alias(itl, 'vllm:time_per_output_tokens_seconds', 'Histogram of time per output token in seconds.');

  return {
    name: 'vllm',
    metricNames: names,
    // In front of vLLM with its metrics relayed, its own phase times are the true ones.
    engineFirst: ['vllm:request_queue_time_seconds', 'vllm:request_prefill_time_seconds', 'vllm:request_inference_time_seconds'],
    httpRequest,
    firstOutput(info, ttftSeconds) {
      if (ttftSeconds !== undefined) ttft.observe(info.model, ttftSeconds, 1, info.requestId);
    },
    interToken(info, seconds, tokens) {
      // Per output token after the first: an event that carried k tokens is k gaps of seconds each.
      itl.observe(info.model, seconds, tokens);
    },
    finished(sample) {
      const { model } = sample;
      const api = context.apis.of(sample.api);
      // The `handler` of vLLM's HTTP metrics: its route template, the API's canonical route.
      httpRequest(api?.path ?? sample.api, 'POST', sample.status, sample.duration);
      const reason = vllmFinishedReason(sample);
      if (reason !== undefined) {
        let counts = finished.get(model);
        if (counts === undefined) finished.set(model, (counts = { stop: 0, length: 0, abort: 0, error: 0 }));
        counts[reason]++;
      }
      if (sample.promptTokens !== undefined) promptTokens.observe(model, sample.promptTokens);
      if (sample.completionTokens !== undefined) generationTokens.observe(model, sample.completionTokens);
      if (sample.e2e !== undefined) e2e.observe(model, sample.e2e, 1, sample.requestId);
      const phases = phaseSplit(sample);
      if (sample.ttft !== undefined && sample.lastToken !== undefined) {
        // vLLM's per-request TPOT: the decode time over completion_tokens - 1, one observation
        // per request (MindIE's TPOT counts the same mean once per token); 0 when there was no
        // second token, as vLLM observes it.
        requestTpot.observe(model, sample.tpot?.seconds ?? 0, 1, sample.requestId);
      }
      if (phases.decode !== undefined) decode.observe(model, phases.decode);
      if (reason === undefined || reason === 'error') return;
      // vLLM's phases: the engine's own where it reported them, else the proxy's estimate (phase-split.ts).
      queue.observe(model, phases.queue);
      if (phases.prefill !== undefined) prefill.observe(model, phases.prefill);
      if (phases.inference !== undefined) inference.observe(model, phases.inference);
      if (api?.generates === false) return;
      // Sampling parameters as the request set them; n defaults to 1 as in vLLM. A request that
      // sets no limit is left out of the max_tokens families (vLLM's default depends on the
      // model's context length, which a proxy does not know).
      const maxTokens = sample.params?.maxTokens;
      if (maxTokens !== undefined) {
        maxTokensParam.observe(model, maxTokens);
        maxGeneration.observe(model, maxTokens);
      }
      nParam.observe(model, sample.params?.n ?? 1);
    },
  };
}
