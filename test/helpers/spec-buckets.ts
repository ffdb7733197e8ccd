// Histogram bucket boundaries as their specifications give them, written out here rather than
// read from src (each dialect's *_BUCKETS, buckets.ts' OWN_BUCKETS): a test that compares the code's buckets with the code's own
// table cannot catch a wrong boundary. Change a value here only with its source.

/**
 * MindIE's service metrics (Prometheus format): the `le` values of the spec's example response,
 * ../shared/spec/000_ca6df7831163f78c.txt lines 81-157 (the Chinese edition, 001, has the same).
 */
export const MINDIE_BUCKETS = {
  time_to_first_token_seconds: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  time_per_output_token_seconds: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
  e2e_request_latency_seconds: [1, 2.5, 5, 10, 15, 20, 30, 40, 50, 60],
  request_prompt_tokens: [10, 50, 100, 200, 500, 1000, 2000, 5000, 10000],
  request_generation_tokens: [10, 50, 100, 200, 500, 1000, 2000, 5000, 10000],
} as const;

// vLLM's own, from vllm/v1/metrics/loggers.py (PrometheusStatLogger, v0.12): the TTFT list, the
// list shared by inter-token latency and per-request TPOT, `request_latency_buckets` (e2e, queue,
// prefill, decode, inference), `[1, 2, 5, 10, 20]` for n, and build_1_2_5_buckets(max_model_len)
// for token counts, here for a max_model_len of 100000 to 199999.
const VLLM_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560];
const VLLM_TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const VLLM_LATENCY = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];
const VLLM_1_2_5 = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];

export const VLLM_BUCKETS: Readonly<Record<string, readonly number[]>> = {
  'vllm:time_to_first_token_seconds': VLLM_TTFT,
  'vllm:inter_token_latency_seconds': VLLM_TPOT,
  'vllm:request_time_per_output_token_seconds': VLLM_TPOT,
  'vllm:e2e_request_latency_seconds': VLLM_LATENCY,
  'vllm:request_queue_time_seconds': VLLM_LATENCY,
  'vllm:request_prefill_time_seconds': VLLM_LATENCY,
  'vllm:request_decode_time_seconds': VLLM_LATENCY,
  'vllm:request_inference_time_seconds': VLLM_LATENCY,
  'vllm:request_prompt_tokens': VLLM_1_2_5,
  'vllm:request_generation_tokens': VLLM_1_2_5,
  'vllm:request_params_max_tokens': VLLM_1_2_5,
  'vllm:request_max_num_generation_tokens': VLLM_1_2_5,
  'vllm:request_params_n': [1, 2, 5, 10, 20],
};

/**
 * The OpenTelemetry GenAI semantic conventions' advised ExplicitBucketBoundaries
 * (docs/gen-ai/gen-ai-metrics.md, semconv v1.37 to v1.41), by the Prometheus family name.
 */
export const OTEL_BUCKETS = {
  gen_ai_server_time_to_first_token_seconds: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  gen_ai_server_time_per_output_token_seconds: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
  gen_ai_server_request_duration_seconds: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92],
  gen_ai_client_token_usage: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
} as const;

/** The `le` label values a family with these bounds renders, +Inf last. */
export const les = (bounds: readonly number[]): string[] => [...bounds.map(String), '+Inf'];
/**
 * The `le` values as vLLM writes them (Python's prometheus_client: the repr of a float, "1.0",
 * "0.001"), for bounds from 1e-4 to below 1e6, the range of every vLLM default.
 */
export const pythonLes = (bounds: readonly number[]): string[] => [...bounds.map((b) => (Number.isInteger(b) ? `${b}.0` : String(b))), '+Inf'];

/**
 * infermeter's own choices, where no specification gives buckets, as docs/metrics.md documents
 * them (spec-buckets.test.ts checks the page and /metrics against these).
 */
export const INFERMETER_BUCKETS = {
  inter_token_latency_seconds: [
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5,
  ],
  time_to_first_byte_seconds: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
} as const;

/** The ModelArts AOM histograms (milliseconds, tokens): infermeter's choice, documented in docs/metrics.md. */
export const AOM_BUCKETS = {
  infer_service_request_cost: [10, 25, 50, 100, 250, 500, 1000, 2000, 3700, 5000, 10000, 20000, 30000, 60000, 120000, 300000],
  infer_service_first_token_cost: [5, 10, 25, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500, 10000, 20000, 30000, 60000, 110000],
  infer_service_per_token_cost: [1, 2, 5, 10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200, 300, 500, 1000, 2500, 110000],
  infer_service_input_token_quantity: [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 110000, 131072],
  infer_service_output_token_quantity: [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 110000, 131072],
} as const;
