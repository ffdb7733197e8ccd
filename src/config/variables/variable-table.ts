// What a row of the variables table (variables.ts) is, and what is derived from the rows:
// reading a group's values from the environment, their defaults without an environment (the
// data plane's when no configuration is given), and each row's documentation as docs/configuration.md's
// table, `--help` and the unknown-variable check show it. A row whose variable needs code of
// its own (an address, a URL, TLS files) is documented here and read by that code.
import type { MindieServerConfig } from '../parse/mindie-config.ts';
import { nonEmpty, readWith, type Env, type Parser, type Problem } from '../parse/parse.ts';

/** Where a row's value lands: Config itself, or one of its parts. */
export type Group = 'config' | 'listen' | 'limits' | 'aom' | 'tenant' | 'otel';

/** A variable read by code of its own (config.ts and the modules it calls). */
export interface DocumentedRow {
  /** The variable's name; `<FAMILY>` stands for a family of names (INFERMETER_BUCKETS_<FAMILY>). */
  readonly name: string;
  /** The default, as the documentation shows it (Markdown). */
  readonly default: string;
  /** What it does (Markdown), in parts joined by spaces: long text wraps over source lines. */
  readonly meaning: readonly string[];
}

/** A variable the table reads: its parser, its default as a value, and where the value lands. */
export interface ValueRow<K extends string = string, V = unknown, G extends Group = Group> {
  readonly name: string;
  readonly group: G;
  readonly key: K;
  readonly parse: Parser<V>;
  /** The default; a function: computed from the values of the group's earlier rows. */
  readonly value: V | ((earlier: Readonly<Record<string, unknown>>) => V);
  /** The default as documented, when `parse.show(value)` does not say it (Markdown). */
  readonly shown?: string;
  /** MindIE's config.json key read when the variable is unset (documented as "config `key`, else" the default). */
  readonly file?: keyof MindieServerConfig;
  /** What it does (Markdown); `{range}` stands for the parser's "min to max". */
  readonly meaning: readonly string[];
}

export type Row = DocumentedRow | ValueRow;

/** A row read by code of its own. */
export function documented(name: string, shown: string, ...meaning: string[]): DocumentedRow {
  return { name, default: shown, meaning };
}

/** A row the table reads into `group` (default: Config itself) under `key`. */
export function variable<const K extends string, V, const G extends Group = 'config'>(
  row: Omit<ValueRow<K, V, G>, 'group' | 'meaning' | 'value'> & {
    readonly group?: G;
    // The value's type is the parser's (a literal default does not narrow or widen it).
    readonly value: NoInfer<V> | ((earlier: Readonly<Record<string, unknown>>) => NoInfer<V>);
    readonly meaning: string | readonly string[];
  },
): ValueRow<K, V, G> {
  const meaning = typeof row.meaning === 'string' ? [row.meaning] : row.meaning;
  return { ...row, group: row.group ?? ('config' as G), meaning };
}

export const isValueRow = <R extends Row>(row: R): row is Extract<R, ValueRow> => 'parse' in row;

/** The values of one group of a table, typed from its rows. */
export type GroupValues<T extends readonly Row[], G extends Group> = {
  readonly [R in T[number] as R extends ValueRow<infer K, unknown, G> ? K : never]: R extends ValueRow<string, infer V, G> ? V : never;
};

/**
 * Reads the rows of `group` from the environment, then config.json where a row names its key;
 * each bad value is noted, naming the variable (or the file's key) and what it expects, and its
 * default kept. `sources`, when given, gets what set each value (undefined: its default).
 */
export function readGroup(
  table: readonly Row[],
  group: Group,
  env: Env,
  problem: Problem,
  file: MindieServerConfig = {},
  sources?: Record<string, string | undefined>,
): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const row of table) {
    if (!isValueRow(row) || row.group !== group) continue;
    const fromFile = row.file === undefined ? undefined : nonEmpty(file[row.file]?.toString());
    const fromEnv = nonEmpty(env[row.name]) !== undefined || fromFile === undefined;
    const [name, raw] = fromEnv ? [row.name, env[row.name]] : [`INFERMETER_CONFIG ServerConfig.${row.file}`, fromFile];
    if (sources !== undefined) sources[row.key] = nonEmpty(raw) === undefined ? undefined : name;
    values[row.key] = readWith(row.parse, name, raw, defaultOf(row, values), problem);
  }
  return values;
}

/** The defaults of a group: what readGroup gives for an empty environment. */
export function groupDefaults(table: readonly Row[], group: Group): Record<string, unknown> {
  return readGroup(table, group, {}, () => {});
}

function defaultOf(row: ValueRow, earlier: Readonly<Record<string, unknown>>): unknown {
  return typeof row.value === 'function' ? (row.value as (e: typeof earlier) => unknown)(earlier) : row.value;
}

export interface VariableDoc {
  readonly name: string;
  /** Markdown, as docs/configuration.md's table shows it. */
  readonly default: string;
  readonly meaning: string;
}

/** A row as documented: docs/configuration.md's table row, `--help`'s entry. */
export function docOf(row: Row): VariableDoc {
  const meaning = row.meaning.join(' ');
  if (!isValueRow(row)) return { name: row.name, default: row.default, meaning };
  const range = row.parse.range;
  if (row.shown === undefined && typeof row.value === 'function') throw new Error(`${row.name}: a computed default needs its shown text`);
  return {
    name: row.name,
    default: row.shown ?? (row.file === undefined ? '' : `config \`${row.file}\`, else `) + row.parse.show(row.value),
    meaning: range === undefined ? meaning : meaning.replaceAll('{range}', `${range.min} to ${range.max}`),
  };
}

/** The Markdown table rows of the configuration table, in its order. */
export function markdownRows(table: readonly Row[]): string[] {
  return table.map(docOf).map((d) => `| \`${d.name}\` | ${d.default} | ${d.meaning} |`);
}

/** The variables of a table, the <FAMILY> patterns left out. */
export function variableNames(table: readonly Row[]): string[] {
  return table.map((v) => v.name).filter((n) => !n.includes('<'));
}
