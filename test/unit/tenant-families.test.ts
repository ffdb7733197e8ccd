// The per-tenant counter families hold tenants × models series (10,000 at the default caps):
// each is read as the render goes, a part at a time, never built whole in one piece of a render
// (a whole build held the loop for 12 to 18 ms at the caps: bench/scrape-pieces.ts). The
// request counts, the stream health and the usage details; goodput's per tenant is built alike.
import { it } from 'node:test';
import { Registry } from '@prometheus-io/client';
import type { RequestSample } from '../../src/measure/sample.ts';
import type { Family } from '../../src/metrics/exposition/families.ts';
import { assertReadAsRendered } from '../helpers/read-as-rendered.ts';
import type { SampleObserver } from '../../src/metrics/state/recorder.ts';
import { createStreamHealthFamilies } from '../../src/metrics/own/stream-health-families.ts';
import { createUsageDetailFamilies } from '../../src/metrics/own/usage-detail-families.ts';
import { createTenantFamilies } from '../../src/tenants/tenant-families.ts';

const sample = (tenant: string, model: string): RequestSample =>
  ({
    tenant,
    model,
    outcome: 'success',
    promptTokens: 10,
    completionTokens: 4,
    usageSource: 'usage',
    tokenEvents: 4,
    e2e: 0.5,
    longestGap: 2,
    backpressure: 0.1,
    reasoningTokens: 2,
    cachedPromptTokens: 3,
    cacheWriteTokens: 1,
  }) as unknown as RequestSample;

const FAMILIES: ReadonlyArray<[string, (registry: Registry) => SampleObserver]> = [
  ['infermeter_tenant_requests_total', (r) => createTenantFamilies(r, undefined)],
  ['infermeter_tenant_prompt_tokens_total', (r) => createTenantFamilies(r, undefined)],
  ['infermeter_tenant_generation_tokens_total', (r) => createTenantFamilies(r, undefined)],
  ['infermeter_tenant_stream_stalls_total', (r) => createStreamHealthFamilies(r, undefined, { stallSeconds: 1, tenants: true })],
  ['infermeter_tenant_client_backpressure_seconds_total', (r) => createStreamHealthFamilies(r, undefined, { stallSeconds: 1, tenants: true })],
  ['infermeter_tenant_reasoning_tokens_total', (r) => createUsageDetailFamilies(r, true)],
  ['infermeter_tenant_cached_prompt_tokens_total', (r) => createUsageDetailFamilies(r, true)],
];

for (const [name, create] of FAMILIES) {
  it(`${name}: read as the render goes, a part at a time`, () => {
    const registry = new Registry();
    const observer = create(registry);
    const finished = (tenant: string, model: string) => {
      const s = sample(tenant, model);
      observer.finished!(s, s);
    };
    for (let t = 0; t < 100; t++) for (let m = 0; m < 20; m++) finished(`tenant-${t}`, `model-${m}`);
    assertReadAsRendered(registry.getSingleMetric(name) as unknown as Family, () => finished('tenant-late', 'model-late'));
  });
}
