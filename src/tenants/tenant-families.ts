// Per-tenant metering (INFERMETER_TENANT): requests by outcome, tokens, TTFT and e2e latency per
// tenant and model, for chargeback, quotas and per-tenant SLOs. Fed by the recorder's events,
// whose tenant and model_name are already bounded (the tenant guard: at most
// INFERMETER_MAX_TENANTS values besides the aliased ones, `none` and `other`; the model guard
// likewise), so the series are at most tenants x models x (7 counters + 2 histograms; the two
// counters of streams without usage only for the pairs that had one).
import type { Registry } from '@prometheus-io/client';
import type { Outcome, RequestInfo, RequestSample } from '../measure/sample.ts';
import { bucketsFor, OWN_BUCKETS, type BucketOverrides } from '../metrics/exposition/buckets.ts';
import { registerDerived, registerLabelledHistogram, type MetricValue } from '../metrics/exposition/families.ts';
import { pairSeries } from '../metrics/exposition/pair-series.ts';
import type { SampleObserver } from '../metrics/state/recorder.ts';

interface TenantModel {
  readonly tenant: string;
  readonly model: string;
  readonly outcomes: Record<Outcome, number>;
  promptTokens: number;
  generationTokens: number;
  /** Streams that succeeded without usage (counted 0 above), and their token-carrying events. */
  withoutUsage: number;
  withoutUsageEvents: number;
}

const OUTCOMES: readonly Outcome[] = ['success', 'failed', 'cancelled'];

export function createTenantFamilies(registry: Registry, buckets: BucketOverrides | undefined): SampleObserver {
  // Keyed by tenant and model, length-prefixed so that no two pairs share a key.
  const pairs = new Map<string, TenantModel>();
  const pairOf = (tenant: string, model: string): TenantModel => {
    const key = `${tenant.length}:${tenant}${model}`;
    let p = pairs.get(key);
    if (p === undefined) {
      // Every outcome from 0: a failure ratio has a denominator before the first failure.
      p = { tenant, model, outcomes: { success: 0, failed: 0, cancelled: 0 }, promptTokens: 0, generationTokens: 0, withoutUsage: 0, withoutUsageEvents: 0 };
      pairs.set(key, p);
    }
    return p;
  };
  registerDerived(registry, {
    name: 'infermeter_tenant_requests_total',
    help: 'Finished inference requests per tenant (INFERMETER_TENANT) and model, by outcome (success, failed, cancelled).',
    type: 'counter',
    *collect() {
      for (const p of pairs.values())
        for (const outcome of OUTCOMES) yield { value: p.outcomes[outcome], labels: { tenant: p.tenant, model_name: p.model, outcome } };
    },
  });
  registerDerived(registry, {
    name: 'infermeter_tenant_prompt_tokens_total',
    help: 'Prompt tokens of finished inference requests per tenant and model, as the upstream reported them.',
    type: 'counter',
    collect: pairSeries(pairs, (p) => p.promptTokens),
  });
  registerDerived(registry, {
    name: 'infermeter_tenant_generation_tokens_total',
    help: 'Generated tokens of finished inference requests per tenant and model (the upstream usage, or the tokens delivered by a stream cut short).',
    type: 'counter',
    collect: pairSeries(pairs, (p) => p.generationTokens),
  });
  // Only the pairs that had a stream without usage: two series more where it happens, not on every pair.
  const withoutUsage = (value: (p: TenantModel) => number) =>
    function* (): Generator<MetricValue> {
      for (const p of pairs.values()) if (p.withoutUsage > 0) yield { value: value(p), labels: { tenant: p.tenant, model_name: p.model } };
    };
  registerDerived(registry, {
    name: 'infermeter_tenant_streams_without_usage_total',
    help: "Streamed inference requests per tenant and model that succeeded without a usage report: their tokens count as 0 in the token families (the spec's fallback).",
    type: 'counter',
    collect: withoutUsage((p) => p.withoutUsage),
  });
  registerDerived(registry, {
    name: 'infermeter_tenant_streams_without_usage_token_events_total',
    help: 'Token-carrying events of those streams per tenant and model: the tokens they delivered, as infermeter counts them (one per event).',
    type: 'counter',
    collect: withoutUsage((p) => p.withoutUsageEvents),
  });
  const labelNames = ['tenant', 'model_name'];
  const ttft = registerLabelledHistogram(registry, {
    name: 'infermeter_tenant_time_to_first_token_seconds',
    help: 'Time to first token of streamed inference requests per tenant and model, in seconds (few buckets: one series set per tenant and model).',
    buckets: bucketsFor(OWN_BUCKETS, 'infermeter_tenant_time_to_first_token_seconds', buckets),
    labelNames,
  });
  const e2e = registerLabelledHistogram(registry, {
    name: 'infermeter_tenant_e2e_request_latency_seconds',
    help: 'End-to-end latency of successful inference requests per tenant and model, in seconds (few buckets).',
    buckets: bucketsFor(OWN_BUCKETS, 'infermeter_tenant_e2e_request_latency_seconds', buckets),
    labelNames,
  });
  const labels: [string, string] = ['', ''];
  const labelsOf = (info: RequestInfo & { tenant: string }): [string, string] => {
    labels[0] = info.tenant;
    labels[1] = info.model;
    return labels;
  };
  return {
    firstOutput(info, seconds) {
      if (info.tenant !== undefined && seconds !== undefined) ttft.observe(labelsOf(info as RequestInfo & { tenant: string }), seconds, 1, info.requestId);
    },
    finished(sample: RequestSample) {
      const { tenant } = sample;
      if (tenant === undefined) return;
      const p = pairOf(tenant, sample.model);
      p.outcomes[sample.outcome]++;
      if (sample.promptTokens !== undefined) p.promptTokens += sample.promptTokens;
      if (sample.completionTokens !== undefined) p.generationTokens += sample.completionTokens;
      if (sample.usageSource === 'fallback') {
        p.withoutUsage++;
        p.withoutUsageEvents += sample.tokenEvents;
      }
      if (sample.e2e !== undefined) e2e.observe([tenant, sample.model], sample.e2e, 1, sample.requestId);
    },
  };
}
