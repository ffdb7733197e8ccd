// infermeter's own accounting of what the model_name families cannot say: how many distinct
// model labels are kept, which requests carried the engine's own timings, whose prompt tokens
// are in no count, which streams succeeded without a usage report (and what they delivered),
// whose usage was not taken as given. Per model, from the shared
// state and each finished sample; registered after the other own families (their order on /metrics).
import type { Registry } from '@prometheus-io/client';
import type { InferenceApis } from '../../measure/inference-apis.ts';
import type { UsageRejection } from '../../measure/usage.ts';
import { registerDerived } from '../exposition/families.ts';
import type { MeasurementState, SampleObserver } from '../state/recorder.ts';

const USAGE_REJECTIONS: readonly UsageRejection[] = ['too_large', 'reasoning_over_completion', 'cached_over_prompt'];

/** `modelsKept`: the label guard's distinct model_name values; `apis`: the API table, whose rows say which APIs generate. */
export function registerAccountingFamilies(
  registry: Registry,
  state: MeasurementState,
  addObserver: (observer: SampleObserver) => void,
  modelsKept: () => number,
  apis: InferenceApis,
): void {
  registerDerived(registry, {
    name: 'infermeter_model_labels',
    help: 'Distinct model_name values kept (unknown and other included).',
    type: 'gauge',
    collect: () => [{ value: modelsKept(), labels: {} }],
  });
  // Requests whose answer carried the engine's own timings: the vllm dialect's phases of these
  // are the engine's, of the others the proxy's estimate (phase-split.ts).
  const engineTimed = new Map<string, number>();
  addObserver({
    finished: (s) => {
      if (s.engineTimings !== undefined) engineTimed.set(s.model, (engineTimed.get(s.model) ?? 0) + 1);
    },
  });
  registerDerived(registry, {
    name: 'infermeter_engine_timings_total',
    help: "Finished inference requests whose answer carried the engine's own timings (llama.cpp's timings); the vllm dialect's phase histograms take these requests' phases from them, the others' are the proxy's estimate.",
    type: 'counter',
    collect: () => [...state.models.values()].map((m) => ({ value: engineTimed.get(m.model) ?? 0, labels: { model_name: m.model } })),
  });
  // Requests the engine read a prompt for, whose prompt tokens no count has: a stream the client
  // left (or that broke off) before its usage chunk. Their generation tokens are counted from the
  // events; their prompt tokens are missing from every prompt-token figure (docs/metrics.md).
  const promptUnknown = new Map<string, { cancelled: number; failed: number }>();
  addObserver({
    finished: (s) => {
      if (s.promptTokens !== undefined || s.outcome === 'success' || !s.outputSeen || apis.of(s.api)?.generates === false) return;
      let c = promptUnknown.get(s.model);
      if (c === undefined) promptUnknown.set(s.model, (c = { cancelled: 0, failed: 0 }));
      c[s.outcome]++;
    },
  });
  registerDerived(registry, {
    name: 'infermeter_prompt_tokens_unknown_total',
    help: 'Inference requests cancelled or cut after their output began and before the upstream told their usage: the engine read their prompt, but their prompt tokens are in no prompt-token count.',
    type: 'counter',
    collect: () =>
      [...state.models.values()].flatMap((m) => {
        const c = promptUnknown.get(m.model);
        return (['cancelled', 'failed'] as const).map((outcome) => ({ value: c?.[outcome] ?? 0, labels: { model_name: m.model, outcome } }));
      }),
  });
  registerDerived(registry, {
    name: 'infermeter_streams_without_usage_total',
    help: 'Streamed inference requests that succeeded without a usage report (injection off or refused, or an upstream that sends none): their tokens are counted as 0, so token figures are missing for them, not zero.',
    type: 'counter',
    collect: () => Array.from(state.models.values(), (m) => ({ value: m.withoutUsage, labels: { model_name: m.model } })),
  });
  // Beside the spec's zeros, what those streams did deliver: no one is billed 0 for a stream received.
  registerDerived(registry, {
    name: 'infermeter_streams_without_usage_token_events_total',
    help: "Token-carrying events of the streams counted in infermeter_streams_without_usage_total: their generated tokens as infermeter counts them (one per event), which the spec's token families count as 0.",
    type: 'counter',
    collect: () => Array.from(state.models.values(), (m) => ({ value: m.withoutUsageEvents, labels: { model_name: m.model } })),
  });
  // Usage that lies (usage.ts): a report refused, a part cut to its whole.
  const rejected = new Map<string, Record<UsageRejection, number>>();
  addObserver({
    finished: (s) => {
      const reasons = s.usageRejections;
      if (reasons === undefined) return;
      let c = rejected.get(s.model);
      if (c === undefined) rejected.set(s.model, (c = { too_large: 0, reasoning_over_completion: 0, cached_over_prompt: 0 }));
      for (const reason of reasons) c[reason]++;
    },
  });
  registerDerived(registry, {
    name: 'infermeter_usage_rejected_total',
    help: 'Inference requests whose upstream usage was not taken as given: a report with a count above 2^31-1 refused (too_large: the request counts as without usage), reasoning tokens above the completion tokens or cached tokens above the prompt tokens (cut to the whole).',
    type: 'counter',
    collect: () =>
      [...state.models.values()].flatMap((m) => {
        const c = rejected.get(m.model);
        return USAGE_REJECTIONS.map((reason) => ({ value: c?.[reason] ?? 0, labels: { model_name: m.model, reason } }));
      }),
  });
}
