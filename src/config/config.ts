// Configuration is read once, from the environment first and an optional MindIE-style
// config.json second, and validated as a whole: every problem is collected into one
// ConfigError so that an operator fixes them all in one go. Nothing else reads process.env.
import { closeSync, openSync } from 'node:fs';
import { isIP } from 'node:net';
import { availableParallelism, hostname } from 'node:os';
import { bucketVariable, parseBuckets, type BucketOverrides } from '../metrics/buckets.ts';
import type { AomOptions } from '../metrics/dialects/aom.ts';
import type { LogLevel } from '../log.ts';
import { DIALECTS, histogramFamilies, type DialectRow } from '../metrics/dialects/index.ts';
import { dirname } from 'node:path';
import { readMindieServerConfig, type MindieServerConfig } from './mindie-config.ts';
import { isAllAddresses, parseSecurity, readBuffer, type Security } from './security.ts';
import { parseOtel, type OtelConfig } from './otel-config.ts';
import { unknownVariables, VARIABLE_NAMES } from './variables.ts';
import { autoWorkers } from './auto-workers.ts';
import { readCpuQuota, type CpuQuota } from '../metrics/container/cgroup.ts';
import { parseTenant, type TenantConfig } from './tenant-config.ts';
import { parseSlo, type SloConfig } from './slo-config.ts';
import { UPSTREAM_CONNECTION_POLICIES, type UpstreamConnectionPolicy } from '../data-plane/upstream-connections.ts';

export type Env = Readonly<Record<string, string | undefined>>;

export interface Config {
  /** Base URL of the model server; undefined only when the caller allows it (tests, demo). */
  readonly upstream: URL | undefined;
  readonly host: string;
  /**
   * The data-plane and management addresses came from a default (INFERMETER_DEFAULT_HOST, the
   * image's 0.0.0.0, or 127.0.0.1), not from the operator: exempt from the every-address refusal.
   */
  readonly hostDefaulted: boolean;
  readonly managementHostDefaulted: boolean;
  readonly port: number;
  readonly managementHost: string;
  readonly managementPort: number;
  readonly metricsPort: number;
  /** MIES_SERVICE_MONITOR_MODE: /metrics is served only when this is true. */
  readonly metricsEnabled: boolean;
  /** Bytes of an inference request body scanned for `model` and `stream`. */
  readonly maxInspectBytes: number;
  /** Total bytes of request bodies held at once per process (INFERMETER_MAX_HELD_BODY_BYTES). */
  readonly maxHeldBodyBytes: number;
  /** Bytes of a non-streaming inference response kept to read its `usage`. */
  readonly maxResponseInspectBytes: number;
  /** Characters one SSE event may span before the stream tap gives up on the stream. */
  readonly maxEventBytes: number;
  /** Window of the avg_*_throughput_toks_per_s gauges, in seconds. */
  readonly throughputWindowSeconds: number;
  readonly logLevel: LogLevel;
  /** Metric dialects /metrics serves, in order: names of the dialect table (metrics/dialects/index.ts). */
  readonly dialects: readonly string[];
  /** Histogram buckets replaced through INFERMETER_BUCKETS_<FAMILY>. */
  readonly buckets: BucketOverrides;
  readonly aom: AomOptions;
  /** The engine's own /metrics, read on an interval; undefined when off. */
  readonly upstreamMetrics: URL | undefined;
  readonly upstreamMetricsIntervalSeconds: number;
  readonly upstreamMetricsTimeoutMs: number;
  /** MindIE's /metrics-json, for remainBlocks; undefined when unset. */
  readonly upstreamMetricsJson: URL | undefined;
  /** Re-serve the engine's exposition below infermeter's own on /metrics. */
  readonly relayUpstreamMetrics: boolean;
  readonly relayIntervalSeconds: number;
  /** Requests in the /metrics-json averages. */
  readonly jsonWindow: number;
  /** The `job` of /metrics-json entries. */
  readonly jsonJob: string;
  /** Add stream_options.include_usage to streaming chat/completions requests that lack it. */
  readonly injectUsage: boolean;
  /** Which upstream connection a request goes out on (data-plane/upstream-connections.ts). */
  readonly upstreamConnections: UpstreamConnectionPolicy;
  /** 'stdout', a file path, or undefined (off). */
  readonly accessLog: string | undefined;
  /** Data-plane processes: 1 runs everything in one process; more run a primary and workers. */
  readonly workers: number;
  /** With INFERMETER_WORKERS=auto: what the count was read from (the cgroup's CPU quota or the host's cores). */
  readonly workersFrom: string | undefined;
  /** TLS, the metrics token, label and concurrency bounds, timeouts, the drain. */
  readonly security: Security;
  /** The otel dialect's provider name and the OTLP export (on when an OTLP endpoint is set). */
  readonly otel: OtelConfig;
  /** Per-tenant metering: the tenant's source, its aliases, the cap. */
  readonly tenant: TenantConfig;
  /** Goodput: the SLO classes (INFERMETER_SLO, INFERMETER_SLO_FILE) and the client allowance; no classes: off. */
  readonly slo: SloConfig;
  /** What set each listen address and port, for messages (a bind that fails names it). */
  readonly sources: ListenSources;
}

