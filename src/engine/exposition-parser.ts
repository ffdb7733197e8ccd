// A strict parser of the Prometheus text exposition format (version 0.0.4): families with
// their HELP and TYPE, samples with labels, values and optional timestamps. Used to read an
// engine's /metrics and to validate what is relayed; anything malformed is an error naming the
// line, never a partial result.

export type FamilyType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
  readonly timestamp: string | undefined;
}

export interface Family {
  readonly name: string;
  type: FamilyType;
  help: string | undefined;
  readonly samples: Sample[];
}

export class ExpositionError extends Error {
  readonly line: number;
  constructor(message: string, line: number) {
    super(`line ${line}: ${message}`);
    this.name = 'ExpositionError';
    this.line = line;
  }
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set<FamilyType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
const SUFFIXES: Readonly<Record<FamilyType, readonly string[]>> = {
  counter: ['_total', ''],
  gauge: [''],
  untyped: [''],
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['', '_sum', '_count'],
};

/** Parses a whole exposition; families keep the order of first appearance. */
export function parseExposition(text: string): Family[] {
  const families = new Map<string, Family>();
  const lines = text.split('\n');
  let current: Family | undefined;

  const family = (name: string): Family => {
    let f = families.get(name);
    if (f === undefined) {
      f = { name, type: 'untyped', help: undefined, samples: [] };
      families.set(name, f);
    }
    return f;
  };

  for (let i = 0; i < lines.length; i++) {
    const n = i + 1;
    const line = lines[i]!.replace(/\r$/, '');
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(line);
      if (m === null) continue; // a plain comment
      const name = m[2]!;
      if (!METRIC_NAME.test(name)) throw new ExpositionError(`invalid metric name ${JSON.stringify(name)}`, n);
      const f = family(name);
      if (m[1] === 'HELP') {
        f.help = unescapeHelp(m[3] ?? '');
      } else {
        const type = (m[3] ?? '').trim() as FamilyType;
        if (!TYPES.has(type)) throw new ExpositionError(`unknown type ${JSON.stringify(m[3])}`, n);
        if (f.samples.length > 0) throw new ExpositionError(`TYPE of ${name} after its samples`, n);
        f.type = type;
      }
      current = f;
      continue;
    }
    const sample = parseSample(line, n);
    // A sample belongs to the family declared just before it when its name is that family's
    // name plus an allowed suffix (x_bucket of histogram x); otherwise to a family of its own.
    const owner = current !== undefined && SUFFIXES[current.type].some((s) => sample.name === current!.name + s) ? current : family(sample.name);
    if (owner.type === 'histogram' && sample.name.endsWith('_bucket') && sample.labels.le === undefined) {
      throw new ExpositionError(`${sample.name} without an le label`, n);
    }
    owner.samples.push(sample);
    current = owner;
  }
  return [...families.values()];
}

