// The OpenTelemetry side of the configuration: the `otel` dialect's provider name, and the OTLP
// export, on when OTEL_EXPORTER_OTLP_ENDPOINT (or its _METRICS_ variant) is set. The standard
// OTEL_* variables are read here with their specified meanings and defaults, validated with the
// rest of the configuration, and handed to the SDK explicitly; the SDK itself still reads the
// ones infermeter does not (compression, TLS files, the temporality preference).

import { integer, nonEmpty, readWith, type Env, type Problem } from '../../config/parse/parse.ts';

type OtlpProtocol = 'http/protobuf' | 'http/json';

export interface OtlpExportConfig {
  /** The full URL metrics are POSTed to (…/v1/metrics for OTEL_EXPORTER_OTLP_ENDPOINT). */
  readonly url: URL;
  /** Which variable the URL came from, for messages. */
  readonly urlVariable: string;
  readonly protocol: OtlpProtocol;
  /** OTEL_EXPORTER_OTLP_HEADERS with OTEL_EXPORTER_OTLP_METRICS_HEADERS over it. */
  readonly headers: Readonly<Record<string, string>>;
  /** OTEL_METRIC_EXPORT_INTERVAL, milliseconds between exports. */
  readonly intervalMs: number;
  /** OTEL_METRIC_EXPORT_TIMEOUT, milliseconds one export may take (at most the interval). */
  readonly timeoutMs: number;
  /**
   * OTEL_EXPORTER_OTLP_METRICS_TIMEOUT, else OTEL_EXPORTER_OTLP_TIMEOUT (10 s by default): the
   * exporter's wait for one export's answer; an export is cut at the lower of it and timeoutMs.
   */
  readonly requestTimeoutMs: number;
  /** Resource attributes: infermeter's defaults, OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME. */
  readonly resource: Readonly<Record<string, string>>;
}

export interface OtelConfig {
  /** `gen_ai.provider.name` of the otel dialect and the export. */
  readonly providerName: string;
  /** The OTLP export; undefined when no endpoint is set (or the SDK is disabled). */
  readonly export: OtlpExportConfig | undefined;
}

const value = (env: Env, variable: string): string | undefined => nonEmpty(env[variable]);

/** The OTLP export (the provider name is a row of the variables table: config.ts adds it). */
export function parseOtel(env: Env, hostname: string, problem: Problem): Omit<OtelConfig, 'providerName'> {
  const disabled = value(env, 'OTEL_SDK_DISABLED')?.toLowerCase();
  if (disabled !== undefined && disabled !== 'true' && disabled !== 'false') problem('OTEL_SDK_DISABLED', 'true or false', env.OTEL_SDK_DISABLED);
  const exporters = value(env, 'OTEL_METRICS_EXPORTER')?.toLowerCase();
  if (exporters !== undefined && exporters !== 'otlp' && exporters !== 'none') {
    problem('OTEL_METRICS_EXPORTER', 'otlp or none (infermeter pushes over OTLP only; /metrics is its Prometheus endpoint)', env.OTEL_METRICS_EXPORTER);
  }

  const url = parseEndpoint(env, problem);
  if (url === undefined || disabled === 'true' || exporters === 'none') return { export: undefined };

  const protocolVariable =
    value(env, 'OTEL_EXPORTER_OTLP_METRICS_PROTOCOL') !== undefined ? 'OTEL_EXPORTER_OTLP_METRICS_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocolText = value(env, protocolVariable) ?? 'http/protobuf';
  let protocol: OtlpProtocol = 'http/protobuf';
  if (protocolText === 'http/protobuf' || protocolText === 'http/json') protocol = protocolText;
  else problem(protocolVariable, 'http/protobuf or http/json (grpc is not supported)', env[protocolVariable]);

  const headers = { ...parseHeaders(env, 'OTEL_EXPORTER_OTLP_HEADERS', problem), ...parseHeaders(env, 'OTEL_EXPORTER_OTLP_METRICS_HEADERS', problem) };

  const intervalMs = parseMillis(env, 'OTEL_METRIC_EXPORT_INTERVAL', 60_000, problem);
  const timeoutMs = Math.min(parseMillis(env, 'OTEL_METRIC_EXPORT_TIMEOUT', 30_000, problem), intervalMs);
  // The specification's default; the signal's own variable wins over the general one.
  const requestTimeoutMs = parseMillis(env, 'OTEL_EXPORTER_OTLP_METRICS_TIMEOUT', parseMillis(env, 'OTEL_EXPORTER_OTLP_TIMEOUT', 10_000, problem), problem);

  const resource: Record<string, string> = {
    'service.name': 'infermeter',
    'service.instance.id': hostname,
    ...parseKeyValues(env, 'OTEL_RESOURCE_ATTRIBUTES', 'key=value pairs separated by commas, values percent-encoded', problem, false),
  };
  const serviceName = value(env, 'OTEL_SERVICE_NAME');
  if (serviceName !== undefined) resource['service.name'] = serviceName;

  return {
    export: {
      url: url.url,
      urlVariable: url.variable,
      protocol,
      headers: Object.freeze(headers),
      intervalMs,
      timeoutMs,
      requestTimeoutMs,
      resource: Object.freeze(resource),
    },
  };
}

/**
 * The metrics URL: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT as it is, else OTEL_EXPORTER_OTLP_ENDPOINT
 * with `v1/metrics` appended to its path (the specification's rule for the signal-less variable).
 */
function parseEndpoint(env: Env, problem: Problem): { url: URL; variable: string } | undefined {
  const specific = value(env, 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT');
  const base = value(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const variable = specific !== undefined ? 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  const text = specific ?? base;
  if (text === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    problem(variable, 'an http:// or https:// URL of an OTLP/HTTP receiver, e.g. http://otel-collector:4318', env[variable]);
    return undefined;
  }
  if (specific === undefined) {
    if (!url.pathname.endsWith('/')) url.pathname += '/';
    url.pathname += 'v1/metrics';
  }
  return { url, variable };
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Headers for every export; a bad value is reported without echoing it (headers carry credentials). */
function parseHeaders(env: Env, variable: string, problem: Problem): Record<string, string> {
  const expected = 'headers as name=value pairs separated by commas, values percent-encoded, e.g. authorization=Bearer%20abc';
  const headers = parseKeyValues(env, variable, expected, problem, true);
  for (const [name, v] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name) || !HEADER_VALUE.test(v)) {
      problem(variable, expected, undefined);
      return {};
    }
  }
  return headers;
}

const MILLIS = integer(1, 86_400_000, 'milliseconds, an integer from 1 to 86400000');

function parseMillis(env: Env, variable: string, fallback: number, problem: Problem): number {
  return readWith(MILLIS, variable, env[variable], fallback, problem);
}

/**
 * `key1=value1,key2=value2` (the W3C Baggage form the OpenTelemetry variables use), values
 * percent-decoded. `secret`: a bad value is not echoed (headers carry credentials).
 */
function parseKeyValues(env: Env, variable: string, expected: string, problem: Problem, secret: boolean): Record<string, string> {
  const text = value(env, variable);
  const out: Record<string, string> = {};
  if (text === undefined) return out;
  for (const part of text.split(',')) {
    if (part.trim() === '') continue;
    const eq = part.indexOf('=');
    const key = eq === -1 ? '' : part.slice(0, eq).trim();
    let decoded: string | undefined;
    try {
      decoded = eq === -1 ? undefined : decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      decoded = undefined;
    }
    if (key === '' || decoded === undefined) {
      problem(variable, expected, secret ? undefined : env[variable]);
      return {};
    }
    out[key] = decoded;
  }
  return out;
}
