// Metric families that plug into a Prometheus client (@prometheus-io/client) Registry through its collector interface
// (`name` + `get()`), for what the client's own classes do not do:
// - a histogram whose observe() takes a weight, so that one request can add completion_tokens - 1
//   observations of its TPOT in O(1), as MindIE counts time_per_output_token_seconds;
// - counters and gauges computed at scrape time from the shared measurement state, so that every
//   dialect reads the same numbers and none can drift from another;
// - exemplars: a histogram observed with a request's id keeps, per bucket, the last such
//   observation (id, value, wall-clock time), written only into OpenMetrics renders.
import type { Registry } from '@prometheus-io/client';
import { checkedBounds, observeInto, seriesText, type Series } from './histogram-series.ts';
import { escapeLabelValue, formatLabels, formatValue, header } from './text-format.ts';

type MetricType = 'counter' | 'gauge' | 'histogram';

export interface MetricValue {
  value: number;
  labels: Record<string, string | number>;
  metricName?: string;
}

interface Collected {
  name: string;
  help: string;
  type: MetricType;
  values: MetricValue[];
  aggregator: 'sum' | 'first' | 'max' | 'average';
}

export interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: MetricType;
  /** the client's collector interface (JSON, cluster aggregation). */
  get(): Collected;
  /**
   * The family in the text format, HELP and TYPE included; what /metrics serves. With
   * `exemplars`, histogram bucket lines carry their exemplar in OpenMetrics' syntax (the caller
   * makes the rest of the render OpenMetrics: openmetrics.ts); without, nothing of them.
   */
  renderText(exemplars?: boolean): string;
  /**
   * The same text in parts of a series or a few kilobytes each, so that a render can give the
   * event loop back within a family of thousands of series (metrics.renderPieces).
   */
  renderParts?(exemplars?: boolean): Iterable<string>;
}

/** About how many characters a part of a derived family's text holds. */
export const PART_CHARS = 4 * 1024;
/**
 * A histogram keeps its series' line prefixes between renders while it has at most this many
 * series; past it (tenants x models at their caps) they are built at each render and let go:
 * kept, they would hold a few hundred megabytes for as long as the process runs.
 */
const CACHED_SERIES = 1024;

