// MindIE's service metrics (spec: MindIE "Querying Service Management and Control Metrics",
// English and Chinese editions): the names, HELP texts, types, `model_name` label, buckets and
// order of the spec. The engine-internal families (swapped requests, preemptions, KV-cache
// usage, prefix-cache hit rate) come from the engine's own /metrics when it is read, and are
// left without samples otherwise; running and waiting requests follow the rule of in-flight.ts
// (the engine's figures where it reports them, waiting never below what the proxy sees). infermeter's additions in the same style:
// request_cancelled_total{phase}, request_no_first_token_total{reason},
// inter_token_latency_seconds and time_to_first_byte_seconds.
import type { Registry } from '@prometheus-io/client';
import type { EngineFamily } from '../../engine/engine-map.ts';
import { inFlightNow } from '../state/in-flight.ts';
import { bucketsFor, type BucketTable } from '../exposition/buckets.ts';
import { createExposer } from './exposer.ts';
import { registerDerived, registerHistogram, type MetricValue } from '../exposition/families.ts';
import type { MeasurementState, ModelState } from '../state/recorder.ts';
import type { Dialect, DialectContext } from './dialect.ts';

const LABEL = 'model_name';

/** Default buckets of the MindIE histograms (INFERMETER_BUCKETS_<FAMILY> overrides them). */
export const MINDIE_BUCKETS = {
  // MindIE (seconds, tokens): as the spec gives them.
  time_to_first_token_seconds: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  time_per_output_token_seconds: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
  e2e_request_latency_seconds: [1, 2.5, 5, 10, 15, 20, 30, 40, 50, 60],
  request_prompt_tokens: [10, 50, 100, 200, 500, 1000, 2000, 5000, 10000],
  request_generation_tokens: [10, 50, 100, 200, 500, 1000, 2000, 5000, 10000],
  // infermeter's additions in MindIE style: the gap between tokens, resolved below 10 ms where
  // fast decoders live; the first response byte on the TTFT buckets, so the two compare.
  inter_token_latency_seconds: [
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5,
  ],
  time_to_first_byte_seconds: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
} as const satisfies BucketTable;

