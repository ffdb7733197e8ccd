// Reads a Prometheus text exposition into series, for exact assertions on /metrics.

export interface Exposition {
  /** The value of one series; labels must match exactly (order does not matter). */
  value(name: string, labels?: Record<string, string>): number | undefined;
  /** Every series of a name. */
  series(name: string): Array<{ labels: Record<string, string>; value: number }>;
  /** Series written more than once (name and label set; order and empty-valued labels do not count, as in Prometheus). */
  duplicates(): string[];
  /** The sum of the series of a name whose labels include `match` (undefined when there is none). */
  sum(name: string, match?: Record<string, string>): number | undefined;
  readonly text: string;
}

export function parseExposition(text: string): Exposition {
  const all: Array<{ name: string; labels: Record<string, string>; value: number }> = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) throw new Error(`unparseable exposition line: ${line}`);
    const labels: Record<string, string> = {};
    if (m[2] !== undefined && m[2] !== '') {
      for (const pair of m[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[pair[1]!] = pair[2]!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
      }
    }
    const raw = m[3]!;
    all.push({ name: m[1]!, labels, value: raw === 'Nan' || raw === 'NaN' ? Number.NaN : Number(raw) });
  }
  const same = (a: Record<string, string>, b: Record<string, string>): boolean => {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
  };
  return {
    text,
    value: (name, labels = {}) => all.find((s) => s.name === name && same(s.labels, labels))?.value,
    duplicates() {
      const seen = new Set<string>();
      const twice: string[] = [];
      for (const s of all) {
        const key = JSON.stringify([
          s.name,
          Object.entries(s.labels)
            .filter(([, v]) => v !== '')
            .sort(([a], [b]) => (a < b ? -1 : 1)),
        ]);
        if (seen.has(key)) twice.push(key);
        seen.add(key);
      }
      return twice;
    },
    series: (name) => all.filter((s) => s.name === name).map(({ labels, value }) => ({ labels, value })),
    sum(name, match = {}) {
      const hits = all.filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v));
      return hits.length === 0 ? undefined : hits.reduce((total, s) => total + s.value, 0);
    },
  };
}

/** The process families' lines (process_*, nodejs_*: values that vary by read), to mask in a comparison of two renders. */
export const PROCESS_FAMILY_LINES = /^(?:# [A-Z]+ )?(?:process|nodejs)_.*\n/gm;

/**
 * promtool's findings on the Node.js process families under the names prom-client (and so every
 * Node service and its dashboards) gives them: gauges with _total, and the event-loop
 * utilisation's two forms named by their type. Kept on purpose (docs/metrics.md, process metrics).
 */
export const NODE_CLIENT_LINT: readonly string[] = [
  'nodejs_active_handles_total non-counter metrics should not have "_total" suffix',
  'nodejs_active_requests_total non-counter metrics should not have "_total" suffix',
  'nodejs_active_resources_total non-counter metrics should not have "_total" suffix',
  "nodejs_eventloop_utilization_histogram metric name should not include type 'histogram'",
  "nodejs_eventloop_utilization_summary metric name should not include type 'summary'",
];
