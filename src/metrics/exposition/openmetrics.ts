// The OpenMetrics text format (1.0.0), served on /metrics to a scraper that asks for it
// (`Accept: application/openmetrics-text`, as Prometheus does by default): the one thing it
// carries that the Prometheus text format cannot is exemplars, the request id on a histogram's
// bucket. The families render Prometheus text (families.ts: exemplars on request); this turns it
// into OpenMetrics: a counter's family is named without `_total` (its samples keep it), one
// whose samples do not all end in `_total` (an engine's relayed `tgi_request_count`, say) and an
// untyped one become `unknown`, a quote in HELP is escaped, timestamps go from milliseconds to
// seconds, and a gauge `x_created` beside a counter, histogram or summary `x` (what Python's
// prometheus_client writes in the text format) becomes that family's `_created` samples, as it
// writes them in OpenMetrics (a family of its own would clash with them); the caller ends the
// exposition with `# EOF`. Series names and values are unchanged,
// so Prometheus stores the same series from either format.

export const OPENMETRICS_CONTENT_TYPE = 'application/openmetrics-text; version=1.0.0; charset=utf-8';
export const OPENMETRICS_EOF = '# EOF\n';

/**
 * Whether an Accept header prefers OpenMetrics: it names application/openmetrics-text (any
 * version we write, 1.0.0 or 0.0.1, or none) with a q above 0 and no lower than that of
 * text/plain or a wildcard. Prometheus 2.x sends
 * `application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*\/*;q=0.1`.
 */
export function wantsOpenMetrics(accept: string | undefined): boolean {
  if (accept === undefined || !accept.includes('openmetrics')) return false;
  let om = 0;
  let plain = 0;
  for (const range of accept.split(',')) {
    const [type = '', ...params] = range.split(';').map((p) => p.trim().toLowerCase());
    let q = 1;
    let version: string | undefined;
    for (const p of params) {
      if (p.startsWith('q=')) q = Number(p.slice(2));
      else if (p.startsWith('version=')) version = p.slice(8);
    }
    if (!(q >= 0 && q <= 1)) continue;
    if (type === 'application/openmetrics-text') {
      if (version === undefined || version === '1.0.0' || version === '0.0.1') om = Math.max(om, q);
    } else if (type === 'text/plain' || type === '*/*' || type === 'text/*') plain = Math.max(plain, q);
  }
  return om > 0 && om >= plain;
}

/** HELP text as the Prometheus format escapes it (`\\`, `\n`) with its quotes escaped too. */
function escapeQuotes(help: string): string {
  if (!help.includes('"')) return help;
  let out = '';
  for (let i = 0; i < help.length; i++) {
    const c = help[i]!;
    if (c === '\\') {
      out += c + (help[i + 1] ?? '');
      i++;
    } else out += c === '"' ? '\\"' : c;
  }
  return out;
}

/** The sample name of a sample line: up to its labels or its value. */
function sampleName(line: string): string {
  let i = 0;
  while (i < line.length && line[i] !== '{' && line[i] !== ' ') i++;
  return line.slice(0, i);
}

/** A sample line's label set as written (`{...}` or ''); `bucket`: without a histogram's `le` or a summary's `quantile`. */
function labelsOf(line: string, bucket = false): string {
  const open = line.indexOf('{');
  const space = line.indexOf(' ');
  if (open === -1 || (space !== -1 && space < open)) return '';
  const close = line.lastIndexOf('}');
  const text = line.slice(open, close + 1);
  return bucket
    ? text
        .replace(/,?(le|quantile)="[^"]*"/, '')
        .replace('{,', '{')
        .replace('{}', '')
    : text;
}

/** A sample line's timestamp (milliseconds in the Prometheus format) in seconds; lines without one unchanged. */
function timestampInSeconds(line: string): string {
  let i = 0;
  if (line.includes('{')) {
    // Past the label set: quotes hold any character, a backslash escapes the next.
    i = line.indexOf('{');
    let quoted = false;
    for (; i < line.length; i++) {
      const c = line[i];
      if (quoted) {
        if (c === '\\') i++;
        else if (c === '"') quoted = false;
      } else if (c === '"') quoted = true;
      else if (c === '}') break;
    }
  }
  const rest = line.slice(i).split(' ');
  // [name or '}', value, timestamp]
  if (rest.length !== 3 || !/^-?\d+$/.test(rest[2]!)) return line;
  return `${line.slice(0, i)}${rest[0]} ${rest[1]} ${Number(rest[2]) / 1000}`;
}

interface Block {
  name: string;
  help: string | undefined;
  type: string;
  samples: string[];
}

function writeBlock(b: Block, timestamps: boolean): string {
  let { name, type } = b;
  if (type === 'counter') {
    const base = name.endsWith('_total') ? name.slice(0, -'_total'.length) : name;
    const total = `${base}_total`;
    const created = `${base}_created`;
    if (base !== '' && b.samples.every((s) => sampleName(s) === total || sampleName(s) === created)) name = base;
    else type = 'unknown';
  } else if (type === 'untyped') type = 'unknown';
  let out = b.help === undefined ? '' : `# HELP ${name} ${escapeQuotes(b.help)}\n`;
  out += `# TYPE ${name} ${type}\n`;
  for (const s of b.samples) out += `${timestamps ? timestampInSeconds(s) : s}\n`;
  return out;
}

