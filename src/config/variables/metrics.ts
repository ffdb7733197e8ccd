// The variables table, third part: what /metrics serves (dialects, histogram buckets, the AOM
// labels) and the OpenTelemetry export's standard OTEL_* variables. The dialects' and the
// bucket families' text comes from the dialect table (metrics/dialects/index.ts).
import { bucketFamiliesHelp, dialectsHelp } from '../../metrics/dialects/index.ts';
import { integer, onOff, text } from '../parse/parse.ts';
import { documented, variable } from './variable-table.ts';

export const METRICS_VARIABLES = [
  documented('INFERMETER_DIALECTS', '`mindie`', dialectsHelp()),
  documented('INFERMETER_BUCKETS_<FAMILY>', "the family's default", bucketFamiliesHelp()),
  variable({
    name: 'INFERMETER_STALL_SECONDS',
    key: 'stallSeconds',
    parse: integer(1, 3600),
    value: 30,
    meaning: 'a stream whose longest silence reached this many seconds counts in `infermeter_stream_stalls_total`, {range}',
  }),
  variable({
    name: 'INFERMETER_PROMPT_BANDS',
    key: 'promptBands',
    parse: onOff(),
    value: false,
    meaning: [
      '`on`: TTFT also per prompt size, `infermeter_time_to_first_token_by_prompt_band_seconds{model_name,prompt_band}`',
      '(five bands per model: `<1k`, `1k-8k`, `8k-32k`, `>32k`, `unknown`)',
    ],
  }),
  variable({
    name: 'INFERMETER_AOM_PERIOD_SECONDS',
    group: 'aom',
    key: 'periodSeconds',
    parse: integer(1, 3600),
    value: 30,
    meaning: "AOM collection period: the period gauges and the container metrics' sampling, {range}",
  }),
  documented('INFERMETER_AOM_SERVICE_ID', 'unset', 'AOM `service_id` label on every AOM series; unset: the label is not emitted'),
  documented('INFERMETER_AOM_GROUP_ID', 'unset', 'AOM `group_id` label, likewise'),
  documented('INFERMETER_AOM_PROJECT_ID', 'unset', 'AOM `project_id` label, likewise'),
  documented('INFERMETER_AOM_INSTANCE_NAME', 'unset', 'AOM `instance_name` label, likewise'),
  documented('INFERMETER_AOM_SERVICE_NAME', 'unset', 'AOM `service_name` label, likewise'),
  documented('INFERMETER_AOM_SOURCE', 'the host name (the pod name in Kubernetes)', 'AOM `source` label'),
  variable({
    name: 'INFERMETER_OTEL_PROVIDER_NAME',
    group: 'otel',
    key: 'providerName',
    parse: text(/^[^\u0000-\u001f\u007f]{1,128}$/, 'a name of 1 to 128 printable characters, e.g. openai'),
    value: 'openai',
    meaning: [
      '`gen_ai.provider.name` of the `otel` dialect and the OTLP export (`openai`: the OpenAI-compatible API',
      'flavour, as the conventions ask of OpenAI-API clients, and `anthropic` on `/v1/messages`; set e.g.',
      '`vllm` to name the engine on every route)',
    ],
  }),
  documented(
    'OTEL_EXPORTER_OTLP_ENDPOINT',
    'unset (no export)',
    'base URL of an OTLP/HTTP receiver (an OpenTelemetry Collector: `http://otel-collector:4318`); set, the',
    '`otel` measurements are pushed to it + `/v1/metrics`, whatever `INFERMETER_DIALECTS` says; an invalid',
    'URL stops the start',
  ),
  documented('OTEL_EXPORTER_OTLP_METRICS_ENDPOINT', 'unset', 'the full metrics URL, used as it is; wins over `OTEL_EXPORTER_OTLP_ENDPOINT`'),
  documented('OTEL_EXPORTER_OTLP_PROTOCOL', '`http/protobuf`', '`http/protobuf` or `http/json` (`grpc` is not supported)'),
  documented('OTEL_EXPORTER_OTLP_METRICS_PROTOCOL', '`OTEL_EXPORTER_OTLP_PROTOCOL`', 'the same, for metrics only'),
  documented(
    'OTEL_EXPORTER_OTLP_HEADERS',
    'unset',
    'headers sent with every export, `name=value` pairs separated by commas, values percent-encoded',
    '(`authorization=Bearer%20abc`); never logged',
  ),
  documented('OTEL_EXPORTER_OTLP_METRICS_HEADERS', 'unset', 'the same, for metrics only; wins per header'),
  documented('OTEL_METRIC_EXPORT_INTERVAL', '`60000`', 'milliseconds between two exports'),
  documented(
    'OTEL_METRIC_EXPORT_TIMEOUT',
    '`30000`',
    'milliseconds one export may take (at most the interval); the last export on stop waits at most this, and',
    'never more than 10 s',
  ),
  documented(
    'OTEL_EXPORTER_OTLP_TIMEOUT',
    '`10000`',
    "milliseconds the exporter waits for one export's answer (the specification's default); an export still",
    'unanswered at it, or at `OTEL_METRIC_EXPORT_TIMEOUT` when lower, is cut and counted as failed',
  ),
  documented('OTEL_EXPORTER_OTLP_METRICS_TIMEOUT', '`OTEL_EXPORTER_OTLP_TIMEOUT`', 'the same, for metrics only'),
  documented('OTEL_SERVICE_NAME', '`infermeter`', '`service.name` of the exported resource; wins over one in `OTEL_RESOURCE_ATTRIBUTES`'),
  documented(
    'OTEL_RESOURCE_ATTRIBUTES',
    'unset',
    'more resource attributes, `key=value` pairs separated by commas, values percent-encoded',
    '(`deployment.environment.name=prod,k8s.pod.name=...`); `service.instance.id` defaults to the host name',
  ),
  documented('OTEL_METRICS_EXPORTER', '`otlp`', '`none` turns the export off with the endpoint set (`otlp` or `none`)'),
  documented('OTEL_SDK_DISABLED', '`false`', '`true` turns the export off'),
] as const;
