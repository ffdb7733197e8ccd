// The live dashboard's goodput (INFERMETER_SLO): per model and per tenant, the verdicts of the
// requests that finished in the quantile window (the last minute, 5 s slots) and their
// attainment, good / (good + missed + failed), shown beside TTFT and TPOT in the model table and
// in the tenant table. Filled by goodput's own listener (O(1) per verdict), read when the page
// asks; the keys are the recorder's bounded labels, and one with nothing in the window gives
// its memory back.
import { SLO_KEYS } from './slo-config.ts';
import type { Goodput } from './goodput-families.ts';
import type { QuantileWindowOptions } from '../metrics/windows/quantile-window.ts';

interface GoodputRow {
  /** Finished in the window, by verdict. */
  readonly good: number;
  readonly missed: number;
  readonly failed: number;
  readonly cancelled: number;
  /** good / (good + missed + failed); null when none of those finished in the window. */
  readonly attainment: number | null;
}

export interface DashboardGoodputData {
  /** The SLO classes in use, as `name: ttft:500 tpot:50 (model glob, tenant glob)`. */
  readonly slo: string[];
  readonly models: Record<string, GoodputRow>;
  readonly tenants: Record<string, GoodputRow>;
}

export interface DashboardGoodput {
  data(nowMs: number): DashboardGoodputData;
}

const FIELDS = 4; // good, missed, failed, cancelled
const INDEX = { good: 0, missed: 1, failed: 2, cancelled: 3 } as const;

interface Slots {
  readonly counts: Float64Array;
  readonly stamps: Float64Array;
}

export function createDashboardGoodput(goodput: Goodput, clock: () => number, options: Required<QuantileWindowOptions>): DashboardGoodput {
  const slotMs = options.slotSeconds * 1000;
  const slots = Math.max(1, Math.ceil((options.windowSeconds * 1000) / slotMs));
  const models = new Map<string, Slots>();
  const tenants = new Map<string, Slots>();
  const count = (map: Map<string, Slots>, key: string, field: number, slot: number): void => {
    let s = map.get(key);
    if (s === undefined) map.set(key, (s = { counts: new Float64Array(slots * FIELDS), stamps: new Float64Array(slots).fill(Number.NaN) }));
    const position = ((slot % slots) + slots) % slots;
    if (s.stamps[position] !== slot) {
      s.stamps[position] = slot;
      s.counts.fill(0, position * FIELDS, position * FIELDS + FIELDS);
    }
    s.counts[position * FIELDS + field]!++;
  };
  goodput.onJudged((sample, judgement) => {
    const slot = Math.floor(clock() / slotMs);
    const field = INDEX[judgement.verdict];
    count(models, sample.model, field, slot);
    if (sample.tenant !== undefined) count(tenants, sample.tenant, field, slot);
  });
  const rows = (map: Map<string, Slots>, nowMs: number): Record<string, GoodputRow> => {
    const current = Math.floor(nowMs / slotMs);
    const out: Record<string, GoodputRow> = {};
    for (const [key, s] of map) {
      const sums = [0, 0, 0, 0];
      for (let p = 0; p < slots; p++) {
        const stamp = s.stamps[p]!;
        if (!(stamp > current - slots && stamp <= current)) continue;
        for (let f = 0; f < FIELDS; f++) sums[f]! += s.counts[p * FIELDS + f]!;
      }
      const [good, missed, failed, cancelled] = sums as [number, number, number, number];
      if (good + missed + failed + cancelled === 0) {
        map.delete(key); // nothing left in the window
        continue;
      }
      const judged = good + missed + failed;
      out[key] = { good, missed, failed, cancelled, attainment: judged === 0 ? null : good / judged };
    }
    return out;
  };
  return {
    data(nowMs) {
      const slo = goodput.policy.classes().map((c) => {
        const targets =
          c.targets === undefined
            ? 'off'
            : SLO_KEYS.filter((k) => c.targets![k] !== undefined)
                .map((k) => `${k}:${c.targets![k]}`)
                .join(' ');
        return `${c.name}: ${targets}${c.model === '*' && c.tenant === '*' ? '' : ` (model ${c.model}, tenant ${c.tenant})`}`;
      });
      return { slo, models: rows(models, nowMs), tenants: rows(tenants, nowMs) };
    },
  };
}
