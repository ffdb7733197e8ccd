// Histogram buckets: the table type every histogram family's defaults are written in, the
// INFERMETER_BUCKETS_<FAMILY> overrides and their parser, and the defaults of infermeter's own
// histogram families. A dialect's families have their defaults in the dialect's own module
// (MINDIE_BUCKETS in dialects/mindie.ts, ...), listed with it in the dialect table
// (dialects/index.ts), which names every family that has an override.

/** Default bucket boundaries by family name. */
export type BucketTable = Readonly<Record<string, readonly number[]>>;

/** Overrides by family (INFERMETER_BUCKETS_<FAMILY>); families not named keep their defaults. */
export type BucketOverrides = BucketTable;

/** infermeter's own histogram families (not a dialect's). */
export const OWN_BUCKETS = {
  // Per-tenant metering (seconds): few buckets, as each tenant and model has its own series set;
  // enough for an SLO's threshold (TTFT under 0.5 s, say) and a coarse latency picture.
  infermeter_tenant_time_to_first_token_seconds: [0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  infermeter_tenant_e2e_request_latency_seconds: [0.5, 1, 2.5, 5, 10, 30, 60, 120],
  // The proxy's own time per write (seconds): from 10 µs, where a loopback hop's floor lies, to
  // 100 ms, a loop that was held up.
  infermeter_proxy_overhead_seconds: [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
  // A stream's longest silence (seconds): from a decode step's pace to the minutes an agent's
  // client gives up after.
  infermeter_stream_longest_gap_seconds: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
  // The time a client refused writes (seconds): 0 for most, a slow reader's pauses above.
  infermeter_client_backpressure_seconds: [0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60],
  // TTFT by prompt band (INFERMETER_PROMPT_BANDS): few buckets, five bands per model.
  infermeter_time_to_first_token_by_prompt_band_seconds: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
} as const satisfies BucketTable;

/** A family's buckets: its override, else its default in `defaults` (the table it is written in). */
export function bucketsFor<T extends BucketTable>(defaults: T, family: keyof T & string, overrides: BucketOverrides | undefined): readonly number[] {
  return overrides?.[family] ?? defaults[family]!;
}

/** The environment variable that overrides a family's buckets (`:` of vLLM's names as `_`). */
export function bucketVariable(family: string): string {
  return `INFERMETER_BUCKETS_${family.toUpperCase().replace(':', '_')}`;
}

/** Parses "0.1,0.5,1" into strictly increasing finite positive numbers; undefined when invalid. */
export function parseBuckets(text: string): number[] | undefined {
  const parts = text.split(',').map((p) => p.trim());
  if (parts.length === 0 || parts.length > 100) return undefined;
  const values: number[] = [];
  for (const part of parts) {
    if (!/^(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/.test(part)) return undefined;
    const value = Number(part);
    if (!Number.isFinite(value) || value <= 0) return undefined;
    if (values.length > 0 && value <= values[values.length - 1]!) return undefined;
    values.push(value);
  }
  return values;
}
