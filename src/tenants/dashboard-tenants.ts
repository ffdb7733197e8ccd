// The live dashboard's tenant table (per-tenant metering, INFERMETER_TENANT): per tenant, the
// requests that finished in the quantile window (the last minute), how many failed, their prompt
// and generated tokens, and the TTFT p50 and p99 of the first tokens in it. Filled by an
// observer of the recorder (O(1) per event), read when the page asks. Tenants are the recorder's
// bounded labels (at most INFERMETER_MAX_TENANTS plus the aliased ones, `none` and `other`); a
// tenant with nothing in the window gives its memory back.
import type { SampleObserver } from '../metrics/state/recorder.ts';
import { createQuantileWindow, type QuantileWindow, type QuantileWindowOptions } from '../metrics/windows/quantile-window.ts';
import { createSlotCounts, type SlotCounts } from '../metrics/windows/slot-counts.ts';

export interface TenantRow {
  readonly tenant: string;
  /** Finished in the window, and of those failed. */
  readonly requests: number;
  readonly failed: number;
  readonly promptTokens: number;
  readonly generationTokens: number;
  /** Seconds; null without a first token in the window. */
  readonly ttftP50: number | null;
  readonly ttftP99: number | null;
}

export interface DashboardTenants {
  /** The table at nowMs, busiest tenant first. */
  rows(nowMs: number): TenantRow[];
}

// Counted per slot: requests, failed, prompt tokens, generated tokens.
const FIELDS = 4;

interface TenantWindow {
  readonly ttft: QuantileWindow;
  readonly counts: SlotCounts;
}

export function createDashboardTenants(
  metrics: { addObserver(observer: SampleObserver): void },
  clock: () => number,
  options: Required<QuantileWindowOptions>,
): DashboardTenants {
  const tenants = new Map<string, TenantWindow>();
  const windowOf = (tenant: string): TenantWindow => {
    let w = tenants.get(tenant);
    if (w === undefined) {
      w = { ttft: createQuantileWindow(options), counts: createSlotCounts(FIELDS, options) };
      tenants.set(tenant, w);
    }
    return w;
  };
  metrics.addObserver({
    firstOutput(info, ttft) {
      if (info.tenant !== undefined && ttft !== undefined) windowOf(info.tenant).ttft.add(clock(), ttft);
    },
    finished(sample) {
      if (sample.tenant === undefined) return;
      const { counts } = windowOf(sample.tenant);
      const at = counts.at(clock());
      counts.counts[at]!++;
      if (sample.outcome === 'failed') counts.counts[at + 1]!++;
      counts.counts[at + 2]! += sample.promptTokens ?? 0;
      counts.counts[at + 3]! += sample.completionTokens ?? 0;
    },
  });
  const orNull = (v: number | undefined): number | null => (v === undefined || Number.isNaN(v) ? null : v);
  return {
    rows(nowMs) {
      const rows: TenantRow[] = [];
      for (const [tenant, w] of tenants) {
        const sums = w.counts.sums(nowMs);
        const [p50, p99] = w.ttft.quantiles(nowMs, [0.5, 0.99]);
        if (sums[0] === 0 && w.ttft.weight(nowMs) === 0) {
          tenants.delete(tenant); // nothing left in the window
          continue;
        }
        rows.push({
          tenant,
          requests: sums[0]!,
          failed: sums[1]!,
          promptTokens: sums[2]!,
          generationTokens: sums[3]!,
          ttftP50: orNull(p50),
          ttftP99: orNull(p99),
        });
      }
      return rows.sort((a, b) => b.requests - a.requests || (a.tenant < b.tenant ? -1 : a.tenant > b.tenant ? 1 : 0));
    },
  };
}
