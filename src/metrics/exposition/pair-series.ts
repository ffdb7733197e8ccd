// The per-tenant families' series: one per (tenant, model) pair, read as the render goes.
import type { MetricValue } from './families.ts';

/**
 * A derived family's collect over (tenant, model) pairs: read as the render goes (tenants x
 * models series at the caps), never built whole within one piece.
 */
export function pairSeries<P extends { readonly tenant: string; readonly model: string }>(
  pairs: ReadonlyMap<string, P>,
  value: (p: P) => number,
): () => Generator<MetricValue> {
  return function* () {
    for (const p of pairs.values()) yield { value: value(p), labels: { tenant: p.tenant, model_name: p.model } };
  };
}
