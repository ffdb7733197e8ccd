// Chargeback: what each tenant's use cost, from the operator's prices (INFERMETER_PRICES_FILE),
// in integer nano-units of the currency. Hears the recorder's events (the primary's, with
// workers: every worker's requests cross the bus already) and keeps:
// - per (tenant, model, kind) the sum of tokens x price (nano-units per million tokens), exact
//   as a BigInt; a series' value is that sum / 10^6 floored at the scrape, so a counter never
//   loses the fractions of a cheap model's tokens, and a price change applies from the request
//   that finishes after it (each request priced when it finishes, by its model name as sent);
// - per per_hour entry (a pool), the pool's cost split by occupancy (pool-split.ts), from the
//   requests in flight between their `started` (the model known) and their end.
import type { Registry } from '@prometheus-io/client';
import type { Clock } from '../measure/clock.ts';
import type { RequestInfo, RequestSample } from '../measure/sample.ts';
import { PART_CHARS } from '../metrics/exposition/families.ts';
import { formatLabels, header } from '../metrics/exposition/text-format.ts';
import type { PriceBook } from './price-book.ts';
import { createPoolSplit, type Labels, type PoolSplit, type Settled } from './pool-split.ts';
import { TOKEN_KINDS, type PriceTable, type TokenKind } from './prices-file.ts';

export interface ChargebackOptions {
  readonly registry: Registry;
  readonly book: PriceBook;
  readonly clock: Clock;
  /** Per-tenant metering on: the tenant family, and tenants in the pools' split. */
  readonly tenants: boolean;
  /** The bounded labels a raw model name and tenant count under now. */
  readonly modelLabel: (model: string) => string;
  readonly tenantLabel: (tenant: string) => string;
}

export interface Chargeback {
  started(raw: RequestInfo): void;
  finished(sample: RequestSample, raw: RequestInfo): void;
  /** Cost so far per tenant (`idle` included; one `''` without tenants), nano-units: the dashboard's and /metrics-json's figure. */
  costByTenant(): Map<string, bigint>;
  readonly currency: () => string;
}

/** A request's tokens by priced kind: cached prompt tokens are part of the prompt, reasoning part of the completion. */
export function tokenKinds(s: Pick<RequestSample, 'promptTokens' | 'completionTokens' | 'cachedPromptTokens' | 'reasoningTokens'>): Record<TokenKind, number> {
  const prompt = s.promptTokens ?? 0;
  const completion = s.completionTokens ?? 0;
  const cached = Math.min(s.cachedPromptTokens ?? 0, prompt);
  const reasoning = Math.min(s.reasoningTokens ?? 0, completion);
  return { prompt: prompt - cached, cached_prompt: cached, completion: completion - reasoning, reasoning };
}

/** One request's per-token cost, nano-units floored (the usage record's `cost_nanos`); undefined: its model has no per-token price. */
export function requestCostNanos(book: PriceBook, raw: RequestSample): bigint | undefined {
  const rates = book.pricesOf(raw.model).perMillion;
  if (rates === undefined) return undefined;
  const n = tokenKinds(raw);
  let sum = 0n;
  for (const kind of TOKEN_KINDS) sum += BigInt(n[kind]) * rates[kind];
  return sum / 1_000_000n;
}

interface Flight {
  readonly model: string;
  readonly tenant: string;
  count: number;
  /** Index of its pool in the prices in use; -1: none. */
  pool: number;
}

const keyOf = (tenant: string, model: string): string => `${tenant.length}:${tenant}${model}`;
const microseconds = (ms: number): number => Math.round(ms * 1000);