/**
 * Families in the Prometheus text format (as this project writes them: HELP, then TYPE, then
 * the samples) in OpenMetrics, `# EOF` not included. `timestamps`: sample lines may carry
 * timestamps (the engine's relayed families); ours never do.
 */
export function toOpenMetrics(text: string, timestamps = false): string {
  // The common case, one family of ours whose samples need no change (a histogram, a gauge):
  // its two header lines rewritten, the rest as it is.
  if (!timestamps && text.startsWith('# HELP ')) {
    const helpEnd = text.indexOf('\n');
    const typeEnd = text.indexOf('\n', helpEnd + 1);
    if (helpEnd !== -1 && typeEnd !== -1 && text.startsWith('# TYPE ', helpEnd + 1) && text.indexOf('\n#', typeEnd) === -1) {
      const type = text.slice(text.lastIndexOf(' ', typeEnd) + 1, typeEnd);
      if (type === 'histogram' || type === 'gauge' || type === 'summary') {
        const at = text.indexOf(' ', 7);
        const help = at === -1 || at > helpEnd ? '' : text.slice(at + 1, helpEnd);
        return `${text.slice(0, at === -1 || at > helpEnd ? helpEnd : at + 1)}${escapeQuotes(help)}${text.slice(helpEnd)}`;
      }
    }
  }
  const blocks: Block[] = [];
  let block: Block | undefined;
  let help: { name: string; text: string } | undefined;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('# HELP ')) {
      if (block !== undefined) blocks.push(block);
      block = undefined;
      const at = line.indexOf(' ', 7);
      help = at === -1 ? { name: line.slice(7), text: '' } : { name: line.slice(7, at), text: line.slice(at + 1) };
    } else if (line.startsWith('# TYPE ')) {
      if (block !== undefined) blocks.push(block);
      const [name = '', type = 'untyped'] = line.slice(7).split(' ');
      block = { name, help: help?.name === name ? help.text : undefined, type, samples: [] };
      help = undefined;
    } else if (line.startsWith('#')) {
      // another comment: OpenMetrics has none
    } else if (block !== undefined) block.samples.push(line);
    else {
      // A sample before any TYPE: a family of its own, unknown.
      block = { name: sampleName(line), help: undefined, type: 'unknown', samples: [line] };
    }
  }
  if (block !== undefined) blocks.push(block);
  if (blocks.length === 1) return writeBlock(blocks[0]!, timestamps);
  // `x_created` gauges join their family x (a counter may be named x_total).
  const byName = new Map<string, Block>();
  for (const b of blocks) {
    if (b.type === 'counter' || b.type === 'histogram' || b.type === 'summary')
      byName.set(b.type === 'counter' && b.name.endsWith('_total') ? b.name.slice(0, -'_total'.length) : b.name, b);
  }
  let out = '';
  for (const b of blocks) {
    const owner = b.type === 'gauge' && b.name.endsWith('_created') ? byName.get(b.name.slice(0, -'_created'.length)) : undefined;
    if (owner === undefined) continue;
    // Each after the last sample of its label set: OpenMetrics keeps a metric point's samples together.
    for (const created of b.samples) {
      const labels = labelsOf(created);
      let at = -1;
      for (let i = 0; i < owner.samples.length; i++) if (labelsOf(owner.samples[i]!, true) === labels) at = i;
      if (at !== -1) owner.samples.splice(at + 1, 0, created);
    }
  }
  for (const b of blocks) {
    if (b.type === 'gauge' && b.name.endsWith('_created') && byName.has(b.name.slice(0, -'_created'.length))) continue;
    out += writeBlock(b, timestamps);
  }
  return out;
}

/**
 * One of this project's families, rendered in parts (families.ts: HELP and TYPE first, then
 * whole sample lines, named as the family is, or its histogram's `_bucket`, `_sum`, `_count`),
 * turned into OpenMetrics part by part, so that a family of thousands of series never has to be
 * held whole: the header is rewritten as toOpenMetrics would (a counter named `x_total` is the
 * family `x`; one not ending in `_total` is `unknown`), the samples pass unchanged.
 */
export function openMetricsParts(): (part: string) => string {
  let headerDone = false;
  return (part) => {
    if (headerDone) return part;
    headerDone = true;
    if (!part.startsWith('# HELP ')) return toOpenMetrics(part);
    const helpEnd = part.indexOf('\n');
    const typeEnd = part.indexOf('\n', helpEnd + 1);
    if (helpEnd === -1 || typeEnd === -1 || !part.startsWith('# TYPE ', helpEnd + 1)) return toOpenMetrics(part);
    const [name = '', type = 'untyped'] = part.slice(helpEnd + 8, typeEnd).split(' ');
    const at = part.indexOf(' ', 7);
    const help = at === -1 || at > helpEnd ? '' : part.slice(at + 1, helpEnd);
    let omName = name;
    let omType = type;
    if (type === 'counter') {
      if (name.endsWith('_total') && name !== '_total') omName = name.slice(0, -'_total'.length);
      else omType = 'unknown';
    } else if (type === 'untyped') omType = 'unknown';
    return `# HELP ${omName} ${escapeQuotes(help)}\n# TYPE ${omName} ${omType}\n${part.slice(typeEnd + 1)}`;
  };
}
