// The configuration's one table: every variable infermeter reads, with its default and meaning,
// written as the README's configuration table shows them. loadConfig refuses an INFERMETER_*
// variable that is not here, `infermeter --help` prints it, and a test checks the README's table
// against it row by row, so the three cannot drift apart. Defaults and meanings are Markdown;
// the dialects' and the bucket families' come from the dialect table (metrics/dialects/index.ts).
import { bucketFamiliesHelp, dialectsHelp } from '../metrics/dialects/index.ts';

export interface VariableDoc {
  /** The variable's name; `<FAMILY>` stands for a family of names (INFERMETER_BUCKETS_<FAMILY>). */
  readonly name: string;
  readonly default: string;
  readonly meaning: string;
}

export const CONFIGURATION_TABLE: readonly VariableDoc[] = [
  { name: 'INFERMETER_UPSTREAM', default: '(required to start the proxy)', meaning: 'base URL of the model server, `http://` or `https://`, optionally with a path prefix; no credentials, query or fragment, and no trailing `/v1` (clients\' paths carry it)' },
  { name: 'INFERMETER_HOST', default: '`MIES_CONTAINER_IP`, else config `ipAddress`, else `INFERMETER_DEFAULT_HOST`, else `127.0.0.1`', meaning: 'data-plane bind address' },
  { name: 'INFERMETER_DEFAULT_HOST', default: '`127.0.0.1`; the container image sets `0.0.0.0`', meaning: 'the data-plane address (and so the management one) when none of `INFERMETER_HOST`, `MIES_CONTAINER_IP` and config `ipAddress` sets it: a packaging\'s default, never above MindIE\'s settings. `0.0.0.0` or `::` here needs no `INFERMETER_ALLOW_ALL_ZERO_IP`; through the others it does' },
  { name: 'INFERMETER_PORT', default: 'config `port`, else `1025`', meaning: 'data-plane port; `0` picks a free port (logged at start)' },
  { name: 'INFERMETER_MANAGEMENT_HOST', default: '`MIES_CONTAINER_MANAGEMENT_IP`, else config `managementIpAddress`, else the data-plane host', meaning: 'bind address of the management and metrics ports' },
  { name: 'INFERMETER_MANAGEMENT_PORT', default: 'config `managementPort`, else `1026`', meaning: 'management port: `GET /` (an index of what is served where), `GET /health`, `GET /ready`, `GET /metrics-json`, `GET /dashboard`' },
  { name: 'INFERMETER_METRICS_PORT', default: 'config `metricsPort`, else `1027`', meaning: 'port of `GET /metrics`; may equal the management port (one listener then serves both)' },
  { name: 'INFERMETER_CONFIG', default: 'none', meaning: 'path of a JSON file in MindIE\'s `config.json` layout; its `ServerConfig` keys `ipAddress`, `managementIpAddress`, `port`, `managementPort`, `metricsPort` are read' },
  { name: 'MIES_SERVICE_MONITOR_MODE', default: 'unset', meaning: 'MindIE\'s switch: `1` enables `/metrics`, any other value disables it (the metrics port is then not opened; a shared port answers 404); unset: enabled' },
  { name: 'MIES_CONTAINER_IP', default: 'unset', meaning: 'MindIE\'s data-plane address, used when `INFERMETER_HOST` is unset' },
  { name: 'MIES_CONTAINER_MANAGEMENT_IP', default: 'unset', meaning: 'MindIE\'s management address, used when `INFERMETER_MANAGEMENT_HOST` is unset' },
  { name: 'INFERMETER_MAX_INSPECT_BYTES', default: '`4194304` (4 MiB)', meaning: 'bytes of an inference request body scanned for `model`, `stream` and the generation parameters (`max_tokens`, `n`); a larger body is still forwarded whole and is counted with `model_name="unknown"`' },
  { name: 'INFERMETER_MAX_HELD_BODY_BYTES', default: '16 × `INFERMETER_MAX_INSPECT_BYTES` (64 MiB)', meaning: 'total bytes of request bodies held in memory at once per process (a chat or completions body held for usage injection, a body\'s copy kept for a re-send, a chunked `DELETE` or `OPTIONS` held to give it a length), 0 to 68719476736; past it a body is forwarded as it comes (still read for `model` and `stream`, without injection or re-send) or, for that `DELETE`/`OPTIONS`, answered 503 with `Retry-After`, counted in `infermeter_request_bodies_unheld_total`' },
  { name: 'INFERMETER_MAX_RESPONSE_INSPECT_BYTES', default: '`4194304` (4 MiB)', meaning: 'bytes of a non-streamed inference response kept to read its `usage` (after decompression for gzip, deflate, br, zstd)' },
  { name: 'INFERMETER_MAX_EVENT_BYTES', default: '`1048576` (1 MiB)', meaning: 'characters one server-sent event may buffer in the stream tap; past it the rest of that stream is forwarded unmeasured and counted' },
  { name: 'INFERMETER_THROUGHPUT_WINDOW_SECONDS', default: '`10`', meaning: 'window of `avg_prompt_throughput_toks_per_s` and `avg_generation_throughput_toks_per_s`, 1 to 3600' },
  { name: 'INFERMETER_LOG_LEVEL', default: '`info`', meaning: '`debug`, `info`, `warn` or `error`; logs are JSON lines on stderr' },
  { name: 'INFERMETER_UPSTREAM_METRICS', default: 'the upstream\'s origin + `/metrics`', meaning: 'URL of the engine\'s own Prometheus `/metrics` (vLLM, SGLang, TGI, llama.cpp, MindIE), read on an interval for the engine-only MindIE families and `/metrics-json`; `off` disables' },
  { name: 'INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS', default: '`5`', meaning: 'how often the engine\'s metrics are read, 1 to 3600' },
  { name: 'INFERMETER_UPSTREAM_METRICS_TIMEOUT_MS', default: '`2000`', meaning: 'timeout of one read of the engine\'s metrics, 100 to 60000' },
  { name: 'INFERMETER_UPSTREAM_METRICS_JSON', default: 'unset', meaning: 'URL of MindIE\'s own `/metrics-json` (its management port), for `remainBlocks` and its request counts' },
  { name: 'INFERMETER_RELAY_UPSTREAM_METRICS', default: '`0`', meaning: '`1`: re-serve the engine\'s whole exposition below infermeter\'s own on `/metrics` (validated, at most 240 KB, families whose names clash with infermeter\'s dropped)' },
  { name: 'INFERMETER_RELAY_INTERVAL_SECONDS', default: '`30`', meaning: 'how often the relayed exposition is refreshed, 1 to 3600' },
  { name: 'INFERMETER_JSON_WINDOW', default: '`1000`', meaning: '`/metrics-json` averages TTFT and TBT over this many most recent requests, 1 to 1000000' },
  { name: 'INFERMETER_JSON_JOB', default: '`node`', meaning: 'the `job` of every `/metrics-json` entry' },
  { name: 'INFERMETER_INJECT_USAGE', default: '`on`', meaning: '`on`: a streaming chat or completions request without `stream_options.include_usage` gets it added on its way upstream (the rest of the body unchanged), and the usage-only chunk this produces is removed from what the client receives, so token counts are real for clients that never ask for usage; `off` leaves every body untouched. Stops by itself if the upstream refuses the field' },
  { name: 'INFERMETER_ACCESS_LOG', default: '`off`', meaning: '`stdout` or a file path: one JSON line per finished inference request (time, request id, path, status, model, tenant with `INFERMETER_TENANT`, outcome, TTFB/TTFT/TPOT/e2e, tokens, bytes); never headers (but the tenant\'s, in header mode) or prompt/completion text; a path that cannot be appended to stops the start' },
  { name: 'INFERMETER_WORKERS', default: '`1`', meaning: 'data-plane processes sharing the data port (node:cluster), 1 to 256, or `auto` for one per CPU the process may use: the cgroup\'s CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`, the tightest level) rounded up, at least 1, at most the host\'s cores, else the host\'s cores; the start line says which (`workers`, `workers_from`). With more than 1, a primary process holds the metrics and serves the management and metrics ports, the workers send it their measurements, and `/metrics` and `/metrics-json` report all workers\' traffic exactly; a worker that dies is restarted (counted in `infermeter_worker_restarts_total`, its in-flight requests counted as failed)' },
  { name: 'INFERMETER_TLS_CERT', default: 'unset (config `tlsCert` with `httpsEnabled`)', meaning: 'PEM certificate (chain) of the data plane: HTTPS for clients' },
  { name: 'INFERMETER_TLS_KEY', default: 'unset (config `tlsPk`)', meaning: 'PEM private key of the data plane' },
  { name: 'INFERMETER_TLS_KEY_PASSPHRASE_FILE', default: 'unset (config `tlsPkPwd`)', meaning: 'file holding the key\'s passphrase, if it has one' },
  { name: 'INFERMETER_MANAGEMENT_TLS_CERT', default: 'unset (config `managementTlsCert`)', meaning: 'PEM certificate of the management port (and of the metrics port unless it has its own)' },
  { name: 'INFERMETER_MANAGEMENT_TLS_KEY', default: 'unset (config `managementTlsPk`)', meaning: 'its private key' },
  { name: 'INFERMETER_MANAGEMENT_TLS_KEY_PASSPHRASE_FILE', default: 'unset (config `managementTlsPkPwd`)', meaning: 'its passphrase file' },
  { name: 'INFERMETER_METRICS_TLS_CERT', default: 'the management port\'s (config `metricsTlsCert`)', meaning: 'PEM certificate of the metrics port' },
  { name: 'INFERMETER_METRICS_TLS_KEY', default: 'the management port\'s (config `metricsTlsPk`)', meaning: 'its private key; like every TLS key, refused without its certificate' },
  { name: 'INFERMETER_METRICS_TLS_KEY_PASSPHRASE_FILE', default: 'the management port\'s (config `metricsTlsPkPwd`)', meaning: 'its passphrase file; like every passphrase file, refused without the certificate and key' },
  { name: 'INFERMETER_UPSTREAM_CA_FILE', default: 'unset', meaning: 'PEM CA certificates trusted (besides the system\'s) for an `https://` upstream' },
  { name: 'INFERMETER_ALLOW_ALL_ZERO_IP', default: '`0` (config `allowAllZeroIpListening`)', meaning: '`1` allows listening on every address (`0.0.0.0`, `::`, in any spelling, or a host name resolving to one), which is refused otherwise, as MindIE refuses it (the refusal names the variable that was set; an unset `INFERMETER_MANAGEMENT_HOST` follows `INFERMETER_HOST`)' },
  { name: 'INFERMETER_METRICS_TOKEN', default: 'unset', meaning: 'bearer token required on the management and metrics ports (all but `/health`, `/ready` and the dashboard\'s page, which asks for it: [docs/dashboard.md](docs/dashboard.md#the-token)); 16 to 4096 printable characters; sent as `Authorization: Bearer <token>` (scheme in any case); compared in constant time' },
  { name: 'INFERMETER_METRICS_TOKEN_FILE', default: 'unset', meaning: 'file holding that token (instead of the variable)' },
  { name: 'INFERMETER_MAX_MODELS', default: '`100`', meaning: 'distinct `model_name` values kept; later new ones are counted under `other` (models the upstream lists at `/v1/models` always get their own)' },
  { name: 'INFERMETER_TENANT', default: '`off`', meaning: 'per-tenant metering: where a request\'s tenant comes from. `header:<name>`: that request header\'s value (e.g. `header:x-tenant-id`, `header:openai-organization`, `header:openai-project`; credential headers are refused: use `api-key`); `api-key`: the client\'s key, from `Authorization: Bearer <key>`, else Azure\'s `api-key: <key>`, else Anthropic\'s `x-api-key: <key>`, metered as `key-` + the first 12 hex digits of its SHA-256 (the key itself appears in no label, log, access log, `/metrics-json`, dashboard, OTLP attribute or message). A request without one is tenant `none`. Adds the `infermeter_tenant_*` families, the access log\'s `tenant`, the dashboard\'s tenant table and the `otel` dialect\'s `infermeter.tenant` attribute ([docs/metrics.md](docs/metrics.md#per-tenant-metering)). The forwarded request is not changed' },
  { name: 'INFERMETER_TENANT_ALIASES', default: 'unset', meaning: 'JSON file mapping tenants as they arrive (`key-…` hashes or header values) to readable names, `{"key-3f2a9c01b7d4": "search-team"}` (at most 10000 entries; names of 1 to 128 printable characters, not `none` or `other`). Needs `INFERMETER_TENANT`. Read again on SIGHUP and when the file changes (looked at every 2 s); a bad file stops the start, and on a reload keeps the mapping in use, with a warning. Aliased tenants always get their own series' },
  { name: 'INFERMETER_MAX_TENANTS', default: '`100`', meaning: 'distinct tenant values kept, 1 to 10000, besides the aliased ones, `none`, `unauthenticated` and `other`; a tenant takes a place only once the engine accepted one of its requests; later new ones are counted under `other` and in `infermeter_tenant_label_overflow_total`' },
  { name: 'INFERMETER_SLO', default: 'unset (no goodput)', meaning: 'goodput: the latency SLOs every inference request is held to, in vLLM\'s `--goodput` syntax: `key:milliseconds` pairs separated by spaces or commas, keys `ttft`, `tpot`, `e2el`, e.g. `ttft:500 tpot:50`. Each finished request is counted `good` (completed within every SLO, inclusive), `missed`, `failed` or `cancelled` by vLLM\'s benchmark rules, in `infermeter_goodput_requests_total`, `infermeter_slo_missed_requests_total`, `infermeter_goodput_tokens_total` (and per tenant with `INFERMETER_TENANT`); client errors (4xx but 408 and 429) are not judged ([docs/metrics.md](docs/metrics.md#goodput)). A bad key or value stops the start' },
  { name: 'INFERMETER_SLO_FILE', default: 'unset', meaning: 'JSON file of SLO classes per model and tenant, tried in order before `INFERMETER_SLO` (class `default`): `{"classes": [{"name": "batch", "model": "*", "tenant": "batch-*", "slo": "e2el:60000"}, {"name": "chat", "model": "llama-*", "slo": "ttft:500 tpot:50"}]}`; `model` and `tenant` are globs (`*`, `?`; default `*`) over the `model_name` and tenant labels; `"slo": "off"` leaves a class unjudged. Read again on SIGHUP and when the file changes (looked at every 2 s); a bad file stops the start, and on a reload keeps the classes in use, with a warning' },
  { name: 'INFERMETER_SLO_CLIENT_ALLOWANCE', default: 'unset (infermeter\'s own view)', meaning: 'milliseconds added to infermeter\'s ttft, tpot and e2el before they are compared with the SLOs, in the same syntax (`ttft:5 e2el:5`), for verdicts aligned with a client that reads the stream later ([docs/metrics.md](docs/metrics.md#whose-view)); needs `INFERMETER_SLO` or `INFERMETER_SLO_FILE`' },
  { name: 'INFERMETER_MAX_CONCURRENCY', default: '`0` = no limit (config `maxLinkNum`)', meaning: 'inference requests in flight at once per process; up to twice as many more wait in order; the rest get 503 at once' },
  { name: 'INFERMETER_HEADERS_TIMEOUT_MS', default: '`60000`', meaning: 'a client must send its request headers within this' },
  { name: 'INFERMETER_REQUEST_TIMEOUT_MS', default: '`300000`', meaning: 'a client must send its whole request within this' },
  { name: 'INFERMETER_UPSTREAM_CONNECT_TIMEOUT_MS', default: '`10000`', meaning: 'connecting to the upstream' },
  { name: 'INFERMETER_UPSTREAM_CONNECTIONS', default: '`mirror`', meaning: 'which upstream connection a request goes out on. `mirror`: each client connection gets upstream connections of its own, reused only for its next requests and closed when it closes, so the engine sees the connections it would see directly (a thread-per-connection engine such as llama.cpp keeps no thread for an idle proxy connection; [docs/real-engines.md](docs/real-engines.md#connections)); `pool`: one shared keep-alive pool (a client that opens a connection per request saves the upstream connect, but idle pooled connections hold such an engine\'s threads: waits of up to its 5 s idle timeout); `close`: a new upstream connection per request' },
  { name: 'INFERMETER_UPSTREAM_IDLE_TIMEOUT_MS', default: '`600000`', meaning: 'longest silence of the upstream (before its headers, or between chunks); then 504, or a cut stream. On inference routes it fires up to one sweep late: a quarter of the shorter of the two timeouts, from 25 ms to 1 s' },
  { name: 'INFERMETER_TOTAL_TIMEOUT_MS', default: '`3600000`', meaning: 'longest inference request, end to end; `0` = none. Kept to the same precision' },
  { name: 'INFERMETER_DRAIN_TIMEOUT_MS', default: '`30000`', meaning: 'on SIGTERM/SIGINT, how long requests in flight may take to finish; the log says when the drain finished, or that it timed out and how many requests it cut' },
  { name: 'INFERMETER_DIALECTS', default: '`mindie`', meaning: dialectsHelp() },
  { name: 'INFERMETER_BUCKETS_<FAMILY>', default: 'the family\'s default', meaning: bucketFamiliesHelp() },
  { name: 'INFERMETER_AOM_PERIOD_SECONDS', default: '`30`', meaning: 'AOM collection period: the period gauges and the container metrics\' sampling, 1 to 3600' },
  { name: 'INFERMETER_AOM_SERVICE_ID', default: 'unset', meaning: 'AOM `service_id` label on every AOM series; unset: the label is not emitted' },
  { name: 'INFERMETER_AOM_GROUP_ID', default: 'unset', meaning: 'AOM `group_id` label, likewise' },
  { name: 'INFERMETER_AOM_PROJECT_ID', default: 'unset', meaning: 'AOM `project_id` label, likewise' },
  { name: 'INFERMETER_AOM_INSTANCE_NAME', default: 'unset', meaning: 'AOM `instance_name` label, likewise' },
  { name: 'INFERMETER_AOM_SERVICE_NAME', default: 'unset', meaning: 'AOM `service_name` label, likewise' },
  { name: 'INFERMETER_AOM_SOURCE', default: 'the host name (the pod name in Kubernetes)', meaning: 'AOM `source` label' },
  { name: 'INFERMETER_OTEL_PROVIDER_NAME', default: '`openai`', meaning: '`gen_ai.provider.name` of the `otel` dialect and the OTLP export (`openai`: the OpenAI-compatible API flavour, as the conventions ask of OpenAI-API clients, and `anthropic` on `/v1/messages`; set e.g. `vllm` to name the engine on every route)' },
  { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', default: 'unset (no export)', meaning: 'base URL of an OTLP/HTTP receiver (an OpenTelemetry Collector: `http://otel-collector:4318`); set, the `otel` measurements are pushed to it + `/v1/metrics`, whatever `INFERMETER_DIALECTS` says; an invalid URL stops the start' },
  { name: 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT', default: 'unset', meaning: 'the full metrics URL, used as it is; wins over `OTEL_EXPORTER_OTLP_ENDPOINT`' },
  { name: 'OTEL_EXPORTER_OTLP_PROTOCOL', default: '`http/protobuf`', meaning: '`http/protobuf` or `http/json` (`grpc` is not supported)' },
  { name: 'OTEL_EXPORTER_OTLP_METRICS_PROTOCOL', default: '`OTEL_EXPORTER_OTLP_PROTOCOL`', meaning: 'the same, for metrics only' },
  { name: 'OTEL_EXPORTER_OTLP_HEADERS', default: 'unset', meaning: 'headers sent with every export, `name=value` pairs separated by commas, values percent-encoded (`authorization=Bearer%20abc`); never logged' },
  { name: 'OTEL_EXPORTER_OTLP_METRICS_HEADERS', default: 'unset', meaning: 'the same, for metrics only; wins per header' },
  { name: 'OTEL_METRIC_EXPORT_INTERVAL', default: '`60000`', meaning: 'milliseconds between two exports' },
  { name: 'OTEL_METRIC_EXPORT_TIMEOUT', default: '`30000`', meaning: 'milliseconds one export may take (at most the interval); the last export on stop waits at most this, and never more than 10 s' },
  { name: 'OTEL_SERVICE_NAME', default: '`infermeter`', meaning: '`service.name` of the exported resource; wins over one in `OTEL_RESOURCE_ATTRIBUTES`' },
  { name: 'OTEL_RESOURCE_ATTRIBUTES', default: 'unset', meaning: 'more resource attributes, `key=value` pairs separated by commas, values percent-encoded (`deployment.environment.name=prod,k8s.pod.name=...`); `service.instance.id` defaults to the host name' },
  { name: 'OTEL_METRICS_EXPORTER', default: '`otlp`', meaning: '`none` turns the export off with the endpoint set (`otlp` or `none`)' },
  { name: 'OTEL_SDK_DISABLED', default: '`false`', meaning: '`true` turns the export off' },
];

/** The variables of the table, the <FAMILY> pattern left out. */
export const VARIABLE_NAMES: readonly string[] = CONFIGURATION_TABLE.map((v) => v.name).filter((n) => !n.includes('<'));

const KNOWN = new Set(VARIABLE_NAMES);
/** Names matched by a pattern of the table; the pattern's own check validates the rest of the name. */
const PATTERN_PREFIXES = CONFIGURATION_TABLE.filter((v) => v.name.includes('<')).map((v) => v.name.slice(0, v.name.indexOf('<')));

// Kubernetes gives every pod <SERVICE>_SERVICE_HOST, <SERVICE>_PORT_1025_TCP... for each Service
// of its namespace: a Service named infermeter (or infermeter-metrics) puts INFERMETER_* names in
// the environment that nobody typed. They are not mistakes, so they are let through.
const SERVICE_LINK = /^[A-Z0-9_]+_(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?|PORT_\d+_(?:TCP|UDP|SCTP)(?:_PROTO|_PORT|_ADDR)?)$/;

/** An INFERMETER_* variable infermeter does not read, with the closest known name. */
export interface UnknownVariable {
  readonly variable: string;
  readonly closest: string | undefined;
}

/** The INFERMETER_* variables of `env` that infermeter does not read (typing mistakes, mostly). */
export function unknownVariables(env: Readonly<Record<string, string | undefined>>): UnknownVariable[] {
  const unknown: UnknownVariable[] = [];
  for (const variable of Object.keys(env)) {
    if (!variable.startsWith('INFERMETER_') || KNOWN.has(variable) || SERVICE_LINK.test(variable)) continue;
    if (PATTERN_PREFIXES.some((prefix) => variable.startsWith(prefix))) continue;
    unknown.push({ variable, closest: closestVariable(variable) });
  }
  return unknown;
}

/** The known variable nearest to `name` by edit distance, when near enough to be the one meant. */
export function closestVariable(name: string): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const known of VARIABLE_NAMES) {
    const d = editDistance(name, known);
    if (d < bestDistance) {
      best = known;
      bestDistance = d;
    }
  }
  // Two edits, or a third of what follows INFERMETER_: beyond that the guess would mislead.
  const own = name.replace(/^INFERMETER_/, '').length;
  return bestDistance <= Math.max(2, Math.floor(own / 3)) ? best : undefined;
}

/** Edits (insert, delete, replace, swap two neighbours) from a to b: optimal string alignment. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [Array.from({ length: b.length + 1 }, (_, j) => j)];
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      let d = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      row[j] = d;
    }
    rows.push(row);
  }
  return rows[a.length]![b.length]!;
}
