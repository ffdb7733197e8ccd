// The prices in use, live: INFERMETER_PRICES_FILE's table, read again on SIGHUP and when the file
// changes (config/parse/file-reload.ts, as the SLO classes and the tenant aliases are; a bad file on
// reload keeps the prices in use and names the key). Which entry prices a model is decided by
// its name; the answers are cached per name and forgotten when the prices change.
import { createFileReload } from '../config/parse/file-reload.ts';
import { globMatches } from '../config/parse/glob.ts';
import type { Logger } from '../log.ts';
import { readPricesFile, type PriceRule, type PriceTable, type TokenKind } from './prices-file.ts';

/** What prices one model: its per-token rule and the pool (the index of its per_hour entry). */
interface ModelPrices {
  readonly perMillion: Readonly<Record<TokenKind, bigint>> | undefined;
  /** Index in the table's rules of the first matching entry with per_hour; -1: none. */
  readonly pool: number;
}

export interface PriceBook {
  table(): PriceTable;
  /**
   * The first entry with per_million_tokens whose glob matches the model prices its tokens;
   * the first with per_hour, its pool (each kind its own first match).
   */
  pricesOf(model: string): ModelPrices;
  /** Called with the new table once a reload took it into use. */
  onChange(listener: (table: PriceTable) => void): void;
  reload(): boolean;
  close(): void;
  /** How many model names' answers are cached now (at most MAX_CACHED). */
  cached(): number;
}

const MAX_CACHED = 10_000;

export function createPriceBook(options: {
  readonly file: string | undefined;
  readonly initial: PriceTable;
  readonly log: Logger;
  readonly watchIntervalMs?: number;
}): PriceBook {
  let table = options.initial;
  const cache = new Map<string, ModelPrices>();
  const listeners: ((t: PriceTable) => void)[] = [];
  const reloader = createFileReload({
    file: options.file,
    variable: 'INFERMETER_PRICES_FILE',
    kept: 'the prices in use are kept',
    read: (path) => readPricesFile(path),
    apply: (read) => {
      table = read.table;
      cache.clear();
      for (const l of listeners) l(table);
      return { version: table.version, entries: table.rules.length };
    },
    log: options.log,
    watchIntervalMs: options.watchIntervalMs,
  });
  return {
    table: () => table,
    pricesOf(model) {
      let p = cache.get(model);
      if (p === undefined) {
        p = lookup(table.rules, model);
        if (cache.size >= MAX_CACHED) cache.clear();
        cache.set(model, p);
      }
      return p;
    },
    onChange: (l) => void listeners.push(l),
    reload: reloader.reload,
    close: reloader.close,
    cached: () => cache.size,
  };
}

function lookup(rules: readonly PriceRule[], model: string): ModelPrices {
  let perMillion: ModelPrices['perMillion'];
  let pool = -1;
  for (let i = 0; i < rules.length && (perMillion === undefined || pool === -1); i++) {
    const r = rules[i]!;
    if ((perMillion !== undefined || r.perMillion === undefined) && (pool !== -1 || r.perHour === undefined)) continue;
    if (!globMatches(r.glob, model)) continue;
    if (perMillion === undefined && r.perMillion !== undefined) perMillion = r.perMillion;
    if (pool === -1 && r.perHour !== undefined) pool = i;
  }
  return { perMillion, pool };
}
