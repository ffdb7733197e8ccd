// Histogram bucket boundaries of every histogram family, by family name, and the parser for the
// INFERMETER_BUCKETS_<FAMILY> overrides. The MindIE defaults are the spec's; the AOM defaults
// (milliseconds and token counts) are infermeter's choice for LLM traffic, documented in
// docs/metrics.md; the vLLM defaults are vLLM's own (vllm/v1/metrics/loggers.py, v0.12).

const DEFAULT_BUCKETS = {
  // MindIE (seconds, tokens): as the spec gives them.
  time_to_first_token_seconds: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  time_per_output_token_seconds: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
  e2e_request_latency_seconds: [1, 2.5, 5, 10, 15, 20, 30, 40, 50, 60],
  request_prompt_tokens: [10, 50, 100, 200, 500, 1000, 2000, 5000, 10000],
  request_generation_tokens: [10, 50, 100, 200, 500, 1000, 2000, 5000, 10000],
  // infermeter's additions in MindIE style: the gap between tokens, resolved below 10 ms where
  // fast decoders live; the first response byte on the TTFT buckets, so the two compare.
  inter_token_latency_seconds: [0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5],
  time_to_first_byte_seconds: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  // ModelArts AOM (milliseconds, tokens): the spec names upper limits of 3.7K (request cost) and
  // 110K (the others); the last finite bounds reach past them so that the top is resolved.
  infer_service_request_cost: [10, 25, 50, 100, 250, 500, 1000, 2000, 3700, 5000, 10000, 20000, 30000, 60000, 120000, 300000],
  infer_service_first_token_cost: [5, 10, 25, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500, 10000, 20000, 30000, 60000, 110000],
  infer_service_per_token_cost: [1, 2, 5, 10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200, 300, 500, 1000, 2500, 110000],
  infer_service_input_token_quantity: [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 110000, 131072],
  infer_service_output_token_quantity: [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 110000, 131072],
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
  // OpenTelemetry GenAI semantic conventions (seconds, tokens): the ExplicitBucketBoundaries the
  // conventions advise (semconv v1.37-v1.41 gen-ai-metrics), under the Prometheus names; the
  // OTLP export uses the same boundaries.
  gen_ai_server_time_to_first_token_seconds: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  gen_ai_server_time_per_output_token_seconds: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
  gen_ai_server_request_duration_seconds: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92],
  gen_ai_client_token_usage: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
  // Per-tenant metering (seconds): few buckets, as each tenant and model has its own series set;
  // enough for an SLO's threshold (TTFT under 0.5 s, say) and a coarse latency picture.
  infermeter_tenant_time_to_first_token_seconds: [0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  infermeter_tenant_e2e_request_latency_seconds: [0.5, 1, 2.5, 5, 10, 30, 60, 120],
  // The proxy's own time per write (seconds): from 10 µs, where a loopback hop's floor lies, to
  // 100 ms, a loop that was held up.
  infermeter_proxy_overhead_seconds: [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
} as const satisfies Record<string, readonly number[]>;

export type HistogramFamily = keyof typeof DEFAULT_BUCKETS;

export const HISTOGRAM_FAMILIES = Object.keys(DEFAULT_BUCKETS) as HistogramFamily[];

/** Overrides by family; families not named keep their defaults. */
export type BucketOverrides = Readonly<Partial<Record<HistogramFamily, readonly number[]>>>;

export function bucketsFor(family: HistogramFamily, overrides: BucketOverrides | undefined): readonly number[] {
  return overrides?.[family] ?? DEFAULT_BUCKETS[family];
}

/** The environment variable that overrides a family's buckets (`:` of vLLM's names as `_`). */
export function bucketVariable(family: HistogramFamily): string {
  return `INFERMETER_BUCKETS_${family.toUpperCase().replace(':', '_')}`;
}

/** Parses "0.1,0.5,1" into strictly increasing finite positive numbers; undefined when invalid. */
export function parseBuckets(text: string): number[] | undefined {
  const parts = text.split(',').map((p) => p.trim());
  if (parts.length === 0 || parts.length > 100) return undefined;
  const values: number[] = [];
  for (const part of parts) {
    if (!/^(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/.test(part)) return undefined;
    const value = Number(part);
    if (!Number.isFinite(value) || value <= 0) return undefined;
    if (values.length > 0 && value <= values[values.length - 1]!) return undefined;
    values.push(value);
  }
  return values;
}
