// INFERMETER_PRICES_FILE: the operator's own prices, YAML (or JSON, which is YAML), read at start
// by the configuration (a bad file stops the start, naming the key) and again on reload (a bad
// file keeps the prices in use). Read with YAML's failsafe schema: every scalar stays the text
// the operator wrote, so that a price is turned into nano-units from its digits (decimal.ts),
// never through a float.
import { createRequire } from 'node:module';
import { compileGlob, type Glob } from '../config/parse/glob.ts';
import { FileRefused, nonEmpty, utf8Capped, type Env, type Problem } from '../config/parse/parse.ts';
import { decimalNanos } from './decimal.ts';

// YAML's parser (72 modules) loaded when a prices file is read, not on every start: the
// configuration is read synchronously, so through require (the package's Node entry is CommonJS).
const require = createRequire(import.meta.url);
const parseDocument: typeof import('yaml').parseDocument = (...args) => (require('yaml') as typeof import('yaml')).parseDocument(...args);

export const TOKEN_KINDS = ['prompt', 'cached_prompt', 'completion', 'reasoning'] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];

/** One `models` entry: the first whose glob matches a model name prices it. */
export interface PriceRule {
  readonly match: string;
  readonly glob: Glob;
  /** Nano-units per million tokens of each kind, a kind left out as its parent; undefined: not priced per token. */
  readonly perMillion: Readonly<Record<TokenKind, bigint>> | undefined;
  /** Nano-units per hour of the pool serving the model; undefined: no pool price. */
  readonly perHour: bigint | undefined;
}

export interface PriceTable {
  readonly currency: string;
  readonly version: string;
  readonly rules: readonly PriceRule[];
}

export interface PricesConfig {
  readonly file: string | undefined;
  /** The file's prices; undefined without a file. */
  readonly table: PriceTable | undefined;
}

export type PricesRead = { readonly ok: true; readonly table: PriceTable } | { readonly ok: false; readonly expected: string };

const MAX_FILE_BYTES = 1024 * 1024;
const MAX_RULES = 1000;
const readPricesText = utf8Capped(MAX_FILE_BYTES);
const CURRENCY = /^[A-Za-z]{1,16}$/;
const VERSION = /^[\x21-\x7e]{1,64}$/;
const PATTERN = /^[^\u0000-\u001f\u007f]{1,256}$/;
const SHAPE = 'a YAML or JSON file {currency, version, models: [{match, per_million_tokens: {prompt, cached_prompt, completion, reasoning}, per_hour}]}';
const PRICE = 'a decimal number >= 0 with at most 9 digits after the point (e.g. 0.20)';

export function parsePrices(env: Env, problem: Problem, readFile: (path: string) => string = readPricesText): PricesConfig {
  const file = nonEmpty(env.INFERMETER_PRICES_FILE);
  if (file === undefined) return { file, table: undefined };
  const read = readPricesFile(file, readFile);
  if (read.ok) return { file, table: read.table };
  problem('INFERMETER_PRICES_FILE', read.expected, file);
  return { file, table: undefined };
}

export function readPricesFile(path: string, readFile: (path: string) => string = readPricesText): PricesRead {
  let text: string;
  try {
    text = readFile(path);
  } catch (error) {
    if (error instanceof FileRefused) return { ok: false, expected: `${SHAPE}: ${error.expected}` };
    return { ok: false, expected: `a readable ${SHAPE} (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})` };
  }
  return parsePricesText(text);
}

type Node = string | Node[] | { [key: string]: Node } | null;

