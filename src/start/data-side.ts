// The data side of a process: the data plane and what it writes beside its traffic (the access
// log, the usage records), reporting to a sink, proxy events and a ledger. One process reports to
// its own measurement; a worker of INFERMETER_WORKERS > 1 to the bus (cluster/worker-main.ts).
import { openAccessLog } from '../access-log.ts';
import type { Prices } from '../chargeback/start.ts';
import type { Config } from '../config/config.ts';
import { createDataPlane, type DataPlane } from '../data-plane/data-plane.ts';
import type { LifecycleViolation } from '../data-plane/lifecycle.ts';
import { createInjectionSwitch } from '../data-plane/usage-injection.ts';
import { createUsageWriter, type Ledger } from '../ledger/ledger.ts';
import type { Logger } from '../log.ts';
import { listen, urlOf, type ListenPolicy } from '../management/listen.ts';
import type { Clock } from '../measure/clock.ts';
import type { MeasurementSink } from '../measure/request-timer.ts';
import { DIALECTS, dialectRows, passThroughReport, type DialectRow } from '../metrics/dialects/index.ts';
import type { InferenceApiRow } from '../measure/inference-apis.ts';
import type { ProxyEvents } from '../metrics/own/proxy-families.ts';
import type { TenantAliases } from '../tenants/tenant-aliases.ts';
import { createTenantOf } from '../tenants/tenant-of.ts';
import { requireUpstream } from './measurement.ts';

/** Where a data side reports, and the live tables it reads. */
export interface DataSideParts {
  readonly sink: MeasurementSink;
  readonly events: ProxyEvents;
  /** Where the usage records' lines go (INFERMETER_USAGE_DIR); undefined: off. */
  readonly ledger: Pick<Ledger, 'append'> | undefined;
  /** The tenant aliases a request's tenant is read through (INFERMETER_TENANT). */
  readonly aliases: TenantAliases | undefined;
  /** The prices the usage records' cost is read from. */
  readonly prices: Prices | undefined;
  readonly lifecycleViolation?: ((error: LifecycleViolation) => void) | undefined;
  /** The stale race's window (upstream-attempt.ts; tests only). */
  readonly staleRaceMs?: number | undefined;
  readonly dialectTable?: readonly DialectRow[] | undefined;
  readonly apiTable?: readonly InferenceApiRow[] | undefined;
}

export interface DataSide {
  readonly plane: DataPlane;
  /** Base URL clients use instead of the model server's. */
  readonly url: string;
  /** Opens INFERMETER_ACCESS_LOG's file again at its path (SIGHUP, after a rotation moved it). */
  reopenAccessLog(): void;
  /** Lets requests in flight finish, up to `timeoutMs`, and logs how it ended. */
  drain(timeoutMs: number): Promise<void>;
  /** Closes the listener and its connections, then the access log. */
  close(): Promise<void>;
}

/** How the data port's host may be bound (INFERMETER_ALLOW_ALL_ZERO_IP). */
// A default address (the image's INFERMETER_DEFAULT_HOST) may be every address: see Config.
const dataPolicy = (config: Config): ListenPolicy => ({ allowAll: config.security.allowAllZeroIp || config.hostDefaulted, variable: 'INFERMETER_HOST' });

/** The data plane of one process, listening on the data port; closed again when it cannot listen. */
export async function startDataSide(config: Config, log: Logger, clock: Clock, parts: DataSideParts): Promise<DataSide> {
  const { events } = parts;
  const accessLog = config.accessLog === undefined ? undefined : openAccessLog(config.accessLog, log, events.accessLogDropped);
  const usage =
    config.usage === undefined || parts.ledger === undefined
      ? undefined
      : createUsageWriter(config.usage.source, parts.ledger.append, Date.now, parts.prices?.recordPrice);
  // Made when off too: it reports the switch's state (off) from the start.
  const injection = usageInjection(config, log, events);
  const plane = createDataPlane({
    upstream: requireUpstream(config),
    clock,
    sink: parts.sink,
    log,
    maxInspectBytes: config.maxInspectBytes,
    maxHeldBodyBytes: config.maxHeldBodyBytes,
    maxHeldBodyBytesPerClient: config.maxHeldBodyBytesPerClient,
    bodyUnheld: events.bodyUnheld,
    maxResponseInspectBytes: config.maxResponseInspectBytes,
    maxHeldAnswerBytes: config.maxHeldAnswerBytes,
    maxEventBytes: config.maxEventBytes,
    uninspected: events.uninspected,
    tapProblem: events.tapProblem,
    proxyError: events.proxyError,
    retried: events.retried,
    usageInjection: config.injectUsage ? injection : undefined,
    accessLog,
    usage,
    tls: config.security.dataTls,
    upstreamCa: config.security.upstreamCa,
    upstreamConnections: config.upstreamConnections,
    limits: config.limits,
    rejected: events.rejected,
    clientError: events.clientError,
    httpRequest: passThroughReport(dialectRows(config.dialects, parts.dialectTable ?? DIALECTS), events),
    lifecycleViolation: parts.lifecycleViolation,
    staleRaceMs: parts.staleRaceMs,
    apiTable: parts.apiTable,
    tenantOf: parts.aliases === undefined ? undefined : createTenantOf(config.tenant.source, parts.aliases.current),
  });
  const close = async (): Promise<void> => {
    await plane.close();
    await accessLog?.close();
  };
  let url: string;
  try {
    url = urlOf(await listen(plane.server, config.host, config.port, dataPolicy(config)), config.security.dataTls === undefined ? 'http' : 'https');
  } catch (error) {
    await close();
    throw error;
  }
  return { plane, url, reopenAccessLog: () => accessLog?.reopen(), drain: (timeoutMs) => drainAndSay(plane, timeoutMs, log), close };
}

/** Usage injection's switch, counting on the proxy families (INFERMETER_INJECT_USAGE). */
function usageInjection(config: Config, log: Logger, events: ProxyEvents) {
  return createInjectionSwitch(
    config.injectUsage,
    { active: events.injectionActive, injected: events.usageInjected, stripped: events.usageStripped },
    (msg) => log.warn(msg),
    config.continuousUsage,
  );
}

/**
 * Drains the data plane and logs how it ended. The data plane's drain resolves when its last
 * connection closed, or at the timeout right after cutting the rest: the connections still
 * counted then are the ones cut (their close events come later), each with its one request.
 */
async function drainAndSay(plane: Pick<DataPlane, 'drain'>, timeoutMs: number, log: Logger): Promise<void> {
  const started = performance.now();
  // The connections still open at the drain timeout, cut: one request each under HTTP/1.
  const cut = await plane.drain(timeoutMs);
  const fields = { duration_ms: Math.round(performance.now() - started), timeout_ms: timeoutMs };
  if (cut === 0) log.info('drained: every request in flight finished', fields);
  else log.warn('drain timed out: requests still in flight were cut', { ...fields, requests_cut: cut });
}