function parseSample(line: string, n: number): Sample {
  let i = 0;
  while (i < line.length && line[i] !== '{' && line[i] !== ' ' && line[i] !== '\t') i++;
  const name = line.slice(0, i);
  if (!METRIC_NAME.test(name)) throw new ExpositionError(`invalid metric name ${JSON.stringify(name)}`, n);
  const labels: Record<string, string> = {};
  if (line[i] === '{') {
    i++;
    for (;;) {
      while (line[i] === ' ') i++;
      if (line[i] === '}') {
        i++;
        break;
      }
      const eq = line.indexOf('=', i);
      if (eq === -1) throw new ExpositionError('unterminated label set', n);
      const label = line.slice(i, eq).trim();
      if (!LABEL_NAME.test(label)) throw new ExpositionError(`invalid label name ${JSON.stringify(label)}`, n);
      if (line[eq + 1] !== '"') throw new ExpositionError(`label ${label} without a quoted value`, n);
      let j = eq + 2;
      let value = '';
      for (;;) {
        if (j >= line.length) throw new ExpositionError('unterminated label value', n);
        const c = line[j]!;
        if (c === '\\') {
          const next = line[j + 1];
          if (next === 'n') value += '\n';
          else if (next === '\\' || next === '"') value += next;
          else throw new ExpositionError('invalid escape in a label value', n);
          j += 2;
        } else if (c === '"') {
          j++;
          break;
        } else {
          value += c;
          j++;
        }
      }
      if (label in labels) throw new ExpositionError(`label ${label} repeated`, n);
      labels[label] = value;
      i = j;
      while (line[i] === ' ') i++;
      if (line[i] === ',') i++;
      else if (line[i] !== '}') throw new ExpositionError('expected , or } in a label set', n);
    }
  }
  const rest = line.slice(i).trim().split(/\s+/);
  if (rest.length < 1 || rest.length > 2 || rest[0] === '') throw new ExpositionError('expected a value and an optional timestamp', n);
  const value = parseValue(rest[0]!);
  if (value === undefined) throw new ExpositionError(`invalid value ${JSON.stringify(rest[0])}`, n);
  const timestamp = rest[1];
  if (timestamp !== undefined && !/^-?\d+$/.test(timestamp)) throw new ExpositionError(`invalid timestamp ${JSON.stringify(timestamp)}`, n);
  return { name, labels, value, timestamp };
}

function parseValue(text: string): number | undefined {
  const lower = text.toLowerCase();
  if (lower === 'nan') return Number.NaN;
  if (lower === '+inf' || lower === 'inf') return Number.POSITIVE_INFINITY;
  if (lower === '-inf') return Number.NEGATIVE_INFINITY;
  if (!/^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/.test(text)) return undefined;
  return Number(text);
}

function unescapeHelp(text: string): string {
  return text.replace(/\\(n|\\)/g, (_, c: string) => (c === 'n' ? '\n' : '\\'));
}

function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function escapeLabel(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Number.POSITIVE_INFINITY) return '+Inf';
  if (value === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(value);
}

/** Writes families back in the text format: what is relayed is re-serialised, never passed raw. */
export function formatExposition(families: readonly Family[]): string {
  let out = '';
  for (const f of families) {
    if (f.help !== undefined) out += `# HELP ${f.name} ${escapeHelp(f.help)}\n`;
    out += `# TYPE ${f.name} ${f.type}\n`;
    for (const s of f.samples) {
      const labels = Object.entries(s.labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
      out += `${s.name}${labels.length === 0 ? '' : `{${labels.join(',')}}`} ${formatValue(s.value)}${s.timestamp === undefined ? '' : ` ${s.timestamp}`}\n`;
    }
  }
  return out;
}

/**
 * Keeps the first sample of each series and drops the later ones: a series is a sample name and
 * a label set, whatever the labels' order, a label with an empty value being no label (as
 * Prometheus reads them), across families (a sample of x_total may come under x and under a family
 * of its own). A family left with no sample goes too. Served twice, a series is one that
 * Prometheus would keep only one of, and the engine figures would count it twice.
 */
export function dropDuplicateSeries(families: readonly Family[]): { families: Family[]; dropped: number } {
  const seen = new Set<string>();
  let dropped = 0;
  const kept: Family[] = [];
  for (const f of families) {
    const samples = f.samples.filter((s) => {
      const labels = Object.entries(s.labels).filter(([, v]) => v !== '');
      if (labels.length > 1) labels.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      const key = JSON.stringify([s.name, labels]);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
    dropped += f.samples.length - samples.length;
    if (samples.length === f.samples.length) kept.push(f);
    else if (samples.length > 0) kept.push({ ...f, samples });
  }
  return { families: kept, dropped };
}

/** Every sample name a family's samples may use (x, x_total, x_bucket ...). */
export function seriesNames(name: string, type: FamilyType): string[] {
  return SUFFIXES[type].map((s) => name + s);
}
