// What a request cost beyond its prompt and generated tokens, from the usage's details:
// reasoning tokens (expensive, never shown) and prompt tokens a prompt cache served (cheap and
// fast), and Anthropic's cache writes (billed above the prompt rate), per model and, with
// per-tenant metering, per tenant and model. Only what the upstream stated is added: a model's
// series appears once its usage reported the field (0 included), so an absent series means
// "not reported", never "none".
import type { Registry } from '@prometheus-io/client';
import type { RequestSample } from '../../measure/sample.ts';
import { registerDerived, type MetricValue } from '../exposition/families.ts';
import { pairSeries } from '../exposition/pair-series.ts';
import type { SampleObserver } from '../state/recorder.ts';

type Detail = 'reasoningTokens' | 'cachedPromptTokens' | 'cacheWriteTokens';

const DETAILS: ReadonlyArray<{ readonly key: Detail; readonly name: string; readonly help: string }> = [
  {
    key: 'reasoningTokens',
    name: 'reasoning_tokens_total',
    help: "Generated tokens spent on reasoning, as the upstream's usage reported them (completion_tokens_details.reasoning_tokens); part of the generation tokens.",
  },
  {
    key: 'cachedPromptTokens',
    name: 'cached_prompt_tokens_total',
    help: "Prompt tokens served from a prompt cache, as the upstream's usage reported them (prompt_tokens_details.cached_tokens, prompt_cache_hit_tokens, Anthropic's cache_read_input_tokens); part of the prompt tokens.",
  },
  {
    key: 'cacheWriteTokens',
    name: 'cache_write_prompt_tokens_total',
    help: "Prompt tokens written to a prompt cache, as the upstream's usage reported them (Anthropic's cache_creation_input_tokens); part of the prompt tokens.",
  },
];

/** `tenants`: per-tenant metering is on (the tenant families are registered too). */
export function createUsageDetailFamilies(registry: Registry, tenants: boolean): SampleObserver {
  // Per detail: model -> sum, and (tenant, model) -> sum with its labels.
  const perModel = DETAILS.map(() => new Map<string, number>());
  const perTenant = DETAILS.map(() => new Map<string, { tenant: string; model: string; value: number }>());
  DETAILS.forEach((d, i) => {
    registerDerived(registry, {
      name: `infermeter_${d.name}`,
      help: d.help,
      type: 'counter',
      collect: () => Array.from(perModel[i]!, ([model, value]): MetricValue => ({ value, labels: { model_name: model } })),
    });
  });
  if (tenants) {
    DETAILS.forEach((d, i) => {
      registerDerived(registry, {
        name: `infermeter_tenant_${d.name}`,
        help: `${d.help.slice(0, -1)}, per tenant (INFERMETER_TENANT) and model.`,
        type: 'counter',
        collect: pairSeries(perTenant[i]!, (p) => p.value),
      });
    });
  }
  return {
    finished(sample: RequestSample) {
      for (let i = 0; i < DETAILS.length; i++) {
        const value = sample[DETAILS[i]!.key];
        if (value === undefined) continue;
        const models = perModel[i]!;
        models.set(sample.model, (models.get(sample.model) ?? 0) + value);
        const { tenant } = sample;
        if (!tenants || tenant === undefined) continue;
        // Length-prefixed: no two pairs share a key.
        const key = `${tenant.length}:${tenant}${sample.model}`;
        const pairs = perTenant[i]!;
        const p = pairs.get(key);
        if (p === undefined) pairs.set(key, { tenant, model: sample.model, value });
        else p.value += value;
      }
    },
  };
}
