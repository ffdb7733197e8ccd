// The OTLP export of the otel dialect's measurements: an OpenTelemetry SDK MeterProvider with a
// PeriodicExportingMetricReader and the official OTLP/HTTP exporter (protobuf by default, JSON with
// OTEL_EXPORTER_OTLP_PROTOCOL=http/json), fed by an observer on the recorder: each finished
// request's sample goes through the same mapping as the otel dialect's histograms
// (dialects/otel.ts), with the same bucket boundaries (Views). The SDK is loaded with a dynamic
// import only when an endpoint is configured, so a start without it stays lean. One export at a
// time: an interval that comes while one is in flight is skipped (counted), and an export still
// unanswered at its deadline is cut (its connection destroyed, so nothing it holds outlives it)
// and counted as failed: a receiver that answers a byte at a time costs one export's memory,
// not thirty. On close, one last export is awaited, bounded.
import http from 'node:http';
import https from 'node:https';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Attributes, Histogram } from '@opentelemetry/api';
import type { AggregationOption, AggregationTemporality, InstrumentType, PushMetricExporter, ResourceMetrics } from '@opentelemetry/sdk-metrics';
import type { Registry } from '@prometheus-io/client';
import type { OtlpExportConfig } from './otel-config.ts';
import type { Logger } from '../../log.ts';
import { VERSION } from '../../version.ts';
import { bucketsFor, type BucketOverrides } from '../exposition/buckets.ts';
import type { InferenceApis } from '../../measure/inference-apis.ts';
import { OTEL_BUCKETS, OTEL_INSTRUMENTS, otelMeasurements, type OtelInstrumentKey, type OtelOptions } from '../dialects/otel.ts';
import { registerDerived } from '../exposition/families.ts';
import type { SampleObserver } from '../state/recorder.ts';

/** The last export on close waits at most this long (or the export timeout, when lower). */
const FINAL_EXPORT_MAX_MS = 10_000;

export interface OtlpExportOptions {
  readonly config: OtlpExportConfig;
  readonly otel: OtelOptions;
  readonly buckets: BucketOverrides | undefined;
  /** The recorder's observers (Metrics.addObserver), the registry for infermeter_otlp_exports_total, the API table's rows. */
  readonly metrics: { addObserver(observer: SampleObserver): void; readonly registry: Registry; readonly apis: InferenceApis };
  readonly log: Logger;
}

export interface OtlpExport {
  /** Collects and exports now (tests; a scrape never waits for it). */
  flush(): Promise<void>;
  /** Stops the periodic export after one last export (bounded); idempotent. */
  close(): Promise<void>;
}

interface ExportResult {
  code: number;
  error?: Error;
}

