// One pool's cost (a per_hour entry of the prices) split between the tenants that occupied it.
// Time is whole microseconds of the clock. The pool costs `perHour` from the moment its prices
// came into use, whether used or not. It is settled in intervals (INTERVAL_US, aligned to the
// pool's start; a price change ends one early): an interval's cost is the pool's cumulative cost
// at its end minus at its start, each floored to the nano-unit, so that the intervals add up to
// the pool's cost over any run of them exactly. Within an interval:
// - the share of the interval's time with no request in flight is `idle` (never spread);
// - the rest (the busy time's cost) goes to the (tenant, model) pairs in proportion to their
//   request-seconds in flight in the interval: two concurrent requests split the time they held
//   the pool together, one alone pays the whole of its time. The pool serves one request or
//   many in the same time (continuous batching), so concurrency divides the busy time, it does
//   not multiply the pool.
// The floors' remainders go one nano-unit each to the largest fractions, ties in label order:
// idle + shares == the interval's cost, to the nano-unit, deterministically.
// A start or an end costs O(1) (its pair's time and the busy time brought up to date); the pairs
// in flight are brought up to date once per interval, when it is settled.

const INTERVAL_US = 60_000_000;
const US_PER_HOUR = 3_600_000_000n;

/** The pairs' (and idle's) settled nano-units, by label key. */
export type Settled = Map<string, { readonly tenant: string; readonly model: string; nanos: bigint }>;

/** The labels a tenant and model as sent are counted under, asked at settlement (a tenant's first request has ended by then). */
export type Labels = (tenant: string, model: string) => { readonly tenant: string; readonly model: string };

/** Requests in flight of one tenant and model as sent (`key` theirs). */
interface InFlight {
  readonly key: string;
  readonly tenant: string;
  readonly model: string;
  readonly count: number;
}

export interface PoolSplit {
  /** `delta` requests of a tenant and model as sent (`key` theirs) start (+) or end (-) at `nowUs`. */
  change(nowUs: number, pair: Omit<InFlight, 'count'>, delta: number): void;
  /** Settles every interval that ended by `nowUs`. */
  advance(nowUs: number): void;
  /** Settles the open interval at `nowUs` (a price change): nothing of it is left unsettled. */
  finish(nowUs: number): void;
  /** The pool's cost so far (the sum of its settled intervals). */
  total(): bigint;
}

interface Pair {
  readonly tenant: string;
  readonly model: string;
  count: number;
  /** Time its `us` is brought up to. */
  last: number;
  /** Request-microseconds in the open interval. */
  us: number;
}

const IDLE_TENANT = 'idle';
/** Pairs as sent with nothing in flight kept in one interval; past it, an ended pair's time is kept under its labels at once (bounded). */
const MAX_RAW_PAIRS = 10_000;

const labelKey = (tenant: string, model: string): string => `${tenant.length}:${tenant}${model}`;

export function createPoolSplit(perHour: bigint, startUs: number, idleModel: string, settled: Settled, labels: Labels, intervalUs = INTERVAL_US): PoolSplit {
  let intervalStart = startUs;
  let running = 0;
  let busyUs = 0;
  let busyLast = startUs;
  let total = 0n;
  const pairs = new Map<string, Pair>();
  // Request-microseconds of ended pairs folded under their labels (past MAX_RAW_PAIRS).
  const folded = new Map<string, { tenant: string; model: string; us: number }>();
  const cumulative = (us: number): bigint => (perHour * BigInt(us - startUs)) / US_PER_HOUR;
  const accrueBusy = (t: number): void => {
    if (running > 0) busyUs += t - busyLast;
    busyLast = t;
  };
  const accrue = (p: Pair, t: number): void => {
    p.us += p.count * (t - p.last);
    p.last = t;
  };
  const fold = (into: Map<string, { tenant: string; model: string; us: number }>, tenant: string, model: string, us: number): void => {
    const l = labels(tenant, model);
    const key = labelKey(l.tenant, l.model);
    const e = into.get(key);
    if (e === undefined) into.set(key, { tenant: l.tenant, model: l.model, us });
    else e.us += us;
  };
  const add = (tenant: string, model: string, nanos: bigint): void => {
    if (nanos === 0n) return;
    const key = labelKey(tenant, model);
    const s = settled.get(key);
    if (s === undefined) settled.set(key, { tenant, model, nanos });
    else s.nanos += nanos;
  };
  const settle = (end: number): void => {
    accrueBusy(end);
    const labelled = new Map(folded);
    folded.clear();
    for (const [key, p] of pairs) {
      accrue(p, end);
      if (p.us > 0) fold(labelled, p.tenant, p.model, p.us);
      p.us = 0;
      if (p.count === 0) pairs.delete(key);
    }
    const cost = cumulative(end) - cumulative(intervalStart);
    const length = BigInt(end - intervalStart);
    total += cost;
    const shares = [...labelled.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
    const totalUs = BigInt(shares.reduce((s, r) => s + r.us, 0));
    const busyCost = totalUs === 0n || length === 0n ? 0n : (cost * BigInt(busyUs)) / length;
    add(IDLE_TENANT, idleModel, cost - busyCost);
    if (totalUs > 0n) {
      const parts = shares.map((r) => {
        const numerator = busyCost * BigInt(r.us);
        return { r, nanos: numerator / totalUs, rest: numerator % totalUs };
      });
      let left = busyCost - parts.reduce((s, x) => s + x.nanos, 0n);
      // Largest remainders first; equal ones in label order (the sort is stable).
      const order = [...parts].sort((a, b) => (a.rest === b.rest ? 0 : a.rest > b.rest ? -1 : 1));
      for (let i = 0; left > 0n; i++, left--) order[i % order.length]!.nanos++;
      for (const x of parts) add(x.r.tenant, x.r.model, x.nanos);
    }
    busyUs = 0;
    intervalStart = end;
  };
  const advance = (nowUs: number): void => {
    for (let next = intervalStart + intervalUs; next <= nowUs; next = intervalStart + intervalUs) {
      // Nothing ran since the interval began and nothing runs: the whole quiet stretch is one idle settlement.
      if (running === 0 && pairs.size === 0 && folded.size === 0) settle(intervalStart + Math.floor((nowUs - intervalStart) / intervalUs) * intervalUs);
      else settle(next);
    }
  };
  return {
    change(nowUs, f, delta) {
      advance(nowUs);
      accrueBusy(nowUs);
      let p = pairs.get(f.key);
      if (p === undefined) {
        if (delta <= 0) return; // an end whose start this pool never saw (its prices came after)
        p = { tenant: f.tenant, model: f.model, count: 0, last: nowUs, us: 0 };
        pairs.set(f.key, p);
      }
      accrue(p, nowUs);
      const moved = Math.max(delta, -p.count);
      p.count += moved;
      running += moved;
      if (p.count === 0 && pairs.size > MAX_RAW_PAIRS) {
        fold(folded, p.tenant, p.model, p.us);
        pairs.delete(f.key);
      }
    },
    advance,
    finish(nowUs) {
      advance(nowUs);
      if (nowUs > intervalStart) settle(nowUs);
    },
    total: () => total,
  };
}
