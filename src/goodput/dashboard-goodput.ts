// The live dashboard's goodput (INFERMETER_SLO): per model and per tenant, the verdicts of the
// requests that finished in the quantile window (the last minute, 5 s slots) and their
// attainment, good / (good + missed + failed), shown beside TTFT and TPOT in the model table and
// in the tenant table. Filled by goodput's own listener (O(1) per verdict), read when the page
// asks; the keys are the recorder's bounded labels, and one with nothing in the window gives
// its memory back.
import { SLO_KEYS } from './slo-config.ts';
import type { Goodput } from './goodput-families.ts';
import type { QuantileWindowOptions } from '../metrics/windows/quantile-window.ts';
import { createSlotCounts, type SlotCounts } from '../metrics/windows/slot-counts.ts';

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

export function createDashboardGoodput(goodput: Goodput, clock: () => number, options: Required<QuantileWindowOptions>): DashboardGoodput {
  const models = new Map<string, SlotCounts>();
  const tenants = new Map<string, SlotCounts>();
  const count = (map: Map<string, SlotCounts>, key: string, field: number, nowMs: number): void => {
    let s = map.get(key);
    if (s === undefined) map.set(key, (s = createSlotCounts(FIELDS, options)));
    s.counts[s.at(nowMs) + field]!++;
  };
  goodput.onJudged((sample, judgement) => {
    const now = clock();
    const field = INDEX[judgement.verdict];
    count(models, sample.model, field, now);
    if (sample.tenant !== undefined) count(tenants, sample.tenant, field, now);
  });
  const rows = (map: Map<string, SlotCounts>, nowMs: number): Record<string, GoodputRow> => {
    const out: Record<string, GoodputRow> = {};
    for (const [key, s] of map) {
      const [good, missed, failed, cancelled] = s.sums(nowMs) as [number, number, number, number];
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
