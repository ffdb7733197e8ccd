// The variables table, first part: the listeners, the upstream, the caps on what is inspected
// and held, the engine's own metrics, /metrics-json, usage injection, the access log and the
// workers. variables.ts joins the parts into the one table, in the documented table's order.
import { byteSize, integer, LABEL_VALUE, onOff, oneOf, orAuto, port, text } from '../parse/parse.ts';
import { documented, variable } from './variable-table.ts';
import type { LogLevel } from '../../log.ts';

const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];
export const MAX_WORKERS = 256;

const MiB = 1024 * 1024;
/** INFERMETER_MAX_HELD_BODY_BYTES by default: this many bodies of the inspection cap held at once. */
const HELD_BODIES_PER_CAP = 16;
/** INFERMETER_MAX_HELD_BODY_BYTES_PER_CLIENT by default: this part of the budget. */
const CLIENT_PARTS = 4;

export const PROXY_VARIABLES = [
  documented(
    'INFERMETER_UPSTREAM',
    '(required to start the proxy)',
    'base URL of the model server, `http://` or `https://`, optionally with a path prefix; no credentials,',
    "query or fragment, and no trailing `/v1` (clients' paths carry it)",
  ),
  documented('INFERMETER_HOST', '`MIES_CONTAINER_IP`, else config `ipAddress`, else `INFERMETER_DEFAULT_HOST`, else `127.0.0.1`', 'data-plane bind address'),
  documented(
    'INFERMETER_DEFAULT_HOST',
    '`127.0.0.1`; the container image sets `0.0.0.0`',
    'the data-plane address (and so the management one) when none of `INFERMETER_HOST`, `MIES_CONTAINER_IP`',
    "and config `ipAddress` sets it: a packaging's default, never above MindIE's settings. `0.0.0.0` or `::`",
    'here needs no `INFERMETER_ALLOW_ALL_ZERO_IP`; through the others it does',
  ),
  variable({
    name: 'INFERMETER_PORT',
    group: 'listen',
    key: 'port',
    parse: port(),
    value: 1025,
    file: 'port',
    meaning: 'data-plane port, {range}; `0` picks a free port (logged at start)',
  }),
  documented(
    'INFERMETER_MANAGEMENT_HOST',
    '`MIES_CONTAINER_MANAGEMENT_IP`, else config `managementIpAddress`, else the data-plane host',
    'bind address of the management and metrics ports',
  ),
  variable({
    name: 'INFERMETER_MANAGEMENT_PORT',
    group: 'listen',
    key: 'managementPort',
    parse: port(),
    value: 1026,
    file: 'managementPort',
    meaning: ['management port, {range}: `GET /` (an index of what is served where), `GET /health`, `GET /ready`,', '`GET /metrics-json`, `GET /dashboard`'],
  }),
  variable({
    name: 'INFERMETER_METRICS_PORT',
    group: 'listen',
    key: 'metricsPort',
    parse: port(),
    value: 1027,
    file: 'metricsPort',
    meaning: 'port of `GET /metrics`, {range}; may equal the management port (one listener then serves both)',
  }),
  documented(
    'INFERMETER_CONFIG',
    'none',
    "path of a JSON file in MindIE's `config.json` layout; its `ServerConfig` keys `ipAddress`,",
    '`managementIpAddress`, `port`, `managementPort`, `metricsPort` are read',
  ),
  documented(
    'MIES_SERVICE_MONITOR_MODE',
    'unset',
    "MindIE's switch: `1` enables `/metrics`, any other value disables it (the metrics port is then not",
    'opened; a shared port answers 404); unset: enabled',
  ),
  documented('MIES_CONTAINER_IP', 'unset', "MindIE's data-plane address, used when `INFERMETER_HOST` is unset"),
  documented('MIES_CONTAINER_MANAGEMENT_IP', 'unset', "MindIE's management address, used when `INFERMETER_MANAGEMENT_HOST` is unset"),
  variable({
    name: 'INFERMETER_MAX_INSPECT_BYTES',
    key: 'maxInspectBytes',
    parse: byteSize(0, 1024 * MiB),
    value: 4 * MiB,
    meaning: [
      'bytes of a chat or completions body held whole before it is forwarded (to insert `stream_options` and keep',
      "the client's own body for a re-send), {range}; a larger body streams through, `stream_options` appended",
      'at its end once the upstream is known to take it. Every inference body is read whole for `model`, `stream`',
      'and the generation parameters (`max_tokens`, `n`) whatever its size, in constant memory',
    ],
  }),
  variable({
    name: 'INFERMETER_MAX_HELD_BODY_BYTES',
    key: 'maxHeldBodyBytes',
    parse: byteSize(0, 64 * 1024 * MiB),
    value: (earlier) => HELD_BODIES_PER_CAP * (earlier.maxInspectBytes as number),
    shown: '16 × `INFERMETER_MAX_INSPECT_BYTES` (64 MiB)',
    meaning: [
      'total bytes of request bodies held in memory at once per process (a chat or completions body held for',
      "usage injection, a body's copy kept for a re-send, a chunked `DELETE` or `OPTIONS` held to give it a",
      'length), {range}; a body is held until its answer begins. Past it a chat or completions body streams',
      'through with `stream_options` appended at its end once the upstream is known to take it (before that',
      'it waits up to 10 s for room, then 503 with `Retry-After`), any other goes as it comes without its',
      're-send copy, a chunked `DELETE`/`OPTIONS` gets 503 with `Retry-After`; counted in',
      '`infermeter_request_bodies_unheld_total`',
    ],
  }),
  variable({
    name: 'INFERMETER_MAX_HELD_BODY_BYTES_PER_CLIENT',
    key: 'maxHeldBodyBytesPerClient',
    parse: byteSize(0, 64 * 1024 * MiB),
    value: (earlier) => Math.floor((earlier.maxHeldBodyBytes as number) / CLIENT_PARTS),
    shown: 'a quarter of `INFERMETER_MAX_HELD_BODY_BYTES` (16 MiB)',
    meaning: [
      "the part of `INFERMETER_MAX_HELD_BODY_BYTES` one client address (the connection's peer address, never a",
      "header) may hold, {range}, so that one client's stalled bodies cannot take the whole budget; past it its",
      'bodies are treated as past the budget. Behind a gateway every client has its address: raise it there',
    ],
  }),
  variable({
    name: 'INFERMETER_MAX_RESPONSE_INSPECT_BYTES',
    key: 'maxResponseInspectBytes',
    parse: byteSize(0, 1024 * MiB),
    value: 4 * MiB,
    meaning: ['bytes of a non-streamed inference response kept to read its `usage` (after decompression for gzip,', 'deflate, br, zstd), {range}'],
  }),
  variable({
    name: 'INFERMETER_MAX_HELD_ANSWER_BYTES',
    key: 'maxHeldAnswerBytes',
    parse: byteSize(0, 64 * 1024 * MiB),
    value: (earlier) => HELD_BODIES_PER_CAP * (earlier.maxResponseInspectBytes as number),
    shown: '16 × `INFERMETER_MAX_RESPONSE_INSPECT_BYTES` (64 MiB)',
    meaning: [
      'total bytes of answers kept in memory at once per process to be read (a non-streamed answer kept whole',
      'for its `usage`, a 4xx to an injected request read for a refusal), {range}; an answer that finds it spent',
      'is relayed unchanged and not read (its usage, or the refusal, lost to measurement), counted in',
      '`infermeter_stream_tap_problems_total{kind="body_unheld"}`',
    ],
  }),
  variable({
    name: 'INFERMETER_MAX_EVENT_BYTES',
    key: 'maxEventBytes',
    parse: byteSize(1024, 256 * MiB),
    value: MiB,
    meaning: ['characters one server-sent event may buffer in the stream tap; past it the rest of that stream is', 'forwarded unmeasured and counted; {range}'],
  }),
  variable({
    name: 'INFERMETER_THROUGHPUT_WINDOW_SECONDS',
    key: 'throughputWindowSeconds',
    parse: integer(1, 3600),
    value: 10,
    meaning: 'window of `avg_prompt_throughput_toks_per_s` and `avg_generation_throughput_toks_per_s`, {range}',
  }),
  variable({
    name: 'INFERMETER_LOG_LEVEL',
    key: 'logLevel',
    parse: oneOf(LOG_LEVELS, `one of ${LOG_LEVELS.join(', ')}`),
    value: 'info',
    meaning: '`debug`, `info`, `warn` or `error`; logs are JSON lines on stderr',
  }),
  documented(
    'INFERMETER_UPSTREAM_METRICS',
    "the upstream's origin + `/metrics`",
    "URL of the engine's own Prometheus `/metrics` (vLLM, SGLang, TGI, llama.cpp, MindIE), read on an",
    'interval for the engine-only MindIE families and `/metrics-json`; `off` disables',
  ),
  variable({
    name: 'INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS',
    key: 'upstreamMetricsIntervalSeconds',
    parse: integer(1, 3600),
    value: 5,
    meaning: "how often the engine's metrics are read, {range}",
  }),
  variable({
    name: 'INFERMETER_UPSTREAM_METRICS_TIMEOUT_MS',
    key: 'upstreamMetricsTimeoutMs',
    parse: integer(100, 60_000),
    value: 2000,
    meaning: "timeout of one read of the engine's metrics, {range}",
  }),
  variable({
    name: 'INFERMETER_READY_FOLLOWS_UPSTREAM',
    key: 'readyFollowsUpstream',
    parse: onOff(),
    value: true,
    shown: '`on`',
    meaning: [
      '`on`: `/ready` answers 503 while the model server cannot be reached (a connection refused or not made in',
      "2 s: the data plane's requests, the engine scraper's reads of the same address, or, when `/ready` is asked",
      'and neither said anything for 2 s, a TCP connect before it answers), and 200 again at its first connection',
      'that works; `off`: `/ready`',
      'follows only the start and the drain',
    ],
  }),
  documented(
    'INFERMETER_UPSTREAM_METRICS_JSON',
    'unset',
    "URL of MindIE's own `/metrics-json` (its management port), for `remainBlocks` and its request counts",
  ),
  variable({
    name: 'INFERMETER_RELAY_UPSTREAM_METRICS',
    key: 'relayUpstreamMetrics',
    parse: onOff(),
    value: false,
    meaning: [
      "`1`: re-serve the engine's whole exposition below infermeter's own on `/metrics` (validated, at most 240",
      "KB, families whose names clash with infermeter's dropped)",
    ],
  }),
  variable({
    name: 'INFERMETER_RELAY_INTERVAL_SECONDS',
    key: 'relayIntervalSeconds',
    parse: integer(1, 3600),
    value: 30,
    meaning: 'how often the relayed exposition is refreshed, {range}',
  }),
  variable({
    name: 'INFERMETER_JSON_WINDOW',
    key: 'jsonWindow',
    parse: integer(1, 1_000_000),
    value: 1000,
    meaning: '`/metrics-json` averages TTFT and TBT over this many most recent requests, {range}',
  }),
  variable({
    name: 'INFERMETER_JSON_JOB',
    key: 'jsonJob',
    parse: text(LABEL_VALUE, 'a name of 1 to 256 printable characters'),
    value: 'node',
    meaning: 'the `job` of every `/metrics-json` entry',
  }),
  variable({
    name: 'INFERMETER_INJECT_USAGE',
    key: 'injectUsage',
    parse: onOff(),
    value: true,
    shown: '`on`',
    meaning: [
      '`on`: a streaming chat or completions request without `stream_options.include_usage` gets it added on',
      'its way upstream (the rest of the body unchanged), and the usage-only chunk this produces is removed',
      'from what the client receives, so token counts are real for clients that never ask for usage; `off`',
      'leaves every body untouched. Stops by itself if the upstream refuses the field',
    ],
  }),
  variable({
    name: 'INFERMETER_CONTINUOUS_USAGE',
    key: 'continuousUsage',
    parse: onOff(),
    value: false,
    shown: '`off`',
    meaning: [
      '`on` (with `INFERMETER_INJECT_USAGE`): the injected `stream_options` also asks for',
      '`continuous_usage_stats` (vLLM: usage on every chunk), and the `"usage"` member is removed from each',
      "chunk the client receives, so a cancelled stream's prompt and delivered tokens are the engine's own",
      '(billing basis `engine`, [chargeback](chargeback.md)); an upstream that refuses the field turns injection off',
    ],
  }),
  documented(
    'INFERMETER_ACCESS_LOG',
    '`off`',
    '`stdout` or a file path: one JSON line per finished inference request (time, request id, path, status,',
    'model, tenant with `INFERMETER_TENANT`, outcome, TTFB/TTFT/TPOT/e2e, tokens, bytes); never headers (but',
    "the tenant's, in header mode) or prompt/completion text; a path that cannot be appended to stops the",
    'start',
  ),
  variable({
    name: 'INFERMETER_WORKERS',
    key: 'workers',
    parse: orAuto(integer(1, MAX_WORKERS, `an integer from 1 to ${MAX_WORKERS}, or auto (one per CPU the cgroup's quota allows)`)),
    value: 1,
    meaning: [
      'data-plane processes sharing the data port (node:cluster), {range}, or `auto` for one per CPU the',
      "process may use: the cgroup's CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`, the",
      "tightest level) rounded up, at least 1, at most the host's cores, else the host's cores; the start line",
      'says which (`workers`, `workers_from`). With more than 1, a primary process holds the metrics and serves',
      'the management and metrics ports, the workers send it their measurements, and `/metrics` and',
      "`/metrics-json` report all workers' traffic exactly; a worker that dies is restarted (counted in",
      '`infermeter_worker_restarts_total`, its in-flight requests counted as failed)',
    ],
  }),
] as const;