function joined(parts: Iterable<string>): string {
  let out = '';
  for (const part of parts) out += part;
  return out;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function checkName(name: string, labelNames: readonly string[]): void {
  if (!NAME.test(name)) throw new TypeError(`invalid metric name ${JSON.stringify(name)}`);
  for (const label of labelNames) {
    if (!LABEL.test(label) || label.startsWith('__') || label === 'le' || label === 'quantile') {
      throw new TypeError(`invalid label name ${JSON.stringify(label)} on ${name}`);
    }
  }
}

export interface DerivedOptions {
  readonly name: string;
  readonly help: string;
  /** 'histogram' for samples computed whole (`_bucket`, `_sum`, `_count` as each value's metricName). */
  readonly type: MetricType;
  /** How the client's cluster aggregation combines workers' values. */
  readonly aggregator?: Collected['aggregator'];
  /**
   * Called at every scrape; the samples of the family. An iterator is read as the render goes, a
   * part at a time: a family of thousands of series is never built whole in one piece.
   */
  readonly collect: () => Iterable<MetricValue>;
}

/** A counter or gauge (or a histogram's samples) computed at scrape time. */
export function registerDerived(registry: Registry, options: DerivedOptions): Family {
  checkName(options.name, []);
  const head = header(options.name, options.help, options.type);
  function* renderParts(): Generator<string> {
    let out = head;
    for (const v of options.collect()) {
      const labels = formatLabels(v.labels);
      out += `${v.metricName ?? options.name}${labels === '' ? '' : `{${labels}}`} ${formatValue(v.value)}\n`;
      if (out.length < PART_CHARS) continue;
      yield out;
      out = '';
    }
    if (out !== '') yield out;
  }
  const family: Family = {
    name: options.name,
    help: options.help,
    type: options.type,
    renderText: () => joined(renderParts()),
    renderParts,
    get: () => ({
      name: options.name,
      help: options.help,
      type: options.type,
      values: Array.from(options.collect()),
      aggregator: options.aggregator ?? 'sum',
    }),
  };
  registry.registerMetric(family as never);
  return family;
}

export interface HistogramOptions {
  readonly name: string;
  readonly help: string;
  /** Upper bounds, strictly increasing; +Inf is implied. */
  readonly buckets: readonly number[];
  /** How a bound is written in `le` (default: as JavaScript writes the number, "1"). */
  readonly formatBound?: (bound: number) => string;
  /** One label, the usual case here (model_name); its value is passed to observe(). */
  readonly labelName: string;
  /** Labels with the same value on every series of the family (a service's identity). */
  readonly constLabels?: Readonly<Record<string, string>>;
}

export interface WeightedHistogram extends Family {
  /**
   * Records `weight` observations of `value` under one label value; O(log buckets). With
   * `exemplar` (a request's id, one EXEMPLAR_ID of histogram-series.ts takes), the bucket's exemplar.
   */
  observe(labelValue: string, value: number, weight?: number, exemplar?: string): void;
}

/** A series as the client's MetricValue list (for get()). */
function seriesValues(name: string, s: Series, bounds: Float64Array, labels: Readonly<Record<string, string>>): MetricValue[] {
  const values: MetricValue[] = [];
  let cumulative = 0;
  for (let i = 0; i < bounds.length; i++) {
    cumulative += s.counts[i]!;
    values.push({ value: cumulative, labels: { ...labels, le: bounds[i]! }, metricName: `${name}_bucket` });
  }
  values.push({ value: s.count, labels: { ...labels, le: '+Inf' }, metricName: `${name}_bucket` });
  values.push({ value: s.sum, labels: { ...labels }, metricName: `${name}_sum` });
  values.push({ value: s.count, labels: { ...labels }, metricName: `${name}_count` });
  return values;
}

export function registerHistogram(registry: Registry, options: HistogramOptions): WeightedHistogram {
  const { name, help, labelName } = options;
  const constLabels = options.constLabels ?? {};
  checkName(name, [labelName, ...Object.keys(constLabels)]);
  const bounds = checkedBounds(name, options.buckets);
  const series = new Map<string, Series>();
  const bucketName = `${name}_bucket`;
  const sumName = `${name}_sum`;
  const countName = `${name}_count`;

  const head = header(name, help, 'histogram');
  const constText = formatLabels(constLabels);
  const bucketLabels = Array.from(bounds, (b) => `le="${(options.formatBound ?? formatValue)(b)}"`);
  const prefixesFor = (labelValue: string): string[] => {
    const labels = `${constText === '' ? '' : `${constText},`}${labelName}="${escapeLabelValue(labelValue)}"`;
    const prefixes = bucketLabels.map((le) => `${bucketName}{${labels},${le}} `);
    prefixes.push(`${bucketName}{${labels},le="+Inf"} `, `${sumName}{${labels}} `, `${countName}{${labels}} `);
    return prefixes;
  };

  function* renderParts(exemplars = false): Generator<string> {
    yield head;
    const keep = series.size <= CACHED_SERIES;
    for (const [labelValue, s] of series) {
      const prefixes = s.prefixes ?? prefixesFor(labelValue);
      if (keep) s.prefixes = prefixes;
      yield seriesText(s, prefixes, bounds.length, exemplars);
    }
  }
  const histogram: WeightedHistogram = {
    name,
    help,
    type: 'histogram',
    renderText: (exemplars) => joined(renderParts(exemplars)),
    renderParts,
    observe(labelValue, value, weight = 1, exemplar) {
      if (!(weight > 0) || !Number.isFinite(value)) return;
      let s = series.get(labelValue);
      if (s === undefined) {
        s = { counts: new Float64Array(bounds.length + 1), sum: 0, count: 0, prefixes: undefined, exemplars: undefined };
        series.set(labelValue, s);
      }
      observeInto(s, bounds, value, weight, exemplar);
    },
    get() {
      const values: MetricValue[] = [];
      for (const [labelValue, s] of series) values.push(...seriesValues(name, s, bounds, { ...constLabels, [labelName]: labelValue }));
      return { name, help, type: 'histogram', values, aggregator: 'sum' };
    },
  };
  registry.registerMetric(histogram as never);
  return histogram;
}

export interface LabelledHistogramOptions {
  readonly name: string;
  readonly help: string;
  /** Upper bounds, strictly increasing; +Inf is implied. */
  readonly buckets: readonly number[];
  /** How a bound is written in `le` (default: as JavaScript writes the number, "1"). */
  readonly formatBound?: (bound: number) => string;
  /** The label names, in the order of the values observe() takes. */
  readonly labelNames: readonly string[];
}

export interface LabelledHistogram extends Family {
  /**
   * Records `weight` observations of `value` under one label set, its values in the order of
   * `labelNames`; an undefined value leaves its label out of that series. `exemplar`: as
   * WeightedHistogram's.
   */
  observe(labelValues: readonly (string | undefined)[], value: number, weight?: number, exemplar?: string): void;
}

/**
 * A histogram over several labels (the OpenTelemetry dialect's attributes), rendered like
 * registerHistogram's: label strings built once per series, O(log buckets) per observation.
 */
export function registerLabelledHistogram(registry: Registry, options: LabelledHistogramOptions): LabelledHistogram {
  const { name, help, labelNames } = options;
  checkName(name, labelNames);
  const bounds = checkedBounds(name, options.buckets);
  const series = new Map<string, Series & { readonly labels: Readonly<Record<string, string>> }>();
  const head = header(name, help, 'histogram');
  const bucketLabels = Array.from(bounds, (b) => `le="${(options.formatBound ?? formatValue)(b)}"`);
  const prefixesFor = (labels: Readonly<Record<string, string>>): string[] => {
    const text = formatLabels(labels);
    const sep = text === '' ? '' : ',';
    const prefixes = bucketLabels.map((le) => `${name}_bucket{${text}${sep}${le}} `);
    const plain = text === '' ? '' : `{${text}}`;
    prefixes.push(`${name}_bucket{${text}${sep}le="+Inf"} `, `${name}_sum${plain} `, `${name}_count${plain} `);
    return prefixes;
  };
  // Length-prefixed values: no two label sets share a key, whatever characters they hold.
  const keyOf = (values: readonly (string | undefined)[]): string => {
    let key = '';
    for (let i = 0; i < labelNames.length; i++) {
      const v = values[i];
      key += v === undefined ? '-' : `${v.length}:${v}`;
    }
    return key;
  };

  function* renderParts(exemplars = false): Generator<string> {
    yield head;
    const keep = series.size <= CACHED_SERIES;
    for (const s of series.values()) {
      const prefixes = s.prefixes ?? prefixesFor(s.labels);
      if (keep) s.prefixes = prefixes;
      yield seriesText(s, prefixes, bounds.length, exemplars);
    }
  }
  const histogram: LabelledHistogram = {
    name,
    help,
    type: 'histogram',
    renderText: (exemplars) => joined(renderParts(exemplars)),
    renderParts,
    observe(labelValues, value, weight = 1, exemplar) {
      if (!(weight > 0) || !Number.isFinite(value)) return;
      const key = keyOf(labelValues);
      let s = series.get(key);
      if (s === undefined) {
        const labels: Record<string, string> = {};
        for (let i = 0; i < labelNames.length; i++) {
          const v = labelValues[i];
          if (v !== undefined) labels[labelNames[i]!] = v;
        }
        s = { counts: new Float64Array(bounds.length + 1), sum: 0, count: 0, prefixes: undefined, exemplars: undefined, labels };
        series.set(key, s);
      }
      observeInto(s, bounds, value, weight, exemplar);
    },
    get() {
      const values: MetricValue[] = [];
      for (const s of series.values()) values.push(...seriesValues(name, s, bounds, s.labels));
      return { name, help, type: 'histogram', values, aggregator: 'sum' };
    },
  };
  registry.registerMetric(histogram as never);
  return histogram;
}