export function createChargeback(options: ChargebackOptions): Chargeback {
  const { book, clock } = options;
  // Sum of tokens x nano-units per million, per (tenant, model) and kind.
  const tokenSums = new Map<string, { readonly tenant: string; readonly model: string; readonly sums: Record<TokenKind, bigint> }>();
  const hours: Settled = new Map();
  // Requests in flight per tenant and model as sent (the concurrency bounds them), and their pool.
  const flights = new Map<string, Flight>();
  const poolTotals = new Map<string, bigint>();
  let table: PriceTable = book.table();
  const labels: Labels = (tenant, model) => ({ tenant: options.tenants ? options.tenantLabel(tenant) : '', model: options.modelLabel(model) });
  let pools: (PoolSplit | undefined)[] = [];
  const startPools = (t: PriceTable, nowUs: number): void => {
    table = t;
    pools = t.rules.map((r) => (r.perHour === undefined ? undefined : createPoolSplit(r.perHour, nowUs, r.match, hours, labels)));
  };
  startPools(table, microseconds(clock()));
  const advanceAll = (): void => {
    const now = microseconds(clock());
    for (const p of pools) p?.advance(now);
  };
  book.onChange((t) => {
    // The old prices' pools settle up to now; the new ones start now, with the requests in flight.
    const now = microseconds(clock());
    for (let i = 0; i < pools.length; i++) {
      const p = pools[i];
      if (p === undefined) continue;
      p.finish(now);
      const match = table.rules[i]!.match;
      poolTotals.set(match, (poolTotals.get(match) ?? 0n) + p.total());
    }
    startPools(t, now);
    for (const [key, f] of flights) {
      f.pool = book.pricesOf(f.model).pool;
      pools[f.pool]?.change(now, { key, tenant: f.tenant, model: f.model }, f.count);
    }
  });

  const tenantOf = (t: string | undefined): string => (options.tenants ? (t ?? '') : '');
  const chargeback: Chargeback = {
    started(raw) {
      const tenant = tenantOf(raw.tenant);
      const key = keyOf(tenant, raw.model);
      let f = flights.get(key);
      if (f === undefined) {
        f = { model: raw.model, tenant, count: 0, pool: book.pricesOf(raw.model).pool };
        flights.set(key, f);
      }
      f.count++;
      pools[f.pool]?.change(microseconds(clock()), { key, tenant, model: raw.model }, 1);
    },
    finished(sample, raw) {
      const key = keyOf(tenantOf(raw.tenant), raw.model);
      const f = flights.get(key);
      if (f !== undefined) {
        pools[f.pool]?.change(microseconds(clock()), { key, tenant: f.tenant, model: f.model }, -1);
        if (--f.count <= 0) flights.delete(key);
      }
      const rates = book.pricesOf(raw.model).perMillion;
      if (rates === undefined) return;
      const tenant = options.tenants ? (sample.tenant ?? '') : '';
      const k = keyOf(tenant, sample.model);
      let e = tokenSums.get(k);
      if (e === undefined) {
        e = { tenant, model: sample.model, sums: { prompt: 0n, cached_prompt: 0n, completion: 0n, reasoning: 0n } };
        tokenSums.set(k, e);
      }
      const n = tokenKinds(sample);
      for (const kind of TOKEN_KINDS) if (n[kind] > 0) e.sums[kind] += BigInt(n[kind]) * rates[kind];
    },
    costByTenant() {
      advanceAll();
      const out = new Map<string, bigint>();
      const add = (t: string, v: bigint): void => void out.set(t, (out.get(t) ?? 0n) + v);
      for (const e of tokenSums.values()) for (const kind of TOKEN_KINDS) add(e.tenant, e.sums[kind] / 1_000_000n);
      for (const h of hours.values()) add(h.tenant, h.nanos);
      return out;
    },
    currency: () => table.currency,
  };

  // The series: (tenant, model, kind) -> nano-units, read at the scrape as the render goes
  // (tenants x models x 5 at the caps: never all in one piece of a render).
  function* series(): Generator<{ tenant: string; model: string; kind: string; nanos: bigint }> {
    advanceAll();
    for (const e of tokenSums.values()) for (const kind of TOKEN_KINDS) yield { tenant: e.tenant, model: e.model, kind, nanos: e.sums[kind] / 1_000_000n };
    for (const h of hours.values()) yield { tenant: h.tenant, model: h.model, kind: 'hour', nanos: h.nanos };
  }
  if (options.tenants) {
    registerBigFamily(options.registry, 'infermeter_tenant_cost_nanos_total', 'counter', TENANT_HELP, function* () {
      for (const s of series()) yield { labels: { tenant: s.tenant, model_name: s.model, kind: s.kind }, value: s.nanos };
    });
  }
  registerBigFamily(options.registry, 'infermeter_cost_nanos_total', 'counter', MODEL_HELP, function* () {
    // The sum of the tenants' series (idle included), so that the two families agree to the
    // nano-unit; summed in slices, the loop given back between them.
    const byModel = new Map<string, { model: string; kind: string; nanos: bigint }>();
    let read = 0;
    for (const s of series()) {
      const k = keyOf(s.kind, s.model);
      const m = byModel.get(k);
      if (m === undefined) byModel.set(k, { model: s.model, kind: s.kind, nanos: s.nanos });
      else m.nanos += s.nanos;
      if (++read % SUM_SLICE === 0) yield PAUSE;
    }
    for (const m of byModel.values()) yield { labels: { model_name: m.model, kind: m.kind }, value: m.nanos };
  });
  registerBigFamily(options.registry, 'infermeter_pool_cost_nanos_total', 'counter', POOL_HELP, () => {
    advanceAll();
    const totals = new Map(poolTotals);
    table.rules.forEach((r, i) => {
      const p = pools[i];
      if (p !== undefined) totals.set(r.match, (totals.get(r.match) ?? 0n) + p.total());
    });
    return [...totals].map(([pool, nanos]) => ({ labels: { pool }, value: nanos }));
  });
  registerBigFamily(options.registry, 'infermeter_prices_info', 'gauge', INFO_HELP, () => [
    { labels: { version: table.version, currency: table.currency }, value: 1n },
  ]);
  return chargeback;
}

