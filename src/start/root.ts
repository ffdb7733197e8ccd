// The composition root: one process, or the primary of INFERMETER_WORKERS > 1, is the same
// wiring with a different data side. Here the measurement (start/measurement.ts) is built, the
// OTLP export started, the data side started through its `DataParts` (in this process:
// app.ts; in workers: cluster/primary.ts), the management and metrics listeners opened, and all
// of it reloaded on SIGHUP, drained and closed, in one order for both. A new component is wired
// here once.
import type { Config } from '../config/config.ts';
import { exposureWarnings } from '../config/exposure-warnings.ts';
import type { DataPlane } from '../data-plane/data-plane.ts';
import type { Logger } from '../log.ts';
import { startManagement, type Management } from '../management/start-management.ts';
import { containerEvidence } from '../metrics/container/in-container.ts';
import type { OtlpExport } from '../metrics/export/otlp-export.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { startedFields } from '../started-fields.ts';
import { createMeasurement, startExport, type DataPlaneReadings, type Measurement, type StartOptions } from './measurement.ts';

export interface Infermeter {
  /** Base URL clients use instead of the model server's. */
  readonly dataUrl: string;
  readonly managementUrl: string;
  /** URL of GET /metrics, or undefined when MIES_SERVICE_MONITOR_MODE turned it off. */
  readonly metricsUrl: string | undefined;
  readonly metrics: Metrics;
  /** The data plane's listener, in this process (tests watch its requests); none in workers mode. */
  readonly dataServer?: DataPlane['server'];
  /** The data plane itself, in this process (tests read its connection counts); none in workers mode. */
  readonly dataPlane?: DataPlane;
  /** Reads INFERMETER_TENANT_ALIASES again (SIGHUP); a bad file keeps the mapping in use, with a warning. */
  reloadTenantAliases(): void;
  /** Reads INFERMETER_SLO_FILE again (SIGHUP); a bad file keeps the classes in use, with a warning. */
  reloadSlo(): void;
  /** Reads INFERMETER_PRICES_FILE again (SIGHUP); a bad file keeps the prices in use, with a warning naming the key. */
  reloadPrices(): void;
  /** Opens INFERMETER_ACCESS_LOG's file again at its path (SIGHUP, after a rotation moved it). */
  reopenAccessLog(): void;
  /** Stops accepting and closes the listeners. */
  close(): Promise<void>;
  /**
   * The graceful stop of SIGTERM/SIGINT: /ready answers 503 at once, the data plane stops
   * accepting, requests in flight finish (up to INFERMETER_DRAIN_TIMEOUT_MS), then everything
   * closes. /metrics answers throughout, so the last scrape sees every finished request.
   */
  drain(): Promise<void>;
}

/** Where the data plane runs for a root: in this process, or in workers. */
export interface DataParts<Exposed> {
  /** What the metrics read of the data plane at scrape time (called only once started). */
  readonly readings: DataPlaneReadings;
  /** Starts the data side, reporting to `measurement`; resolves once it listens. */
  start(measurement: Measurement): Promise<DataServing<Exposed>>;
}

/** A started data side, as the root drives it. */
interface DataServing<Exposed> {
  readonly dataUrl: string;
  /** Before a scrape or a dashboard snapshot is answered (workers send what they batched). */
  readonly beforeScrape?: () => Promise<void>;
  /** Fields of its own for the start line. */
  readonly startedFields?: Record<string, string | number>;
  /** What the root's caller gets besides the Infermeter (tests read them). */
  readonly exposed: Exposed;
  /** Its share of SIGHUP: the data side's own tenant aliases and prices (the workers'), the access log. */
  reloadTenantAliases(): void;
  reloadPrices(): void;
  reopenAccessLog(): void;
  /** Requests in flight finish, up to INFERMETER_DRAIN_TIMEOUT_MS. */
  drain(): Promise<void>;
  /** Stops it (after a drain, what is left); the measurement is still open. */
  close(): Promise<void>;
}

/**
 * What the configuration says at start without refusing it: certificates outside their
 * validity, an exposure the operator may not mean (exposure-warnings.ts). `container`: the
 * evidence of running in one (tests pass theirs).
 */
export function logStartWarnings(config: Config, log: Logger, container = containerEvidence({ root: '/', procRoot: '/proc', env: process.env })): void {
  for (const w of config.security.warnings) log.warn(w.msg, w.fields);
  for (const w of exposureWarnings(config, container)) log.warn(w.msg, w.fields);
}

/** Starts an infermeter whose data plane `parts` serves; everything started is closed again when a step fails. */
export async function startRoot<Exposed>(config: Config, options: StartOptions, parts: DataParts<Exposed>): Promise<Infermeter & Exposed> {
  const { log } = options;
  logStartWarnings(config, log);
  const measurement = createMeasurement(config, options, parts.readings);
  const { metrics, readiness, aliases, prices, ledger } = measurement;
  let otlp: OtlpExport | undefined;
  let serving: DataServing<Exposed> | undefined;
  let management: Management | undefined;
  /** Everything that is open, closed in order: a scrape in progress is answered whole before the metrics stop. */
  const closeAll = async (): Promise<void> => {
    management?.setReady(false);
    readiness?.close();
    await serving?.close();
    await management?.close();
    aliases?.close();
    prices?.book.close();
    metrics.close();
    await ledger?.close();
    // Every request has finished: the last export carries them all (bounded).
    await otlp?.close();
  };
  try {
    // Before the first request: the export hears every finished one.
    otlp = await startExport(config, metrics, log);
    serving = await parts.start(measurement);
    management = await startManagement(config, metrics, serving.dataUrl, serving.beforeScrape, readiness);
  } catch (error) {
    await closeAll();
    throw error;
  }
  metrics.start();
  management.setReady(true);
  log.info('infermeter started', { ...startedFields(config, serving.dataUrl, management), ...serving.startedFields });
  const data = serving;
  const m = management;
  return {
    ...data.exposed,
    dataUrl: data.dataUrl,
    managementUrl: m.managementUrl,
    metricsUrl: m.metricsUrl,
    metrics,
    reloadTenantAliases() {
      if (aliases === undefined) return;
      aliases.reload();
      data.reloadTenantAliases();
    },
    reloadSlo: () => void metrics.goodput?.policy.reload(),
    reloadPrices() {
      prices?.book.reload();
      data.reloadPrices();
    },
    reopenAccessLog: () => data.reopenAccessLog(),
    close: closeAll,
    async drain() {
      m.setReady(false);
      await data.drain();
      await closeAll();
    },
  };
}
