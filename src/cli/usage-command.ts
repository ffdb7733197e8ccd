// `infermeter usage report|verify`: a bill read from the spool (INFERMETER_USAGE_DIR), with no
// database. `report` sums the records per tenant and model over a time range, as a table or
// CSV; `verify` finds what would make a bill wrong: gaps in a writer's sequence, an id twice,
// lines that are not records, and token sums that differ from a scrape's counters.
import { readFile } from 'node:fs/promises';
import { parseExposition } from '../engine/exposition-parser.ts';
import { readSpool } from '../ledger/spool-reader.ts';
import type { UsageEvent } from '../ledger/usage-event.ts';

const USAGE_HELP = [
  'infermeter usage report --dir D [--from T] [--to T] [--format table|csv]',
  '    requests and tokens per tenant and model of the records in D (T: an RFC 3339 time or a date;',
  '    --from included, --to excluded)',
  'infermeter usage verify --dir D [--metrics URL|FILE]',
  "    sequence gaps per writer, duplicate ids, malformed lines; with --metrics, the records' token",
  "    sums against that scrape's counters",
].join('\n');

interface Totals {
  tenant: string | null;
  model: string;
  requests: number;
  prompt: number;
  completion: number;
  reasoning: number;
  cached: number;
  /** The records' prices version (a report across a price change has a row per version); null: unpriced. */
  priceVersion: string | null;
  /** The sum of the records' cost_nanos; null when none had one. */
  cost: bigint | null;
}

type Args = { readonly [name: string]: string | undefined };

/** `--name value` or `--name=value` pairs of `allowed`; a message on anything else. */
function parseArgs(args: readonly string[], allowed: readonly string[]): Args | { readonly error: string } {
  const out: Record<string, string> = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg : arg.slice(0, eq);
    if (!allowed.includes(name)) return { error: `unknown argument ${JSON.stringify(arg)}` };
    const value = eq === -1 ? args[++i] : arg.slice(eq + 1);
    if (value === undefined || value === '') return { error: `${name} needs a value` };
    out[name.slice(2)] = value;
  }
  return out;
}

function parseTime(name: string, text: string | undefined): number | undefined | { error: string } {
  if (text === undefined) return undefined;
  const t = Date.parse(text);
  return Number.isNaN(t) ? { error: `--${name} expects an RFC 3339 time or a date (2026-12-01), got ${JSON.stringify(text)}` } : t;
}

export interface UsageCommandResult {
  readonly code: number;
  readonly out: string;
  readonly err: string;
}

export async function runUsage(args: readonly string[]): Promise<UsageCommandResult> {
  const [sub, ...rest] = args;
  if (sub === 'report') return report(rest);
  if (sub === 'verify') return verify(rest);
  return { code: 2, out: '', err: `infermeter usage: expected report or verify\n${USAGE_HELP}\n` };
}

const fail = (message: string): UsageCommandResult => ({ code: 2, out: '', err: `infermeter usage: ${message}\n${USAGE_HELP}\n` });

/** Sums per (tenant, model) of the records of `dir` whose time is in [from, to). */
export async function usageTotals(dir: string, from?: number, to?: number): Promise<{ totals: Totals[]; malformed: number }> {
  const byPair = new Map<string, Totals>();
  const { malformed } = await readSpool(dir, (e) => {
    const t = Date.parse(e.time);
    if ((from !== undefined && t < from) || (to !== undefined && t >= to)) return;
    const d = e.data;
    const priceVersion = typeof d.price_version === 'string' ? d.price_version : null;
    const key = JSON.stringify([d.tenant, d.model, priceVersion]);
    let p = byPair.get(key);
    if (p === undefined)
      byPair.set(key, (p = { tenant: d.tenant, model: d.model, requests: 0, prompt: 0, completion: 0, reasoning: 0, cached: 0, priceVersion, cost: null }));
    if (Number.isSafeInteger(d.cost_nanos)) p.cost = (p.cost ?? 0n) + BigInt(d.cost_nanos as number);
    p.requests++;
    p.prompt += d.prompt_tokens ?? 0;
    p.completion += d.completion_tokens ?? 0;
    p.reasoning += d.reasoning_tokens ?? 0;
    p.cached += d.cached_prompt_tokens ?? 0;
  });
  const totals = [...byPair.values()].sort(
    (a, b) => (a.tenant ?? '').localeCompare(b.tenant ?? '') || a.model.localeCompare(b.model) || (a.priceVersion ?? '').localeCompare(b.priceVersion ?? ''),
  );
  return { totals, malformed };
}