/** The variable (or config.json key) each listen setting came from; undefined: its default. */
export interface ListenSources {
  readonly host: string | undefined;
  readonly port: string | undefined;
  readonly managementHost: string | undefined;
  readonly managementPort: string | undefined;
  readonly metricsPort: string | undefined;
}

export type { AomOptions };

/** The AOM service labels and the variables that set them. */
export const AOM_LABEL_VARIABLES = {
  service_id: 'INFERMETER_AOM_SERVICE_ID',
  group_id: 'INFERMETER_AOM_GROUP_ID',
  project_id: 'INFERMETER_AOM_PROJECT_ID',
  instance_name: 'INFERMETER_AOM_INSTANCE_NAME',
  service_name: 'INFERMETER_AOM_SERVICE_NAME',
  source: 'INFERMETER_AOM_SOURCE',
} as const;

export type { LogLevel };

export interface ConfigProblem {
  readonly variable: string;
  readonly expected: string;
  readonly got: string | undefined;
}

/** Thrown by loadConfig with every problem found, each naming its variable. */
export class ConfigError extends Error {
  readonly code = 'INFERMETER_CONFIG_INVALID';
  readonly problems: readonly ConfigProblem[];
  constructor(problems: readonly ConfigProblem[]) {
    const lines = problems.map(
      (p) => `  ${p.variable}: expected ${p.expected}${p.got === undefined ? '' : `, got ${JSON.stringify(p.got)}`}`,
    );
    super(`invalid configuration:\n${lines.join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export interface LoadOptions {
  /** Throw when INFERMETER_UPSTREAM is missing (npm start); tests and the demo pass false. */
  readonly requireUpstream?: boolean;
  /** Injected for tests; defaults to fs.readFileSync(path, 'utf8'). */
  readonly readFile?: (path: string) => string;
  /** The default of the AOM `source` label; defaults to os.hostname(). */
  readonly hostname?: string;
  /** Injected for tests; reads TLS files and token files. */
  readonly readBinary?: (path: string) => Buffer;
  /** Injected for tests: the cgroup's CPU quota (default: read from /sys/fs/cgroup) and the host's CPUs. */
  readonly cpuQuota?: () => CpuQuota | undefined;
  readonly hostCpus?: number;
  /** Open INFERMETER_ACCESS_LOG's file to check it can be appended to (default true; the healthcheck does not). */
  readonly probeAccessLog?: boolean;
  /** The dialects INFERMETER_DIALECTS may name (default: DIALECTS; a test adds its own). */
  readonly dialectTable?: readonly DialectRow[];
}

/**
 * Every variable infermeter reads: the names of the configuration table (variables.ts), which
 * the README, --help and the unknown-variable check share.
 */
export const VARIABLES: readonly string[] = VARIABLE_NAMES;

const hostCpuQuota = (): CpuQuota | undefined => readCpuQuota({ cgroupRoot: '/sys/fs/cgroup', procRoot: '/proc' });

const MiB = 1024 * 1024;
/** INFERMETER_MAX_HELD_BODY_BYTES by default: this many bodies of the inspection cap held at once. */
const HELD_BODIES_PER_CAP = 16;

export function loadConfig(env: Env, options: LoadOptions = {}): Config {
  const problems: ConfigProblem[] = [];
  const problem = (variable: string, expected: string, got: string | undefined): void => {
    problems.push({ variable, expected, got });
  };

  let file: MindieServerConfig = {};
  const configPath = nonEmpty(env.INFERMETER_CONFIG);
  if (configPath !== undefined) {
    const read = readMindieServerConfig(configPath, options.readFile);
    if (read.ok) file = read.value;
    else problem('INFERMETER_CONFIG', read.expected, configPath);
  }

  // A mistyped name would otherwise be ignored in silence, its setting left at the default.
  for (const { variable, closest } of unknownVariables(env)) {
    problem(variable, `a variable infermeter reads${closest === undefined ? '' : `: did you mean ${closest}?`} (infermeter --help lists them all)`, undefined);
  }

  const upstream = parseUpstream(env.INFERMETER_UPSTREAM, options.requireUpstream ?? false, problem);

  // The operator's address, in MindIE's order; INFERMETER_DEFAULT_HOST only stands in for the
  // built-in 127.0.0.1 (the image sets it to 0.0.0.0), so it never overrides MindIE's settings.
  const hostSource = firstDefined(
    ['INFERMETER_HOST', env.INFERMETER_HOST],
    ['MIES_CONTAINER_IP', env.MIES_CONTAINER_IP],
    ['INFERMETER_CONFIG ServerConfig.ipAddress', file.ipAddress],
  );
  const host = parseHost(hostSource ?? firstDefined(['INFERMETER_DEFAULT_HOST', env.INFERMETER_DEFAULT_HOST]), '127.0.0.1', problem);
  const managementHostSource = firstDefined(
    ['INFERMETER_MANAGEMENT_HOST', env.INFERMETER_MANAGEMENT_HOST],
    ['MIES_CONTAINER_MANAGEMENT_IP', env.MIES_CONTAINER_MANAGEMENT_IP],
    ['INFERMETER_CONFIG ServerConfig.managementIpAddress', file.managementIpAddress],
  );
  const managementHost = parseHost(managementHostSource, host, problem);
  const portSource = firstDefined(['INFERMETER_PORT', env.INFERMETER_PORT], ['INFERMETER_CONFIG ServerConfig.port', file.port]);
  const port = parsePort(portSource, 1025, problem);
  const managementPortSource = firstDefined(
    ['INFERMETER_MANAGEMENT_PORT', env.INFERMETER_MANAGEMENT_PORT],
    ['INFERMETER_CONFIG ServerConfig.managementPort', file.managementPort],
  );
  const managementPort = parsePort(managementPortSource, 1026, problem);
  const metricsPortSource = firstDefined(
    ['INFERMETER_METRICS_PORT', env.INFERMETER_METRICS_PORT],
    ['INFERMETER_CONFIG ServerConfig.metricsPort', file.metricsPort],
  );
  const metricsPort = parsePort(metricsPortSource, 1027, problem);
  const sources: ListenSources = Object.freeze({
    host: hostSource?.[0],
    port: portSource?.[0],
    managementHost: managementHostSource?.[0],
    managementPort: managementPortSource?.[0],
    metricsPort: metricsPortSource?.[0],
  });

  // A fixed port shared by the data plane and a management listener on the same address
  // would fail at bind time with EADDRINUSE; say so now, naming the variables.
  if (host === managementHost && port !== 0) {
    if (port === managementPort) problem('INFERMETER_PORT', 'a port different from INFERMETER_MANAGEMENT_PORT', String(port));
    if (port === metricsPort) problem('INFERMETER_PORT', 'a port different from INFERMETER_METRICS_PORT', String(port));
  }

  const monitorMode = env.MIES_SERVICE_MONITOR_MODE;
  const metricsEnabled = monitorMode === undefined || monitorMode === '1';

  const maxInspectBytes = parseInteger(env, 'INFERMETER_MAX_INSPECT_BYTES', 4 * MiB, 0, 1024 * MiB, problem);
  const maxHeldBodyBytes = parseInteger(env, 'INFERMETER_MAX_HELD_BODY_BYTES', HELD_BODIES_PER_CAP * maxInspectBytes, 0, 64 * 1024 * MiB, problem);
  const maxResponseInspectBytes = parseInteger(
    env,
    'INFERMETER_MAX_RESPONSE_INSPECT_BYTES',
    4 * MiB,
    0,
    1024 * MiB,
    problem,
  );
  const maxEventBytes = parseInteger(env, 'INFERMETER_MAX_EVENT_BYTES', 1 * MiB, 1024, 256 * MiB, problem);
  const throughputWindowSeconds = parseInteger(env, 'INFERMETER_THROUGHPUT_WINDOW_SECONDS', 10, 1, 3600, problem);
  const logLevel = parseLogLevel(env.INFERMETER_LOG_LEVEL, problem);
  const dialectTable = options.dialectTable ?? DIALECTS;
  const dialects = parseDialects(env.INFERMETER_DIALECTS, problem, dialectTable);
  const buckets = parseBucketOverrides(env, problem, histogramFamilies(dialectTable));
  const aom: AomOptions = {
    periodSeconds: parseInteger(env, 'INFERMETER_AOM_PERIOD_SECONDS', 30, 1, 3600, problem),
    labels: parseAomLabels(env, options.hostname ?? hostname(), problem),
  };

  const upstreamMetrics = parseMetricsUrl('INFERMETER_UPSTREAM_METRICS', env.INFERMETER_UPSTREAM_METRICS, upstream === undefined ? undefined : new URL('/metrics', upstream.origin), problem);
  const upstreamMetricsJson = parseMetricsUrl('INFERMETER_UPSTREAM_METRICS_JSON', env.INFERMETER_UPSTREAM_METRICS_JSON, undefined, problem);
  const upstreamMetricsIntervalSeconds = parseInteger(env, 'INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS', 5, 1, 3600, problem);
  const upstreamMetricsTimeoutMs = parseInteger(env, 'INFERMETER_UPSTREAM_METRICS_TIMEOUT_MS', 2000, 100, 60_000, problem);
  const relayUpstreamMetrics = parseSwitch(env, 'INFERMETER_RELAY_UPSTREAM_METRICS', false, problem);
  const relayIntervalSeconds = parseInteger(env, 'INFERMETER_RELAY_INTERVAL_SECONDS', 30, 1, 3600, problem);
  if (relayUpstreamMetrics && upstreamMetrics === undefined && env.INFERMETER_UPSTREAM_METRICS?.trim().toLowerCase() === 'off') {
    problem('INFERMETER_RELAY_UPSTREAM_METRICS', 'INFERMETER_UPSTREAM_METRICS not to be off (the relay re-serves what it reads)', env.INFERMETER_RELAY_UPSTREAM_METRICS);
  }
  const jsonWindow = parseInteger(env, 'INFERMETER_JSON_WINDOW', 1000, 1, 1_000_000, problem);
  const jsonJob = nonEmpty(env.INFERMETER_JSON_JOB) ?? 'node';
  if (!LABEL_VALUE.test(jsonJob)) problem('INFERMETER_JSON_JOB', 'a name of 1 to 256 printable characters', env.INFERMETER_JSON_JOB);

  const injectUsage = parseSwitch(env, 'INFERMETER_INJECT_USAGE', true, problem);
  const upstreamConnections = parseUpstreamConnections(env.INFERMETER_UPSTREAM_CONNECTIONS, problem);
  const accessLogValue = nonEmpty(env.INFERMETER_ACCESS_LOG);
  const accessLog = accessLogValue === undefined || accessLogValue.toLowerCase() === 'off' ? undefined : accessLogValue === 'stdout' ? 'stdout' : accessLogValue;
  // Opened (and created) once here: a path that cannot be appended to stops the start, instead
  // of a proxy that drops every line with only a counter to say so.
  if (accessLog !== undefined && accessLog !== 'stdout' && options.probeAccessLog !== false) {
    try {
      closeSync(openSync(accessLog, 'a'));
    } catch (error) {
      const e = error as NodeJS.ErrnoException;
      problem('INFERMETER_ACCESS_LOG', `stdout, off, or a file infermeter can append to (opening it failed: ${e.message})`, accessLogValue);
    }
  }

  const security = parseSecurity({
    env,
    file,
    fileDir: configPath === undefined ? undefined : dirname(configPath),
    readFile: options.readBinary ?? readBuffer,
    problem,
  });
  // Listening on every address defeats the separation of the planes: MindIE refuses it unless
  // told otherwise, and so does infermeter. INFERMETER_DEFAULT_HOST is exempt: it is a
  // packaging's default (the image's 0.0.0.0), not an address the operator asked for.
  if (!security.allowAllZeroIp) {
    const zero = isAllAddresses;
    const needs = 'a specific address: listening on all addresses needs INFERMETER_ALLOW_ALL_ZERO_IP=1 (or allowAllZeroIpListening)';
    // Name what the operator set: an unset management host follows the data-plane host. A
    // defaulted host (INFERMETER_DEFAULT_HOST, the image's) is exempt.
    const follows = managementHostSource === undefined;
    if (hostSource !== undefined && zero(host)) problem(sources.host ?? 'INFERMETER_HOST', follows ? `${needs}; the management and metrics ports follow it, INFERMETER_MANAGEMENT_HOST being unset` : needs, host);
    if (!follows && zero(managementHost)) problem(sources.managementHost ?? 'INFERMETER_MANAGEMENT_HOST', needs, managementHost);
  }
  const workersRaw = nonEmpty(env.INFERMETER_WORKERS)?.toLowerCase();
  const auto = workersRaw === 'auto' ? autoWorkers(options.hostCpus ?? availableParallelism(), (options.cpuQuota ?? hostCpuQuota)(), 256) : undefined;
  const workers = auto?.workers ?? parseInteger(env, 'INFERMETER_WORKERS', 1, 1, 256, problem, 'an integer from 1 to 256, or auto (one per CPU the cgroup\'s quota allows)');
  const otel = parseOtel(env, options.hostname ?? hostname(), problem);
  const tenant = parseTenant(env, problem, options.readFile);
  const slo = parseSlo(env, problem, options.readFile);

  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({
    upstream,
    host,
    hostDefaulted: hostSource === undefined,
    managementHostDefaulted: (managementHostSource ?? hostSource) === undefined,
    port,
    managementHost,
    managementPort,
    metricsPort,
    metricsEnabled,
    maxInspectBytes,
    maxHeldBodyBytes,
    maxResponseInspectBytes,
    maxEventBytes,
    throughputWindowSeconds,
    logLevel,
    dialects,
    buckets,
    aom,
    upstreamMetrics,
    upstreamMetricsIntervalSeconds,
    upstreamMetricsTimeoutMs,
    upstreamMetricsJson,
    relayUpstreamMetrics,
    relayIntervalSeconds,
    jsonWindow,
    jsonJob,
    injectUsage,
    upstreamConnections,
    accessLog,
    workers,
    workersFrom: auto?.from,
    security,
    otel,
    sources,
    tenant,
    slo,
  });
}

type Problem = (variable: string, expected: string, got: string | undefined) => void;
type Source = readonly [variable: string, value: string | number | undefined];

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function firstDefined(...sources: Source[]): Source | undefined {
  for (const source of sources) {
    const value = source[1];
    if (value === undefined) continue;
    if (typeof value === 'string' && value.trim() === '') continue;
    return source;
  }
  return undefined;
}

function parseUpstream(raw: string | undefined, required: boolean, problem: Problem): URL | undefined {
  const value = nonEmpty(raw);
  const expected = 'an http:// or https:// URL of the model server, e.g. http://127.0.0.1:8000';
  if (value === undefined) {
    if (required) problem('INFERMETER_UPSTREAM', expected, raw);
    return undefined;
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problem('INFERMETER_UPSTREAM', expected, raw);
    return undefined;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    problem('INFERMETER_UPSTREAM', expected, raw);
    return undefined;
  }
  if (url.username !== '' || url.password !== '' || url.hash !== '' || url.search !== '') {
    problem('INFERMETER_UPSTREAM', `${expected} without credentials, query or fragment`, redactUrl(url));
    return undefined;
  }
  // The base URL OpenAI clients are given ends in /v1; the model server's does not: clients'
  // paths already start with /v1, and every request would go to /v1/v1/... and get a 404.
  if (/\/v1\/?$/.test(url.pathname)) {
    const fixed = new URL(url.href);
    fixed.pathname = url.pathname.replace(/\/v1\/?$/, '');
    problem('INFERMETER_UPSTREAM', `the model server's URL without the trailing /v1 (clients' paths start with /v1 already; with it, requests would go to /v1/v1/...): set ${fixed.href.replace(/\/$/, '')}`, raw);
    return undefined;
  }
  return url;
}

function redactUrl(url: URL): string {
  const copy = new URL(url.href);
  if (copy.password !== '') copy.password = '***';
  return copy.href;
}

const HOSTNAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

function parseHost(source: Source | undefined, fallback: string, problem: Problem): string {
  if (source === undefined) return fallback;
  const [name, value] = source;
  const text = String(value).trim();
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  if (isIP(bare) !== 0 || HOSTNAME.test(bare)) return bare;
  problem(name, 'an IPv4 or IPv6 address or a host name', text);
  return fallback;
}

function parsePort(source: Source | undefined, fallback: number, problem: Problem): number {
  if (source === undefined) return fallback;
  const [name, value] = source;
  const text = String(value).trim();
  if (/^\d{1,5}$/.test(text)) {
    const port = Number(text);
    if (port <= 65535) return port;
  }
  // Kubernetes sets <SERVICE>_PORT=tcp://ip:port for every Service of the namespace: a Service
  // named infermeter (or infermeter-metrics, ...) lands here. Say so rather than only refuse.
  const serviceLink = /^tcp:\/\//.test(text) ? '; this looks like a Kubernetes service link from a Service named after the variable: set enableServiceLinks: false on the pod or rename the Service' : '';
  problem(name, `an integer port from 0 to 65535 (0 picks a free port)${serviceLink}`, text);
  return fallback;
}

function parseInteger(
  env: Env,
  variable: string,
  fallback: number,
  min: number,
  max: number,
  problem: Problem,
  expected = `an integer from ${min} to ${max}`,
): number {
  const raw = env[variable];
  const value = nonEmpty(raw);
  if (value === undefined) return fallback;
  if (/^\d+$/.test(value)) {
    const n = Number(value);
    if (Number.isSafeInteger(n) && n >= min && n <= max) return n;
  }
  problem(variable, expected, raw);
  return fallback;
}

const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

function parseUpstreamConnections(raw: string | undefined, problem: Problem): UpstreamConnectionPolicy {
  const value = nonEmpty(raw)?.toLowerCase();
  if (value === undefined) return 'mirror';
  if ((UPSTREAM_CONNECTION_POLICIES as readonly string[]).includes(value)) return value as UpstreamConnectionPolicy;
  problem('INFERMETER_UPSTREAM_CONNECTIONS', UPSTREAM_CONNECTION_POLICIES.join(', '), raw);
  return 'mirror';
}

function parseLogLevel(raw: string | undefined, problem: Problem): LogLevel {
  const value = nonEmpty(raw)?.toLowerCase();
  if (value === undefined) return 'info';
  if ((LOG_LEVELS as readonly string[]).includes(value)) return value as LogLevel;
  problem('INFERMETER_LOG_LEVEL', `one of ${LOG_LEVELS.join(', ')}`, raw);
  return 'info';
}

function parseDialects(raw: string | undefined, problem: Problem, table: readonly DialectRow[]): string[] {
  const value = nonEmpty(raw);
  if (value === undefined) return ['mindie'];
  const names = value.split(',').map((n) => n.trim().toLowerCase());
  const known = table.map((row) => row.name);
  const expected = `a comma-separated list of ${known.join(', ')}, each at most once`;
  const valid = names.every((n) => known.includes(n)) && new Set(names).size === names.length;
  if (!valid) {
    problem('INFERMETER_DIALECTS', expected, raw);
    return ['mindie'];
  }
  return names;
}

function parseBucketOverrides(env: Env, problem: Problem, families: readonly string[]): BucketOverrides {
  const overrides: Record<string, readonly number[]> = {};
  const known = new Map(families.map((f) => [bucketVariable(f), f]));
  for (const [variable, raw] of Object.entries(env)) {
    if (!variable.startsWith('INFERMETER_BUCKETS_') || raw === undefined) continue;
    const family = known.get(variable);
    if (family === undefined) {
      problem(variable, `the name of a histogram family: one of ${[...known.keys()].join(', ')}`, raw);
      continue;
    }
    const buckets = parseBuckets(raw);
    if (buckets === undefined) problem(variable, 'strictly increasing positive numbers separated by commas, e.g. 0.1,0.5,1,2', raw);
    else overrides[family] = buckets;
  }
  return Object.freeze(overrides);
}

// Label values end up in every AOM series: keep them printable and of reasonable size.
const LABEL_VALUE = /^[^\u0000-\u001f\u007f]{1,256}$/;

function parseAomLabels(env: Env, host: string, problem: Problem): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const [label, variable] of Object.entries(AOM_LABEL_VARIABLES)) {
    const raw = env[variable];
    const value = nonEmpty(raw) ?? (label === 'source' ? host : undefined);
    if (value === undefined) continue;
    if (LABEL_VALUE.test(value)) labels[label] = value;
    else problem(variable, 'a label value of 1 to 256 printable characters', raw);
  }
  return Object.freeze(labels);
}

function parseMetricsUrl(variable: string, raw: string | undefined, fallback: URL | undefined, problem: Problem): URL | undefined {
  const value = nonEmpty(raw);
  if (value === undefined) return fallback;
  if (value.toLowerCase() === 'off') return undefined;
  try {
    const url = new URL(value);
    if (url.protocol === 'http:' || url.protocol === 'https:') return url;
  } catch {
    // reported below
  }
  problem(variable, 'an http:// or https:// URL, or off', raw);
  return undefined;
}

function parseSwitch(env: Env, variable: string, fallback: boolean, problem: Problem): boolean {
  const value = nonEmpty(env[variable])?.toLowerCase();
  if (value === undefined) return fallback;
  if (value === '1' || value === 'true' || value === 'on') return true;
  if (value === '0' || value === 'false' || value === 'off') return false;
  problem(variable, '1 or 0 (also true/false, on/off)', env[variable]);
  return fallback;
}