/** Loads the SDK and starts exporting every `config.intervalMs`. */
export async function startOtlpExport(options: OtlpExportOptions): Promise<OtlpExport> {
  const { config, log } = options;
  const where = config.url.origin + config.url.pathname; // for logs: never the URL's credentials
  const [sdk, resources] = await Promise.all([import('@opentelemetry/sdk-metrics'), import('@opentelemetry/resources')]);
  // The exporter's connections, on an agent of ours: the deadline destroys the one in use. With
  // the TLS files the SDK would read itself (OTEL_EXPORTER_OTLP_[METRICS_]CERTIFICATE, ...).
  const agent = config.url.protocol === 'https:' ? new https.Agent({ keepAlive: true, ...tlsFiles(log) }) : new http.Agent({ keepAlive: true });
  const deadlineMs = Math.min(config.requestTimeoutMs, config.timeoutMs);
  const exporterOptions = { url: config.url.href, headers: { ...config.headers }, timeoutMillis: deadlineMs, httpAgentOptions: () => agent };
  // The two official exporters: @opentelemetry/exporter-metrics-otlp-proto (http/protobuf) and
  // @opentelemetry/exporter-metrics-otlp-http (http/json).
  const inner = (config.protocol === 'http/json'
    ? new (await import('@opentelemetry/exporter-metrics-otlp-http')).OTLPMetricExporter(exporterOptions)
    : new (await import('@opentelemetry/exporter-metrics-otlp-proto')).OTLPMetricExporter(exporterOptions)) as unknown as PushMetricExporter;

  // Every export's outcome: counted, and logged when it changes (a failing receiver is not
  // logged once per interval).
  let succeeded = 0;
  let failed = 0;
  let skipped = 0;
  let failing = false;
  let inFlight = false;
  // Whether the export in flight has been answered (its result counted and handed on).
  let answered = true;
  // Closing: the last export, which waits for the one in flight (`afterInFlight`) if any.
  let final = false;
  let afterInFlight: (() => void) | undefined;
  // The request in flight ends with its connection: the export's callback follows, and frees the place.
  const cut = (): void => {
    for (const sockets of Object.values(agent.sockets)) for (const socket of sockets ?? []) socket.destroy();
  };
  const outcome = (result: ExportResult): void => {
    if (result.code === 0) {
      succeeded++;
      if (failing) log.info('OTLP export recovered', { url: where });
      failing = false;
    } else {
      failed++;
      if (!failing) log.warn('OTLP export failed; retrying at the next interval', { url: where, error: result.error?.message ?? 'unknown' });
      failing = true;
    }
  };
  const exporter: PushMetricExporter = {
    export(metrics: ResourceMetrics, done: (result: ExportResult) => void) {
      if (inFlight && final) {
        // The last export, on close, comes while one is in flight: it follows that one (within
        // close's bound) rather than being skipped, so that what was measured since is sent.
        log.info('OTLP export: the last export waits for the one in flight', { url: where });
        afterInFlight = () => exporter.export(metrics, done);
        return;
      }
      if (inFlight) {
        skipped++;
        // Past its deadline, an export's retry (the SDK's, within its timeout) may have opened
        // another connection since the cut: it is cut too.
        if (answered) cut();
        done({ code: 1, error: new Error('the previous OTLP export is still in flight') });
        return;
      }
      inFlight = true;
      answered = false;
      const answer = (result: ExportResult): void => {
        if (answered) return;
        answered = true;
        clearTimeout(deadline);
        outcome(result);
        done(result);
      };
      const deadline = setTimeout(() => {
        answer({ code: 1, error: new Error(`no answer within ${deadlineMs} ms`) });
        cut();
      }, deadlineMs);
      deadline.unref();
      inner.export(metrics, (result) => {
        inFlight = false;
        answer(result);
        const next = afterInFlight;
        afterInFlight = undefined;
        next?.();
      });
    },
    forceFlush: () => inner.forceFlush(),
    shutdown: async () => {
      await inner.shutdown();
      agent.destroy();
    },
    selectAggregationTemporality: (type: InstrumentType): AggregationTemporality => inner.selectAggregationTemporality!(type),
    selectAggregation: (type: InstrumentType): AggregationOption => inner.selectAggregation!(type),
  };
  registerDerived(options.metrics.registry, {
    name: 'infermeter_otlp_exports_total',
    help: 'OTLP metric exports, by result (success, failure; skipped: an interval that came while the previous export was in flight).',
    type: 'counter',
    collect: () => [
      { value: succeeded, labels: { result: 'success' } },
      { value: failed, labels: { result: 'failure' } },
      { value: skipped, labels: { result: 'skipped' } },
    ],
  });

  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.version': VERSION }))
    .merge(resources.resourceFromAttributes(config.resource));
  const keys = Object.keys(OTEL_INSTRUMENTS) as OtelInstrumentKey[];
  const provider = new sdk.MeterProvider({
    resource,
    views: keys.map((key) => ({
      instrumentName: OTEL_INSTRUMENTS[key].name,
      aggregation: {
        type: sdk.AggregationType.EXPLICIT_BUCKET_HISTOGRAM,
        options: { boundaries: [...bucketsFor(OTEL_BUCKETS, OTEL_INSTRUMENTS[key].family, options.buckets)], recordMinMax: true },
      },
    })),
    readers: [new sdk.PeriodicExportingMetricReader({ exporter, exportIntervalMillis: config.intervalMs, exportTimeoutMillis: config.timeoutMs })],
  });
  const meter = provider.getMeter('infermeter', VERSION);
  const instruments = {} as Record<OtelInstrumentKey, Histogram>;
  for (const key of keys) {
    const { name, unit, description, family } = OTEL_INSTRUMENTS[key];
    instruments[key] = meter.createHistogram(name, {
      unit,
      description,
      advice: { explicitBucketBoundaries: [...bucketsFor(OTEL_BUCKETS, family, options.buckets)] },
    });
  }
  const record = (key: OtelInstrumentKey, value: number, attributes: Attributes): void => instruments[key].record(value, attributes);
  let closed = false;
  options.metrics.addObserver({
    finished(sample) {
      if (!closed) otelMeasurements(sample, options.otel, record, options.metrics.apis);
    },
  });
  log.info('OTLP metric export on', { url: where, protocol: config.protocol, interval_ms: config.intervalMs });

  let closing: Promise<void> | undefined;
  return {
    flush: () => provider.forceFlush(),
    close() {
      closing ??= (async () => {
        final = true;
        const bound = Math.min(config.timeoutMs, FINAL_EXPORT_MAX_MS);
        let timer: NodeJS.Timeout | undefined;
        const timedOut = new Promise<'timeout'>((resolve) => {
          timer = setTimeout(() => resolve('timeout'), bound);
          timer.unref();
        });
        const outcome = await Promise.race([
          provider.shutdown({ timeoutMillis: bound }).then(
            () => 'done' as const,
            () => 'failed' as const,
          ),
          timedOut,
        ]);
        clearTimeout(timer);
        closed = true;
        if (outcome !== 'done') log.warn('OTLP export: the last export did not complete', { outcome, bound_ms: bound });
      })();
      return closing;
    },
  };
}

/**
 * The TLS files of the OTLP connection, as the SDK reads them when it makes its agent itself:
 * each variable's METRICS_ form over the general one, a path from the working directory, a file
 * that cannot be read named in a warning and left out.
 */
function tlsFiles(log: Logger): { ca?: Buffer; cert?: Buffer; key?: Buffer } {
  const out: { ca?: Buffer; cert?: Buffer; key?: Buffer } = {};
  for (const [option, suffix] of [
    ['ca', 'CERTIFICATE'],
    ['cert', 'CLIENT_CERTIFICATE'],
    ['key', 'CLIENT_KEY'],
  ] as const) {
    const variable = [`OTEL_EXPORTER_OTLP_METRICS_${suffix}`, `OTEL_EXPORTER_OTLP_${suffix}`].find((v) => (process.env[v] ?? '').trim() !== '');
    if (variable === undefined) continue;
    try {
      out[option] = readFileSync(resolve(process.cwd(), process.env[variable]!.trim()));
    } catch (error) {
      log.warn('OTLP export: a TLS file could not be read', { variable, error: (error as NodeJS.ErrnoException).code ?? 'unreadable' });
    }
  }
  return out;
}