const isMap = (v: Node | undefined): v is { [key: string]: Node } => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The file's text checked; a refusal names the key that is wrong (`models[2].per_hour`). */
export function parsePricesText(text: string): PricesRead {
  const bad = (key: string, what: string): PricesRead => ({ ok: false, expected: `${SHAPE}: ${key} ${what}` });
  if (text.length > MAX_FILE_BYTES) return bad('the file', `is larger than ${MAX_FILE_BYTES} bytes`);
  let root: Node;
  try {
    const doc = parseDocument(text, { schema: 'failsafe', uniqueKeys: true, prettyErrors: false });
    if (doc.errors.length > 0) {
      const e = doc.errors[0]!;
      return bad('the file', `is not valid YAML (${e.code} at line ${e.linePos?.[0]?.line ?? '?'})`);
    }
    root = doc.toJS({ maxAliasCount: 100 }) as Node;
  } catch (error) {
    return bad('the file', `is not valid YAML (${(error as Error).message.split('\n')[0]})`);
  }
  if (!isMap(root)) return bad('the file', 'is not a mapping');
  const unknown = Object.keys(root).find((k) => !['currency', 'version', 'models'].includes(k));
  if (unknown !== undefined) return bad(unknown, 'is not a key of the file (currency, version, models)');
  if (typeof root.currency !== 'string' || !CURRENCY.test(root.currency)) return bad('currency', 'is not 1 to 16 letters (e.g. USD)');
  if (typeof root.version !== 'string' || !VERSION.test(root.version)) return bad('version', 'is not 1 to 64 printable characters without spaces');
  const models = root.models;
  if (!Array.isArray(models) || models.length === 0) return bad('models', 'is not a list of at least one entry');
  if (models.length > MAX_RULES) return bad('models', `has more than ${MAX_RULES} entries`);
  const rules: PriceRule[] = [];
  for (const [i, entry] of models.entries()) {
    const at = `models[${i}]`;
    if (!isMap(entry)) return bad(at, 'is not a mapping');
    const other = Object.keys(entry).find((k) => !['match', 'per_million_tokens', 'per_hour'].includes(k));
    if (other !== undefined) return bad(`${at}.${other}`, 'is not a key of an entry (match, per_million_tokens, per_hour)');
    if (typeof entry.match !== 'string' || !PATTERN.test(entry.match)) return bad(`${at}.match`, 'is not a glob of 1 to 256 printable characters');
    let perMillion: Record<TokenKind, bigint> | undefined;
    const tokens = entry.per_million_tokens;
    if (tokens !== undefined) {
      if (!isMap(tokens)) return bad(`${at}.per_million_tokens`, 'is not a mapping');
      const extra = Object.keys(tokens).find((k) => !(TOKEN_KINDS as readonly string[]).includes(k));
      if (extra !== undefined) return bad(`${at}.per_million_tokens.${extra}`, 'is not a kind (prompt, cached_prompt, completion, reasoning)');
      const given: Partial<Record<TokenKind, bigint>> = {};
      for (const kind of TOKEN_KINDS) {
        const v = tokens[kind];
        if (v === undefined) continue;
        const nanos = typeof v === 'string' ? decimalNanos(v) : undefined;
        if (nanos === undefined) return bad(`${at}.per_million_tokens.${kind}`, `is not ${PRICE}`);
        given[kind] = nanos;
      }
      if (given.prompt === undefined) return bad(`${at}.per_million_tokens.prompt`, 'is missing (the parent of cached_prompt)');
      if (given.completion === undefined) return bad(`${at}.per_million_tokens.completion`, 'is missing (the parent of reasoning)');
      perMillion = {
        prompt: given.prompt,
        cached_prompt: given.cached_prompt ?? given.prompt,
        completion: given.completion,
        reasoning: given.reasoning ?? given.completion,
      };
    }
    let perHour: bigint | undefined;
    if (entry.per_hour !== undefined) {
      perHour = typeof entry.per_hour === 'string' ? decimalNanos(entry.per_hour) : undefined;
      if (perHour === undefined) return bad(`${at}.per_hour`, `is not ${PRICE}`);
    }
    if (perMillion === undefined && perHour === undefined) return bad(at, 'has neither per_million_tokens nor per_hour');
    rules.push(Object.freeze({ match: entry.match, glob: compileGlob(entry.match), perMillion, perHour }));
  }
  return { ok: true, table: Object.freeze({ currency: root.currency, version: root.version, rules }) };
}
