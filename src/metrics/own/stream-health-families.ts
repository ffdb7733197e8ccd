// Stream health: the questions asked before an agent times out. How long was a stream's
// longest silence (infermeter_stream_longest_gap_seconds), how many streams went
// INFERMETER_STALL_SECONDS without a byte (infermeter_stream_stalls_total), and how long did the
// client itself refuse to read (infermeter_client_backpressure_seconds): a slow reader is not
// the engine's latency, and a silence spent waiting on it is not the stream's. Per model and,
// with per-tenant metering, the stalls and back-pressure per tenant and model. Observed when the
// request finishes, from its sample (the data plane keeps a few numbers on the timer, nothing
// per chunk).
import type { Registry } from '@prometheus-io/client';
import type { RequestSample } from '../../measure/sample.ts';
import { bucketsFor, OWN_BUCKETS, type BucketOverrides } from '../exposition/buckets.ts';
import { registerDerived, registerHistogram, type MetricValue } from '../exposition/families.ts';
import { pairSeries } from '../exposition/pair-series.ts';
import type { SampleObserver } from '../state/recorder.ts';

export interface StreamHealthOptions {
  /** A stream whose longest silence reached this many seconds stalled (INFERMETER_STALL_SECONDS). */
  readonly stallSeconds: number;
  /** Per-tenant metering is on: the tenant families are registered too. */
  readonly tenants: boolean;
}

export function createStreamHealthFamilies(registry: Registry, buckets: BucketOverrides | undefined, options: StreamHealthOptions): SampleObserver {
  const gap = registerHistogram(registry, {
    name: 'infermeter_stream_longest_gap_seconds',
    help: "Each streamed inference response's longest silence, in seconds: the longest time between two batches relayed to the client, less any time the client refused writes meanwhile; for a stream cut short, the silence before its end too. Observed when the request finishes.",
    buckets: bucketsFor(OWN_BUCKETS, 'infermeter_stream_longest_gap_seconds', buckets),
    labelName: 'model_name',
  });
  const backpressure = registerHistogram(registry, {
    name: 'infermeter_client_backpressure_seconds',
    help: "Per inference request, the seconds the client's socket refused writes (the upstream paused until it drained): the client's slowness, not the engine's. Observed when the request finishes.",
    buckets: bucketsFor(OWN_BUCKETS, 'infermeter_client_backpressure_seconds', buckets),
    labelName: 'model_name',
  });
  const stalls = new Map<string, number>();
  registerDerived(registry, {
    name: 'infermeter_stream_stalls_total',
    help: `Streamed inference responses whose longest silence reached INFERMETER_STALL_SECONDS (${options.stallSeconds} s), counted when the request finishes.`,
    type: 'counter',
    collect: () => Array.from(stalls, ([model, value]): MetricValue => ({ value, labels: { model_name: model } })),
  });
  // (tenant, model) -> stalls and back-pressure seconds, with their labels.
  const perTenant = new Map<string, { tenant: string; model: string; stalls: number; backpressure: number }>();
  if (options.tenants) {
    registerDerived(registry, {
      name: 'infermeter_tenant_stream_stalls_total',
      help: 'infermeter_stream_stalls_total per tenant (INFERMETER_TENANT) and model.',
      type: 'counter',
      collect: pairSeries(perTenant, (p) => p.stalls),
    });
    registerDerived(registry, {
      name: 'infermeter_tenant_client_backpressure_seconds_total',
      help: "Seconds the clients' sockets refused writes, per tenant (INFERMETER_TENANT) and model: the sum of infermeter_client_backpressure_seconds.",
      type: 'counter',
      collect: pairSeries(perTenant, (p) => p.backpressure),
    });
  }
  const stallMs = options.stallSeconds * 1000;
  return {
    finished(sample: RequestSample) {
      const { model, longestGap } = sample;
      const blocked = sample.backpressure ?? 0;
      backpressure.observe(model, blocked, 1, sample.requestId);
      // Compared in ms, as the timer measured it: 1.0 s is a stall of 1 s.
      const stalled = longestGap !== undefined && Math.round(longestGap * 1e6) / 1e3 >= stallMs;
      if (longestGap !== undefined) gap.observe(model, longestGap, 1, sample.requestId);
      if (stalled) stalls.set(model, (stalls.get(model) ?? 0) + 1);
      else if (longestGap !== undefined && !stalls.has(model)) stalls.set(model, 0);
      const { tenant } = sample;
      if (!options.tenants || tenant === undefined) return;
      // Length-prefixed: no two pairs share a key.
      const key = `${tenant.length}:${tenant}${model}`;
      let p = perTenant.get(key);
      if (p === undefined) perTenant.set(key, (p = { tenant, model, stalls: 0, backpressure: 0 }));
      if (stalled) p.stalls++;
      p.backpressure += blocked;
    },
  };
}
