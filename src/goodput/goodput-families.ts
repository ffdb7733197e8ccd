// Goodput, live (INFERMETER_SLO, INFERMETER_SLO_FILE): every finished inference request gets
// the verdict of vLLM's benchmark (goodput-verdict.ts) under its SLO class, and is counted per
// model (and per tenant and model with INFERMETER_TENANT): good, missed, failed, cancelled; the
// SLOs missed; the completion tokens of good requests. Fed by the recorder's finished samples,
// whose model_name and tenant are already bounded by their guards, so the series are at most
// models x (4 verdicts + 3 SLOs + 1 + 3 exclusions) and tenants x models x 4. With workers the
// recorder is the primary's: the counts are exact, a worker's lost requests `failed`.
import type { Registry } from '@prometheus-io/client';
import { SLO_KEYS, type SloKey } from './slo-config.ts';
import { REAL_APIS, type InferenceApis } from '../measure/inference-apis.ts';
import type { RequestSample } from '../measure/sample.ts';
import type { SloPolicy } from './slo-policy.ts';
import { registerDerived, type MetricValue } from '../metrics/exposition/families.ts';
import { exclusionOf, exclusions, judge, VERDICTS, type Exclusion, type Judgement, type Verdict } from './goodput-verdict.ts';
import type { SampleObserver } from '../metrics/state/recorder.ts';

interface GoodputCounts {
  readonly verdicts: Record<Verdict, number>;
  readonly missed: Record<SloKey, number>;
  goodTokens: number;
}

interface ModelGoodput extends GoodputCounts {
  readonly model: string;
  readonly excluded: Record<Exclusion, number>; // by exclusions(apis)
}

interface TenantGoodput {
  readonly tenant: string;
  readonly model: string;
  readonly verdicts: Record<Verdict, number>;
}

/** What /metrics-json and the dashboard read of goodput. */
export interface Goodput {
  readonly policy: SloPolicy;
  /** Lifetime counts per model (models with a verdict or an exclusion). */
  models(): ReadonlyMap<string, GoodputCounts>;
  /** Hears every verdict, after it is counted (the dashboard's windows). */
  onJudged(listener: (sample: RequestSample, judgement: Judgement) => void): void;
}

const zeroVerdicts = (): Record<Verdict, number> => ({ good: 0, missed: 0, failed: 0, cancelled: 0 });