const TENANT_HELP =
  'Cost of inference per tenant and model in nano-units of the prices file currency (INFERMETER_PRICES_FILE), by kind: prompt (uncached prompt tokens), cached_prompt, completion (non-reasoning), reasoning, hour (the share of the pool per_hour price; tenant="idle" the unoccupied share).';
const MODEL_HELP =
  'Cost of inference per model in nano-units of the prices file currency, by kind: the sum of infermeter_tenant_cost_nanos_total over tenants, idle included.';
const POOL_HELP =
  'Cost of each pool (a per_hour entry of the prices file, by its match glob) since its prices came into use, in nano-units: idle plus the tenants shares, settled each minute.';
const INFO_HELP = 'The prices in use (INFERMETER_PRICES_FILE): their version and currency.';

/** A value of a family whose values are BigInts. */
interface BigValue {
  readonly labels: Record<string, string>;
  readonly value: bigint;
}
/** Among a family's values: where its render may give the loop back (a long sum goes on after it). */
const PAUSE = undefined;
/** Series summed between two pauses. */
const SUM_SLICE = 2048;

/**
 * A family whose values are BigInts, written exactly (a float64 is exact only to 2^53
 * nano-units); rendered in parts as its values are read (families.ts's PART_CHARS).
 */
function registerBigFamily(registry: Registry, name: string, type: 'counter' | 'gauge', help: string, collect: () => Iterable<BigValue | typeof PAUSE>): void {
  function* renderParts(): Generator<string> {
    let out = header(name, help, type);
    for (const v of collect()) {
      if (v !== PAUSE) {
        out += `${name}{${formatLabels(v.labels)}} ${v.value.toString()}\n`;
        if (out.length < PART_CHARS) continue;
      }
      yield out;
      out = '';
    }
    if (out !== '') yield out;
  }
  const family = {
    name,
    help,
    type,
    renderText: () => Array.from(renderParts()).join(''),
    renderParts,
    get: () => {
      const values: Array<{ labels: Record<string, string>; value: number }> = [];
      for (const v of collect()) if (v !== PAUSE) values.push({ labels: v.labels, value: Number(v.value) });
      return { name, help, type, values, aggregator: 'sum' };
    },
  };
  registry.registerMetric(family as never);
}
