// One series of a histogram family (families.ts): per-bucket counts, sum and count, its line
// prefixes once built, and each bucket's last exemplar; the O(log buckets) observation and the
// series' text, with exemplars in OpenMetrics' syntax when asked. Pure: no registry, no clock
// but the exemplar's wall-clock time.
import { escapeLabelValue, formatValue } from './text-format.ts';

/**
 * The ids an exemplar carries: what every OpenMetrics parser reads back as written. OpenMetrics
 * limits an exemplar's label set to 128 UTF-8 characters, names and values together:
 * `request_id` leaves 118 for the id (counted here in UTF-16 units, never fewer than its
 * characters). No brace: Python's strict parser takes the first `}` after an exemplar's `{`
 * for its end, quoted or not, and refuses the whole scrape; no control character (a parser may
 * end a line at a CR); well-formed (a lone surrogate would be written as U+FFFD). `"` and `\`
 * are escaped. Any other id: no exemplar (the bucket keeps its previous one).
 */
const EXEMPLAR_ID = /^[^\u0000-\u001f\u007f-\u009f{}]{1,118}$/;
// The last id checked: a request's observations (a dozen with every dialect) check it once.
let lastId = '';
let lastFit = false;

/** Whether `id` can be an exemplar's request_id (EXEMPLAR_ID). */
function exemplarFits(id: string): boolean {
  if (id !== lastId) {
    lastId = id;
    lastFit = EXEMPLAR_ID.test(id) && id.isWellFormed();
  }
  return lastFit;
}

/** Each bucket's last exemplar: allocated at a series' first one. */
interface Exemplars {
  readonly ids: (string | undefined)[];
  readonly values: Float64Array;
  /** Wall-clock milliseconds. */
  readonly times: Float64Array;
}

export interface Series {
  readonly counts: Float64Array; // per bucket, not cumulative; last slot is +Inf
  sum: number;
  count: number;
  /** Text up to the value of each line (bucket lines, +Inf, sum, count), built on first render. */
  prefixes: string[] | undefined;
  exemplars: Exemplars | undefined;
}

/** Upper bounds as a typed array, checked to increase strictly. */
export function checkedBounds(name: string, buckets: readonly number[]): Float64Array {
  const bounds = Float64Array.from(buckets);
  for (let i = 1; i < bounds.length; i++) {
    if (!(bounds[i]! > bounds[i - 1]!)) throw new TypeError(`buckets of ${name} must increase strictly`);
  }
  return bounds;
}

/**
 * Adds `weight` observations of `value` to a series: binary search for the first bound >= value.
 * An `exemplar` id becomes that bucket's exemplar (three stores; the arrays at the first one).
 */
export function observeInto(s: Series, bounds: Float64Array, value: number, weight: number, exemplar: string | undefined): void {
  let lo = 0;
  let hi = bounds.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (value <= bounds[mid]!) hi = mid;
    else lo = mid + 1;
  }
  s.counts[lo]! += weight;
  s.sum += value * weight;
  s.count += weight;
  if (exemplar === undefined || !exemplarFits(exemplar)) return;
  const n = bounds.length + 1;
  const e = (s.exemplars ??= { ids: new Array<string | undefined>(n).fill(undefined), values: new Float64Array(n), times: new Float64Array(n) });
  e.ids[lo] = exemplar;
  e.values[lo] = value;
  e.times[lo] = Date.now();
}

/** ` # {request_id="..."} value timestamp`: bucket i's exemplar in OpenMetrics' syntax, or ''. */
function exemplarText(e: Exemplars | undefined, i: number): string {
  const id = e?.ids[i];
  if (e === undefined || id === undefined) return '';
  return ` # {request_id="${escapeLabelValue(id)}"} ${formatValue(e.values[i]!)} ${formatValue(e.times[i]! / 1000)}`;
}

/** A series' lines: cumulative buckets, +Inf, sum and count, after their prefixes `p`; exemplars when asked. */
export function seriesText(s: Series, p: readonly string[], n: number, exemplars = false): string {
  let out = '';
  let cumulative = 0;
  const e = exemplars ? s.exemplars : undefined;
  if (e === undefined) {
    for (let i = 0; i < n; i++) {
      cumulative += s.counts[i]!;
      out += `${p[i]}${cumulative}\n`;
    }
    return `${out}${p[n]}${s.count}\n${p[n + 1]}${formatValue(s.sum)}\n${p[n + 2]}${s.count}\n`;
  }
  for (let i = 0; i < n; i++) {
    cumulative += s.counts[i]!;
    out += `${p[i]}${cumulative}${exemplarText(e, i)}\n`;
  }
  return `${out}${p[n]}${s.count}${exemplarText(e, n)}\n${p[n + 1]}${formatValue(s.sum)}\n${p[n + 2]}${s.count}\n`;
}