export function createMindieDialect(registry: Registry, state: MeasurementState, context: DialectContext): Dialect {
  // The exposer_* families lead the exposition, as in the spec's example.
  const exposer = createExposer(registry);
  const names: string[] = [];

  const perModel = (read: (m: ModelState) => number) => (): MetricValue[] => {
    const values: MetricValue[] = [];
    for (const m of state.models.values()) values.push({ value: read(m), labels: { [LABEL]: m.model } });
    return values;
  };
  /** Running or waiting per model_name, by the one rule of in-flight.ts. */
  const inFlight = (which: 'running' | 'waiting') => (): MetricValue[] =>
    [...inFlightNow(state.models.values(), context.engine())[which]].map(([model, value]) => ({ value, labels: { [LABEL]: model } }));
  const engineOnly = (family: EngineFamily) => (): MetricValue[] =>
    [...(context.engine()?.values.get(family) ?? [])].map(([model, value]) => ({ value, labels: { [LABEL]: model } }));

  const family = (name: string, help: string, type: 'counter' | 'gauge', collect: () => MetricValue[], aggregator: 'sum' | 'average' = 'sum'): void => {
    registerDerived(registry, { name, help, type, aggregator, collect });
    names.push(name);
  };

  family(
    'request_received_total',
    'Number of requests received so far.',
    'counter',
    perModel((m) => m.received),
  );
  family(
    'request_success_total',
    'Number of requests proceed successfully so far.',
    'counter',
    perModel((m) => m.success),
  );
  family(
    'request_failed_total',
    'Number of requests failed so far.',
    'counter',
    perModel((m) => m.failed),
  );
  family(
    'request_cancelled_total',
    'Number of requests cancelled by the client so far (neither success nor failure), by the phase they were in.',
    'counter',
    () => {
      const values: MetricValue[] = [];
      for (const m of state.models.values()) {
        values.push({ value: m.cancelledBeforeFirstToken, labels: { [LABEL]: m.model, phase: 'before_first_token' } });
        values.push({ value: m.cancelledDecoding, labels: { [LABEL]: m.model, phase: 'decoding' } });
      }
      return values;
    },
  );
  family(
    'request_no_first_token_total',
    'Number of streamed requests that ended without a token, by reason: no_token (the stream ended), error, cancelled.',
    'counter',
    () => {
      const values: MetricValue[] = [];
      for (const m of state.models.values()) {
        for (const reason of ['no_token', 'error', 'cancelled'] as const) values.push({ value: m.noFirstToken[reason], labels: { [LABEL]: m.model, reason } });
      }
      return values;
    },
  );
  family('num_preemptions_total', 'Cumulative number of preemption from the engine.', 'counter', engineOnly('num_preemptions_total'));
  family('num_requests_running', 'Number of requests currently running on NPU.', 'gauge', inFlight('running'));
  family('num_requests_waiting', 'Number of requests waiting to be processed.', 'gauge', inFlight('waiting'));
  family('num_requests_swapped', 'Number of requests swapped to CPU.', 'gauge', engineOnly('num_requests_swapped'));
  family(
    'prompt_tokens_total',
    'Number of prefill tokens processed.',
    'counter',
    perModel((m) => m.promptTokens),
  );
  family(
    'generation_tokens_total',
    'Number of generation tokens processed.',
    'counter',
    perModel((m) => m.generationTokens),
  );
  family(
    'avg_prompt_throughput_toks_per_s',
    'Average prefill throughput in tokens/s.',
    'gauge',
    perModel((m) => m.promptWindow.sum(state.clock()) / state.windowCoverage()),
  );
  family(
    'avg_generation_throughput_toks_per_s',
    'Average generation throughput in tokens/s.',
    'gauge',
    perModel((m) => m.generationWindow.sum(state.clock()) / state.windowCoverage()),
  );
  family(
    'failed_request_perc',
    'Requests failure rate. 1 means 100 percent usage.',
    'gauge',
    perModel((m) => (m.received === 0 ? 0 : m.failed / m.received)),
    'average',
  );
  family('npu_cache_usage_perc', 'NPU KV-cache usage. 1 means 100 percent usage.', 'gauge', engineOnly('npu_cache_usage_perc'), 'average');
  family('cpu_cache_usage_perc', 'CPU KV-cache usage. 1 means 100 percent usage.', 'gauge', engineOnly('cpu_cache_usage_perc'), 'average');
  family('npu_prefix_cache_hit_rate', 'NPU prefix cache block hit rate.', 'gauge', engineOnly('npu_prefix_cache_hit_rate'), 'average');

  const histogram = (name: keyof typeof MINDIE_BUCKETS, help: string) => {
    const h = registerHistogram(registry, { name, help, buckets: bucketsFor(MINDIE_BUCKETS, name, context.buckets), labelName: LABEL });
    names.push(name);
    return h;
  };
  const ttft = histogram('time_to_first_token_seconds', 'Histogram of time to first token in seconds.');
  const tpot = histogram('time_per_output_token_seconds', 'Histogram of time per output token in seconds.');
  const e2e = histogram('e2e_request_latency_seconds', 'Histogram of end to end request latency in seconds.');
  const prompt = histogram('request_prompt_tokens', 'Number of prefill tokens processed.');
  const generation = histogram('request_generation_tokens', 'Number of generation tokens processed.');
  const itl = histogram('inter_token_latency_seconds', 'Histogram of the time between consecutive tokens in seconds, observed as tokens arrive.');
  const ttfb = histogram('time_to_first_byte_seconds', 'Histogram of time from arrival to the first response byte from the upstream in seconds.');

  return {
    name: 'mindie',
    metricNames: [...exposer.metricNames, ...names],
    scrapeStarted: exposer.scrapeStarted,
    firstOutput(info, ttftSeconds) {
      if (ttftSeconds !== undefined) ttft.observe(info.model, ttftSeconds, 1, info.requestId);
    },
    interToken(info, seconds, tokens) {
      itl.observe(info.model, seconds, tokens);
    },
    finished(sample) {
      if (sample.ttfb !== undefined) ttfb.observe(sample.model, sample.ttfb);
      // MindIE counts TPOT per token: completion_tokens - 1 observations of the mean gap.
      if (sample.tpot !== undefined) tpot.observe(sample.model, sample.tpot.seconds, sample.tpot.tokens, sample.requestId);
      if (sample.e2e !== undefined) e2e.observe(sample.model, sample.e2e, 1, sample.requestId);
      if (sample.promptTokens !== undefined) prompt.observe(sample.model, sample.promptTokens);
      if (sample.completionTokens !== undefined) generation.observe(sample.model, sample.completionTokens);
    },
  };
}