/** `apis`: the API table, whose rows say which APIs get no verdict. */
export function createGoodputFamilies(registry: Registry, policy: SloPolicy, tenants: boolean, apis: InferenceApis = REAL_APIS): Goodput & SampleObserver {
  const reasons = exclusions(apis);
  const models = new Map<string, ModelGoodput>();
  const pairs = new Map<string, TenantGoodput>();
  const listeners: Array<(sample: RequestSample, judgement: Judgement) => void> = [];
  const modelOf = (model: string): ModelGoodput => {
    let m = models.get(model);
    if (m === undefined) {
      // Every verdict from 0: an attainment ratio has its denominator before the first miss.
      m = { model, verdicts: zeroVerdicts(), missed: { ttft: 0, tpot: 0, e2el: 0 }, goodTokens: 0, excluded: Object.fromEntries(reasons.map((r) => [r, 0])) };
      models.set(model, m);
    }
    return m;
  };
  const pairOf = (tenant: string, model: string): TenantGoodput => {
    const key = `${tenant.length}:${tenant}${model}`;
    let p = pairs.get(key);
    if (p === undefined) pairs.set(key, (p = { tenant, model, verdicts: zeroVerdicts() }));
    return p;
  };

  registerDerived(registry, {
    name: 'infermeter_goodput_requests_total',
    help: "Finished inference requests per model by goodput verdict, vLLM's benchmark rules (INFERMETER_SLO): good (completed within every SLO of its class, inclusive), missed (completed, an SLO missed), failed, cancelled. Client errors (4xx but 408 and 429) are not judged: infermeter_goodput_excluded_requests_total.",
    type: 'counter',
    collect: () =>
      [...models.values()].flatMap((m) =>
        isJudged(m) ? VERDICTS.map((verdict) => ({ value: m.verdicts[verdict], labels: { model_name: m.model, verdict } })) : [],
      ),
  });
  registerDerived(registry, {
    name: 'infermeter_slo_missed_requests_total',
    help: 'Completed inference requests per model that missed an SLO, by SLO (ttft, tpot, e2el); a request that missed two counts in both.',
    type: 'counter',
    collect: () => {
      const keys = configuredKeys(policy);
      return [...models.values()].flatMap((m) =>
        isJudged(m)
          ? SLO_KEYS.filter((k) => keys.has(k) || m.missed[k] > 0).map((slo) => ({ value: m.missed[slo], labels: { model_name: m.model, slo } }))
          : [],
      );
    },
  });
  registerDerived(registry, {
    name: 'infermeter_goodput_tokens_total',
    help: 'Completion tokens of good inference requests per model (token goodput).',
    type: 'counter',
    collect: () => [...models.values()].flatMap((m) => (isJudged(m) ? [{ value: m.goodTokens, labels: { model_name: m.model } }] : [])),
  });
  registerDerived(registry, {
    name: 'infermeter_goodput_excluded_requests_total',
    help: "Finished inference requests per model with no goodput verdict, by reason: client_error (a 4xx but 408 and 429: the client's mistake, never an SLO miss), embeddings (no generation), no_slo (no SLO class matched, or its slo is off).",
    type: 'counter',
    collect: () =>
      [...models.values()].flatMap((m) =>
        reasons.filter((r) => m.excluded[r]! > 0).map((reason) => ({ value: m.excluded[reason]!, labels: { model_name: m.model, reason } })),
      ),
  });
  registerDerived(registry, {
    name: 'infermeter_slo_threshold_seconds',
    help: "The SLOs in use, in seconds, per class (INFERMETER_SLO is class default; INFERMETER_SLO_FILE's classes come first), with the model and tenant glob patterns the class applies to.",
    type: 'gauge',
    collect: (): MetricValue[] =>
      policy.classes().flatMap((c) =>
        SLO_KEYS.filter((k) => c.targets?.[k] !== undefined).map((slo) => ({
          value: c.targets![slo]! / 1000,
          labels: { slo_class: c.name, model_pattern: c.model, tenant_pattern: c.tenant, slo },
        })),
      ),
  });
  registerDerived(registry, {
    name: 'infermeter_slo_client_allowance_seconds',
    help: "INFERMETER_SLO_CLIENT_ALLOWANCE: seconds added to infermeter's own ttft, tpot and e2el before they are compared with the SLOs (0: infermeter's view).",
    type: 'gauge',
    collect: () => SLO_KEYS.map((slo) => ({ value: policy.allowance[slo] / 1000, labels: { slo } })),
  });
  if (tenants) {
    registerDerived(registry, {
      name: 'infermeter_tenant_goodput_requests_total',
      help: 'Finished inference requests per tenant (INFERMETER_TENANT) and model by goodput verdict: good, missed, failed, cancelled.',
      type: 'counter',
      // Read as the render goes (tenants x models x verdicts series): never built whole within one piece.
      *collect() {
        for (const p of pairs.values())
          for (const verdict of VERDICTS) yield { value: p.verdicts[verdict], labels: { tenant: p.tenant, model_name: p.model, verdict } };
      },
    });
  }

  return {
    policy,
    models: () => models,
    onJudged: (listener) => listeners.push(listener),
    finished(sample) {
      let exclusion = exclusionOf(sample, apis.of(sample.api));
      const slo = exclusion === undefined ? policy.classOf(sample.model, sample.tenant) : undefined;
      if (exclusion === undefined && slo?.targets === undefined) exclusion = 'no_slo';
      const m = modelOf(sample.model);
      if (exclusion !== undefined) {
        m.excluded[exclusion] = (m.excluded[exclusion] ?? 0) + 1;
        return;
      }
      const judgement = judge(sample, slo!.targets!, policy.allowance);
      m.verdicts[judgement.verdict]++;
      for (const k of judgement.missed) m.missed[k]++;
      if (judgement.verdict === 'good') m.goodTokens += judgement.tokens;
      if (tenants && sample.tenant !== undefined) pairOf(sample.tenant, sample.model).verdicts[judgement.verdict]++;
      for (const l of listeners) l(sample, judgement);
    },
  };
}

/** A model with at least one verdict (only exclusions: no goodput series for it at all). */
function isJudged(m: ModelGoodput): boolean {
  return m.verdicts.good + m.verdicts.missed + m.verdicts.failed + m.verdicts.cancelled > 0;
}

/** The SLO keys some class in use holds requests to. */
function configuredKeys(policy: SloPolicy): Set<SloKey> {
  const keys = new Set<SloKey>();
  for (const c of policy.classes()) for (const k of SLO_KEYS) if (c.targets?.[k] !== undefined) keys.add(k);
  return keys;
}
