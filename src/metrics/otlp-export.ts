// The OTLP export of the otel dialect's measurements: an OpenTelemetry SDK MeterProvider with a
// PeriodicExportingMetricReader and the official OTLP/HTTP exporter (protobuf by default, JSON with
// OTEL_EXPORTER_OTLP_PROTOCOL=http/json), fed by an observer on the recorder: each finished
// request's sample goes through the same mapping as the otel dialect's histograms
// (dialects/otel.ts), with the same bucket boundaries (Views). The SDK is loaded with a dynamic
// import only when an endpoint is configured, so a start without it stays lean. On close, one
// last export is awaited, bounded.
import type { Attributes, Histogram } from '@opentelemetry/api';
import type { AggregationOption, AggregationTemporality, InstrumentType, PushMetricExporter, ResourceMetrics } from '@opentelemetry/sdk-metrics';
import type { Registry } from '@prometheus-io/client';
import type { OtlpExportConfig } from '../config/otel-config.ts';
import type { Logger } from '../log.ts';
import { VERSION } from '../version.ts';
import { bucketsFor, type BucketOverrides } from './buckets.ts';
import { OTEL_BUCKETS, OTEL_INSTRUMENTS, otelMeasurements, type OtelInstrumentKey, type OtelOptions } from './dialects/otel.ts';
import { registerDerived } from './families.ts';
import type { SampleObserver } from './recorder.ts';

/** The last export on close waits at most this long (or the export timeout, when lower). */
const FINAL_EXPORT_MAX_MS = 10_000;

export interface OtlpExportOptions {
  readonly config: OtlpExportConfig;
  readonly otel: OtelOptions;
  readonly buckets: BucketOverrides | undefined;
  /** The recorder's observers (Metrics.addObserver) and the registry for infermeter_otlp_exports_total. */
  readonly metrics: { addObserver(observer: SampleObserver): void; readonly registry: Registry };
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
  const exporterOptions = { url: config.url.href, headers: { ...config.headers } };
  // The two official exporters: @opentelemetry/exporter-metrics-otlp-proto (http/protobuf) and
  // @opentelemetry/exporter-metrics-otlp-http (http/json).
  const inner = (config.protocol === 'http/json'
    ? new (await import('@opentelemetry/exporter-metrics-otlp-http')).OTLPMetricExporter(exporterOptions)
    : new (await import('@opentelemetry/exporter-metrics-otlp-proto')).OTLPMetricExporter(exporterOptions)) as unknown as PushMetricExporter;

  // Every export's outcome: counted, and logged when it changes (a failing receiver is not
  // logged once per interval).
  let succeeded = 0;
  let failed = 0;
  let failing = false;
  const exporter: PushMetricExporter = {
    export(metrics: ResourceMetrics, done: (result: ExportResult) => void) {
      inner.export(metrics, (result) => {
        if (result.code === 0) {
          succeeded++;
          if (failing) log.info('OTLP export recovered', { url: where });
          failing = false;
        } else {
          failed++;
          if (!failing) log.warn('OTLP export failed; retrying at the next interval', { url: where, error: result.error?.message ?? 'unknown' });
          failing = true;
        }
        done(result);
      });
    },
    forceFlush: () => inner.forceFlush(),
    shutdown: () => inner.shutdown(),
    selectAggregationTemporality: (type: InstrumentType): AggregationTemporality => inner.selectAggregationTemporality!(type),
    selectAggregation: (type: InstrumentType): AggregationOption => inner.selectAggregation!(type),
  };
  registerDerived(options.metrics.registry, {
    name: 'infermeter_otlp_exports_total',
    help: 'OTLP metric exports attempted, by result (success, failure).',
    type: 'counter',
    collect: () => [
      { value: succeeded, labels: { result: 'success' } },
      { value: failed, labels: { result: 'failure' } },
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
      if (!closed) otelMeasurements(sample, options.otel, record);
    },
  });
  log.info('OTLP metric export on', { url: where, protocol: config.protocol, interval_ms: config.intervalMs });

  let closing: Promise<void> | undefined;
  return {
    flush: () => provider.forceFlush(),
    close() {
      closing ??= (async () => {
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