const COLUMNS = [
  'tenant',
  'model',
  'requests',
  'prompt_tokens',
  'completion_tokens',
  'reasoning_tokens',
  'cached_prompt_tokens',
  'price_version',
  'cost_nanos',
];
const row = (p: Totals): string[] => [
  p.tenant ?? '',
  p.model,
  ...[p.requests, p.prompt, p.completion, p.reasoning, p.cached].map(String),
  p.priceVersion ?? '',
  p.cost === null ? '' : p.cost.toString(),
];

async function report(args: readonly string[]): Promise<UsageCommandResult> {
  const parsed = parseArgs(args, ['--dir', '--from', '--to', '--format']);
  if ('error' in parsed) return fail(parsed.error as string);
  if (parsed.dir === undefined) return fail('report needs --dir D (the INFERMETER_USAGE_DIR to read)');
  const format = parsed.format ?? 'table';
  if (format !== 'table' && format !== 'csv') return fail(`--format expects table or csv, got ${JSON.stringify(format)}`);
  const from = parseTime('from', parsed.from);
  const to = parseTime('to', parsed.to);
  if (typeof from === 'object') return fail(from.error);
  if (typeof to === 'object') return fail(to.error);
  const { totals, malformed } = await usageTotals(parsed.dir, from, to);
  const rows = totals.map(row);
  const err = malformed === 0 ? '' : `infermeter usage: ${malformed} lines are not usage records (infermeter usage verify says more)\n`;
  if (format === 'csv') return { code: 0, out: [COLUMNS, ...rows].map((r) => r.map(csvField).join(',')).join('\n') + '\n', err };
  const shown = [COLUMNS, ...rows.map((r) => r.map((cell, i) => (cell === '' && (i === 0 || i >= 7) ? '-' : cell)))];
  const widths = COLUMNS.map((_, i) => Math.max(...shown.map((r) => r[i]!.length)));
  // Names left-aligned, figures right-aligned.
  const out = shown
    .map((r) =>
      r
        .map((cell, i) => (i < 2 || i === 7 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
  return { code: 0, out: `${out}\n`, err };
}

const csvField = (v: string): string => (/[",\r\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v);

interface Writer {
  seqs: number[];
}

async function verify(args: readonly string[]): Promise<UsageCommandResult> {
  const parsed = parseArgs(args, ['--dir', '--metrics']);
  if ('error' in parsed) return fail(parsed.error as string);
  if (parsed.dir === undefined) return fail('verify needs --dir D (the INFERMETER_USAGE_DIR to read)');
  const writers = new Map<string, Writer>();
  const ids = new Set<string>();
  let duplicates = 0;
  let records = 0;
  const events: UsageEvent[] = [];
  const { malformed, segments } = await readSpool(parsed.dir, (e) => {
    records++;
    const key = `${e.source} ${e.data.process_start_id}`;
    let w = writers.get(key);
    if (w === undefined) writers.set(key, (w = { seqs: [] }));
    w.seqs.push(e.data.seq);
    const id = `${e.source} ${e.id}`; // what a metering service de-duplicates on
    if (ids.has(id)) duplicates++;
    else ids.add(id);
    if (parsed.metrics !== undefined) events.push(e);
  });
  const lines = [`${records} records in ${segments} segments, ${writers.size} writers`];
  let problems = 0;
  for (const [key, w] of writers) {
    const seqs = w.seqs.sort((a, b) => a - b);
    const missing: string[] = [];
    let expected = 1;
    for (const s of seqs) {
      if (s > expected) missing.push(s - 1 === expected ? `${expected}` : `${expected}-${s - 1}`);
      expected = Math.max(expected, s + 1);
    }
    if (missing.length > 0) {
      problems++;
      lines.push(`gap: writer ${key}: seq ${missing.join(', ')} missing (of 1-${expected - 1})`);
    }
  }
  if (duplicates > 0) {
    problems++;
    lines.push(`duplicates: ${duplicates} records repeat an id already seen`);
  }
  if (malformed > 0) {
    problems++;
    lines.push(`malformed: ${malformed} lines are not usage records`);
  }
  if (parsed.metrics !== undefined) {
    const text = /^https?:\/\//.test(parsed.metrics) ? await (await fetch(parsed.metrics)).text() : await readFile(parsed.metrics, 'utf8');
    const differences = compareWithMetrics(events, text);
    problems += differences.length;
    lines.push(...differences);
    if (differences.length === 0) lines.push("tokens: the records' sums equal the scrape's counters");
  }
  lines.push(problems === 0 ? 'ok' : `${problems} problems`);
  return { code: problems === 0 ? 0 : 1, out: `${lines.join('\n')}\n`, err: '' };
}

/**
 * The records' prompt and completion token sums against a scrape's counters: per tenant and
 * model (infermeter_tenant_*_tokens_total) where the scrape has them, else per model (the MindIE
 * dialect's prompt_tokens_total, generation_tokens_total). A difference is a line.
 */
function compareWithMetrics(events: readonly UsageEvent[], exposition: string): string[] {
  const families = new Map(parseExposition(exposition).map((f) => [f.name, f]));
  const tenants = families.has('infermeter_tenant_prompt_tokens_total');
  const [promptName, completionName] = tenants
    ? ['infermeter_tenant_prompt_tokens_total', 'infermeter_tenant_generation_tokens_total']
    : ['prompt_tokens_total', 'generation_tokens_total'];
  const keyOf = (tenant: string | null | undefined, model: string): string => (tenants ? `tenant=${tenant ?? ''} model=${model}` : `model=${model}`);
  const sums = new Map<string, { prompt: number; completion: number }>();
  const add = (key: string) => {
    let s = sums.get(key);
    if (s === undefined) sums.set(key, (s = { prompt: 0, completion: 0 }));
    return s;
  };
  for (const e of events) {
    const s = add(keyOf(e.data.tenant, e.data.model));
    s.prompt += e.data.prompt_tokens ?? 0;
    s.completion += e.data.completion_tokens ?? 0;
  }
  const scraped = new Map<string, { prompt: number; completion: number }>();
  for (const [name, field] of [
    [promptName, 'prompt'],
    [completionName, 'completion'],
  ] as const) {
    for (const sample of families.get(name)?.samples ?? []) {
      const key = keyOf(sample.labels.tenant, sample.labels.model_name ?? '');
      let s = scraped.get(key);
      if (s === undefined) scraped.set(key, (s = { prompt: 0, completion: 0 }));
      s[field] += sample.value;
    }
  }
  const out: string[] = [];
  for (const key of new Set([...sums.keys(), ...scraped.keys()])) {
    const a = sums.get(key) ?? { prompt: 0, completion: 0 };
    const b = scraped.get(key) ?? { prompt: 0, completion: 0 };
    if (a.prompt !== b.prompt) out.push(`tokens: ${key}: prompt ${a.prompt} in the records, ${b.prompt} in the scrape`);
    if (a.completion !== b.completion) out.push(`tokens: ${key}: completion ${a.completion} in the records, ${b.completion} in the scrape`);
  }
  return out;
}
