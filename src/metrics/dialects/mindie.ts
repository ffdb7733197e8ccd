// MindIE's service metrics (spec: MindIE "Querying Service Management and Control Metrics",
// English and Chinese editions): the names, HELP texts, types, `model_name` label and histogram
// buckets of the spec. The engine-internal families of that spec (num_requests_swapped,
// num_preemptions_total, npu/cpu_cache_usage_perc, npu_prefix_cache_hit_rate) are not visible
// in traffic and are not emitted here. request_cancelled_total is infermeter's addition.
import type { Registry } from 'prom-client';
import { registerDerived, registerHistogram, type MetricValue } from '../families.ts';
import type { MeasurementState, ModelState } from '../recorder.ts';
import { bucketsFor, type HistogramFamily } from '../buckets.ts';
import { createExposer } from '../exposer.ts';
import type { Dialect, DialectContext } from './dialect.ts';

const LABEL = 'model_name';

export function createMindieDialect(registry: Registry, state: MeasurementState, context: DialectContext): Dialect {
  // The exposer_* families lead the exposition, as in the spec's example.
  const exposer = createExposer(registry);
  const perModel = (read: (m: ModelState) => number) => (): MetricValue[] => {
    const values: MetricValue[] = [];
    for (const m of state.models.values()) values.push({ value: read(m), labels: { [LABEL]: m.model } });
    return values;
  };
  const counter = (name: string, help: string, read: (m: ModelState) => number): string =>
    registerDerived(registry, { name, help, type: 'counter', collect: perModel(read) }).name;
  const gauge = (
    name: string,
    help: string,
    read: (m: ModelState) => number,
    aggregator: 'sum' | 'average' = 'sum',
  ): string => registerDerived(registry, { name, help, type: 'gauge', aggregator, collect: perModel(read) }).name;

  const names = [
    counter('request_received_total', 'Number of requests received so far.', (m) => m.received),
    counter('request_success_total', 'Number of requests proceed successfully so far.', (m) => m.success),
    counter('request_failed_total', 'Number of requests failed so far.', (m) => m.failed),
    counter(
      'request_cancelled_total',
      'Number of requests cancelled by the client so far (neither success nor failure).',
      (m) => m.cancelled,
    ),
    gauge('num_requests_running', 'Number of requests currently running on NPU.', (m) => m.running),
    gauge('num_requests_waiting', 'Number of requests waiting to be processed.', (m) => m.waiting),
    counter('prompt_tokens_total', 'Number of prefill tokens processed.', (m) => m.promptTokens),
    counter('generation_tokens_total', 'Number of generation tokens processed.', (m) => m.generationTokens),
    gauge(
      'avg_prompt_throughput_toks_per_s',
      'Average prefill throughput in tokens/s.',
      (m) => m.promptWindow.sum(state.clock()) / state.windowCoverage(),
    ),
    gauge(
      'avg_generation_throughput_toks_per_s',
      'Average generation throughput in tokens/s.',
      (m) => m.generationWindow.sum(state.clock()) / state.windowCoverage(),
    ),
    gauge(
      'failed_request_perc',
      'Requests failure rate. 1 means 100 percent usage.',
      (m) => (m.received === 0 ? 0 : m.failed / m.received),
      'average',
    ),
  ];

  const histogram = (name: HistogramFamily, help: string) => {
    const h = registerHistogram(registry, { name, help, buckets: bucketsFor(name, context.buckets), labelName: LABEL });
    names.push(name);
    return h;
  };
  const ttft = histogram('time_to_first_token_seconds', 'Histogram of time to first token in seconds.');
  const tpot = histogram('time_per_output_token_seconds', 'Histogram of time per output token in seconds.');
  const e2e = histogram('e2e_request_latency_seconds', 'Histogram of end to end request latency in seconds.');
  const prompt = histogram('request_prompt_tokens', 'Number of prefill tokens processed.');
  const generation = histogram('request_generation_tokens', 'Number of generation tokens processed.');

  return {
    name: 'mindie',
    metricNames: [...exposer.metricNames, ...names],
    scrapeStarted: exposer.scrapeStarted,
    firstOutput(info, ttftSeconds) {
      if (ttftSeconds !== undefined) ttft.observe(info.model, ttftSeconds);
    },
    finished(sample) {
      // MindIE counts TPOT per token: completion_tokens - 1 observations of the mean gap.
      if (sample.tpot !== undefined) tpot.observe(sample.model, sample.tpot.seconds, sample.tpot.tokens);
      if (sample.e2e !== undefined) e2e.observe(sample.model, sample.e2e);
      if (sample.promptTokens !== undefined) prompt.observe(sample.model, sample.promptTokens);
      if (sample.completionTokens !== undefined) generation.observe(sample.model, sample.completionTokens);
    },
  };
}
