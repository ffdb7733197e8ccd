// The OpenTelemetry GenAI semantic conventions (gen-ai-metrics, semconv v1.37.0 to v1.41.0, the
// last core releases before the GenAI conventions moved to open-telemetry/semantic-conventions-genai,
// whose server metrics are unchanged): gen_ai.server.time_to_first_token,
// gen_ai.server.time_per_output_token, gen_ai.server.request.duration and
// gen_ai.client.token.usage, with the conventions' attributes and advised bucket boundaries.
// On /metrics they appear in the Prometheus form the OpenTelemetry compatibility specification
// gives them (dots to underscores, the unit `s` as a `_seconds` suffix, `{token}` dropped); the
// OTLP export (otlp-export.ts) records the very same measurements from the same mapping.
// Observed once per finished request; nothing here runs on the data path.
import type { Registry } from '@prometheus-io/client';
import { REAL_APIS, type InferenceApis } from '../../measure/inference-apis.ts';
import type { RequestSample } from '../../measure/sample.ts';
import { bucketsFor, type BucketTable } from '../exposition/buckets.ts';
import { registerLabelledHistogram, type LabelledHistogram } from '../exposition/families.ts';
import type { MeasurementState } from '../state/recorder.ts';
import type { Dialect, DialectContext } from './dialect.ts';

/** Default buckets of the OTel histograms (INFERMETER_BUCKETS_<FAMILY> overrides them, on /metrics and in the OTLP export). */
export const OTEL_BUCKETS = {
  // OpenTelemetry GenAI semantic conventions (seconds, tokens): the ExplicitBucketBoundaries the
  // conventions advise (semconv v1.37-v1.41 gen-ai-metrics), under the Prometheus names; the
  // OTLP export uses the same boundaries.
  gen_ai_server_time_to_first_token_seconds: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  gen_ai_server_time_per_output_token_seconds: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
  gen_ai_server_request_duration_seconds: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92],
  gen_ai_client_token_usage: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
} as const satisfies BucketTable;

export interface OtelInstrument {
  /** The semantic-convention name (what OTLP carries). */
  readonly name: string;
  /** UCUM unit. */
  readonly unit: string;
  readonly description: string;
  /** The Prometheus name: the family on /metrics, its buckets and their override. */
  readonly family: keyof typeof OTEL_BUCKETS;
}

export type OtelInstrumentKey = 'ttft' | 'tpot' | 'duration' | 'tokens';

export const OTEL_INSTRUMENTS: Readonly<Record<OtelInstrumentKey, OtelInstrument>> = {
  ttft: {
    name: 'gen_ai.server.time_to_first_token',
    unit: 's',
    description: 'Time to generate first token for successful responses.',
    family: 'gen_ai_server_time_to_first_token_seconds',
  },
  tpot: {
    name: 'gen_ai.server.time_per_output_token',
    unit: 's',
    description: 'Time per output token generated after the first token for successful responses.',
    family: 'gen_ai_server_time_per_output_token_seconds',
  },
  duration: {
    name: 'gen_ai.server.request.duration',
    unit: 's',
    description: 'Generative AI server request duration such as time-to-last byte or last output token.',
    family: 'gen_ai_server_request_duration_seconds',
  },
  tokens: {
    name: 'gen_ai.client.token.usage',
    unit: '{token}',
    description: 'Number of input and output tokens used.',
    family: 'gen_ai_client_token_usage',
  },
};

/** Every attribute the measurements may carry, in the order they become labels. */
const OTEL_ATTRIBUTES = [
  'gen_ai.operation.name',
  'gen_ai.provider.name',
  'gen_ai.request.model',
  'gen_ai.response.model',
  'error.type',
  'gen_ai.token.type',
  'server.address',
  'server.port',
  // Not a semantic convention (none names a caller's tenant): infermeter's own, with
  // INFERMETER_TENANT on; its label on /metrics is infermeter_tenant.
  'infermeter.tenant',
] as const;

export type OtelAttributes = Partial<Record<(typeof OTEL_ATTRIBUTES)[number], string | number>>;

export interface OtelOptions {
  /**
   * `gen_ai.provider.name` (INFERMETER_OTEL_PROVIDER_NAME, default `openai`). `openai` names the
   * API's flavour, so the Messages API's requests say `anthropic`, as the conventions ask of
   * Anthropic clients; any other name (the engine's) stands for every route.
   */
  readonly providerName: string;
  /** `server.address` and `server.port`: the upstream model server. */
  readonly serverAddress?: string;
  readonly serverPort?: number;
}

const DEFAULT_OPTIONS: OtelOptions = { providerName: 'openai' };

