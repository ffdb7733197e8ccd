// The Prometheus text format (0.0.4), written directly: the families of this project render
// themselves with label strings built once per series, which is what keeps a scrape of a
// hundred models with every family within a few milliseconds.

export function escapeLabelValue(value: string): string {
  // Fast path: most label values need no escaping at all.
  if (!/[\\"\n]/.test(value)) return value;
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

export function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Number.POSITIVE_INFINITY) return '+Inf';
  if (value === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(value);
}

/**
 * A number as Python's prometheus_client writes it (floatToGoString over repr()): integers with
 * ".0" ("1.0"), exponents from 1e16 and below 1e-4 ("1e+16", "1e-05"), and from 1e6 upwards
 * its own exponent form ("1e+06", "2.5e+06"). What vLLM writes in `le`, which dashboards match
 * as text (le="1.0").
 */
export function formatPythonFloat(value: number): string {
  if (!Number.isFinite(value)) return formatValue(value);
  const [mantissa, exp] = value.toExponential().split('e') as [string, string];
  const e = Number(exp);
  let s: string;
  if (e >= -4 && e < 16) {
    s = String(value);
    if (!s.includes('.') && !s.includes('e')) s += '.0';
    // JavaScript writes 1e-7 and smaller with an exponent; that range is below Python's -4.
  } else {
    s = `${mantissa}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  const dot = s.indexOf('.');
  if (value > 0 && dot > 6) {
    const m = `${s[0]}.${s.slice(1, dot)}${s.slice(dot + 1)}`.replace(/[0.]+$/, '');
    return `${m}e+0${dot - 1}`;
  }
  return s;
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
