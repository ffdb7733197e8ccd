// The Prometheus text format (0.0.4), written directly: the families of this project render
// themselves with label strings built once per series, which is what keeps a scrape of a
// hundred models with every family within a few milliseconds.

export function escapeLabelValue(value: string): string {
  // Fast path: most label values need no escaping at all.
  if (!/[\\"\n]/.test(value)) return value;
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

export function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

export function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Number.POSITIVE_INFINITY) return '+Inf';
  if (value === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(value);
}

/** `a="x",b="y"` for a label set, in insertion order. */
export function formatLabels(labels: Readonly<Record<string, string | number>>): string {
  let out = '';
  for (const key in labels) {
    const v = labels[key]!;
    out += `${out === '' ? '' : ','}${key}="${typeof v === 'number' ? String(v) : escapeLabelValue(v)}"`;
  }
  return out;
}

export function header(name: string, help: string, type: string): string {
  return `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} ${type}\n`;
}
