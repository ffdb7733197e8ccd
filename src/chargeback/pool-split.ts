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

const INTERVAL_US = 60_000_000;
const US_PER_HOUR = 3_600_000_000n;

/** The pairs' (and idle's) settled nano-units, by label key. */
export type Settled = Map<string, { readonly tenant: string; readonly model: string; nanos: bigint }>;

export interface PoolSplit {
  /** Runs the pool's time to `nowUs`, settling every interval that ended; `inFlight` what ran meanwhile. */
  advance(nowUs: number, inFlight: Iterable<InFlight>): void;
  /** Settles the open interval at `nowUs` (a price change): nothing of it is left unsettled. */
  finish(nowUs: number, inFlight: Iterable<InFlight>): void;
  /** The pool's cost so far (the sum of its settled intervals). */
  total(): bigint;
}

/** Requests in flight on the pool of one tenant and model as sent (`key` theirs), as they are at the time advanced to. */
export interface InFlight {
  readonly key: string;
  readonly tenant: string;
  readonly model: string;
  readonly count: number;
}

/** The labels a tenant and model as sent are counted under, asked at settlement (a tenant's first request has ended by then). */
export type Labels = (tenant: string, model: string) => { readonly tenant: string; readonly model: string };

/** Distinct pairs as sent kept in one interval; past it, a pair's time is kept under its labels at once (bounded). */
const MAX_RAW_PAIRS = 10_000;

const IDLE_TENANT = 'idle';

export function createPoolSplit(perHour: bigint, startUs: number, idleModel: string, settled: Settled, labels: Labels, intervalUs = INTERVAL_US): PoolSplit {
  let last = startUs;
  let intervalStart = startUs;
  let busyUs = 0;
  let total = 0n;
  const requestUs = new Map<string, { tenant: string; model: string; us: number }>();
  const cumulative = (us: number): bigint => (perHour * BigInt(us - startUs)) / US_PER_HOUR;
  const accrue = (to: number, inFlight: Iterable<InFlight>): void => {
    const dt = to - last;
    if (dt <= 0) return;
    last = to;
    let any = false;
    for (const f of inFlight) {
      if (f.count <= 0) continue;
      any = true;
      let { key, tenant, model } = f;
      if (!requestUs.has(key) && requestUs.size >= MAX_RAW_PAIRS) {
        ({ tenant, model } = labels(tenant, model));
        key = `=${tenant.length}:${tenant}${model}`;
      }
      const r = requestUs.get(key);
      if (r === undefined) requestUs.set(key, { tenant, model, us: f.count * dt });
      else r.us += f.count * dt;
    }
    if (any) busyUs += dt;
  };
  const add = (tenant: string, model: string, nanos: bigint): void => {
    if (nanos === 0n) return;
    const key = `${tenant.length}:${tenant}${model}`;
    const s = settled.get(key);
    if (s === undefined) settled.set(key, { tenant, model, nanos });
    else s.nanos += nanos;
  };
  const settle = (end: number): void => {
    const cost = cumulative(end) - cumulative(intervalStart);
    const length = BigInt(end - intervalStart);
    total += cost;
    let busyCost = length === 0n ? 0n : (cost * BigInt(busyUs)) / length;
    // The pairs as sent, under their labels now (several may share one).
    const labelled = new Map<string, { tenant: string; model: string; us: number }>();
    for (const r of requestUs.values()) {
      const l = labels(r.tenant, r.model);
      const key = `${l.tenant.length}:${l.tenant}${l.model}`;
      const e = labelled.get(key);
      if (e === undefined) labelled.set(key, { tenant: l.tenant, model: l.model, us: r.us });
      else e.us += r.us;
    }
    const pairs = [...labelled.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const totalUs = BigInt(pairs.reduce((s, [, r]) => s + r.us, 0));
    if (totalUs === 0n) busyCost = 0n;
    add(IDLE_TENANT, idleModel, cost - busyCost);
    if (totalUs > 0n) {
      const shares = pairs.map(([, r]) => {
        const numerator = busyCost * BigInt(r.us);
        return { r, nanos: numerator / totalUs, rest: numerator % totalUs };
      });
      let left = busyCost - shares.reduce((s, x) => s + x.nanos, 0n);
      // Largest remainders first; equal ones in label order (the sort is stable).
      const order = [...shares].sort((a, b) => (a.rest === b.rest ? 0 : a.rest > b.rest ? -1 : 1));
      for (let i = 0; left > 0n; i++, left--) order[i % order.length]!.nanos++;
      for (const s of shares) add(s.r.tenant, s.r.model, s.nanos);
    }
    requestUs.clear();
    busyUs = 0;
    intervalStart = end;
  };
  return {
    advance(nowUs, inFlight) {
      const flights = [...inFlight];
      for (let next = intervalStart + intervalUs; next <= nowUs; next = intervalStart + intervalUs) {
        // Nothing ran since the interval began and nothing runs: the whole quiet stretch is one idle settlement.
        if (requestUs.size === 0 && flights.every((f) => f.count <= 0)) {
          const end = intervalStart + Math.floor((nowUs - intervalStart) / intervalUs) * intervalUs;
          last = end;
          settle(end);
          continue;
        }
        accrue(next, flights);
        settle(next);
      }
      accrue(nowUs, flights);
    },
    finish(nowUs, inFlight) {
      accrue(nowUs, inFlight);
      if (nowUs > intervalStart) settle(nowUs);
    },
    total: () => total,
  };
}