/**
 * `error.type` of a request that did not succeed: the HTTP status the upstream answered with
 * (`429`, `503`, ...), else infermeter's failure reason (`upstream_unreachable`,
 * `upstream_timeout`, `upstream_reset`, `upstream_protocol`, `stream_error`, `worker_exit`), or
 * `cancelled` when the client left; undefined for a success.
 */
export function errorType(sample: RequestSample): string | undefined {
  if (sample.outcome === 'success') return undefined;
  if (sample.outcome === 'cancelled') return 'cancelled';
  if (sample.failure === 'upstream_status') return sample.status >= 100 && sample.status <= 599 ? String(sample.status) : '_OTHER';
  return sample.failure ?? '_OTHER';
}

/**
 * The measurements one finished request makes, each with its attributes:
 * - time to first token and time per output token: successful streams (one observation each; the
 *   per-output-token time is the request's (last token - first token) / (tokens - 1));
 * - request duration: every request with a duration (arrival to the last byte handed to the
 *   client, or to its end), with `error.type` on those that did not succeed;
 * - token usage: `input` and `output` as the upstream reported them (or, for a stream cut short,
 *   the output tokens it delivered); never the zero fallback of a stream without usage.
 * `apis`: the API table whose rows name the operation and provider (the real one unless given).
 */
export function otelMeasurements(
  sample: RequestSample,
  options: OtelOptions,
  emit: (instrument: OtelInstrumentKey, value: number, attributes: OtelAttributes) => void,
  apis: InferenceApis = REAL_APIS,
): void {
  const api = apis.of(sample.api);
  const base: OtelAttributes = {
    'gen_ai.operation.name': api?.otelOperation ?? sample.api,
    'gen_ai.provider.name': api?.otelProvider !== undefined && options.providerName === 'openai' ? api.otelProvider : options.providerName,
    'gen_ai.request.model': sample.model,
  };
  if (sample.responseModel !== undefined) base['gen_ai.response.model'] = sample.responseModel;
  if (sample.tenant !== undefined) base['infermeter.tenant'] = sample.tenant;
  if (options.serverAddress !== undefined) {
    base['server.address'] = options.serverAddress;
    if (options.serverPort !== undefined) base['server.port'] = options.serverPort;
  }
  if (sample.outcome === 'success') {
    if (sample.ttft !== undefined) emit('ttft', sample.ttft, base);
    if (sample.tpot !== undefined) emit('tpot', sample.tpot.seconds, base);
  }
  const duration = sample.outcome === 'success' ? sample.e2e : sample.duration;
  if (duration !== undefined) {
    const error = errorType(sample);
    emit('duration', duration, error === undefined ? base : { ...base, 'error.type': error });
  }
  if (sample.usageSource === 'upstream' || sample.usageSource === 'timings' || sample.usageSource === 'events') {
    if (sample.promptTokens !== undefined) emit('tokens', sample.promptTokens, { ...base, 'gen_ai.token.type': 'input' });
    if (sample.completionTokens !== undefined) emit('tokens', sample.completionTokens, { ...base, 'gen_ai.token.type': 'output' });
  }
}

/** The Prometheus label of an attribute: invalid characters (the dots) become `_`. */
export function prometheusLabel(attribute: string): string {
  return attribute.replace(/[^a-zA-Z0-9_]+/g, '_');
}

const LABELS = OTEL_ATTRIBUTES.map(prometheusLabel);

/** `options`: the constant attributes (provider, upstream address). */
export function createOtelDialect(registry: Registry, _state: MeasurementState, context: DialectContext, options: OtelOptions = DEFAULT_OPTIONS): Dialect {
  const names: string[] = [];
  const families = {} as Record<OtelInstrumentKey, LabelledHistogram>;
  for (const key of Object.keys(OTEL_INSTRUMENTS) as OtelInstrumentKey[]) {
    const instrument = OTEL_INSTRUMENTS[key];
    families[key] = registerLabelledHistogram(registry, {
      name: instrument.family,
      help: instrument.description,
      buckets: bucketsFor(OTEL_BUCKETS, instrument.family, context.buckets),
      labelNames: LABELS,
    });
    names.push(instrument.family);
  }
  const values: (string | undefined)[] = new Array<string | undefined>(OTEL_ATTRIBUTES.length);
  // The request being mapped: its id is the latency histograms' exemplar (not the token counts').
  let requestId: string | undefined;
  const observe = (key: OtelInstrumentKey, value: number, attributes: OtelAttributes): void => {
    for (let i = 0; i < OTEL_ATTRIBUTES.length; i++) {
      const v = attributes[OTEL_ATTRIBUTES[i]!];
      values[i] = v === undefined ? undefined : String(v);
    }
    families[key].observe(values, value, 1, key === 'tokens' ? undefined : requestId);
  };
  return {
    name: 'otel',
    metricNames: names,
    finished(sample) {
      requestId = sample.requestId;
      otelMeasurements(sample, options, observe, context.apis);
    },
  };
}
