// TTFT by the prompt's size (INFERMETER_PROMPT_BANDS, off by default): one tenant's 64k-token
// contexts move a model's TTFT p99 for everyone; with a bounded band label an alert can hold
// each size to its own threshold. The prompt's size is known only from the usage, at the end
// of the stream: the TTFT is observed then, with its band. Five bands per model, so at most
// 5 x INFERMETER_MAX_MODELS series sets.
import type { Registry } from '@prometheus-io/client';
import type { RequestSample } from '../../measure/sample.ts';
import { bucketsFor, OWN_BUCKETS, type BucketOverrides } from '../exposition/buckets.ts';
import { registerLabelledHistogram } from '../exposition/families.ts';
import type { SampleObserver } from '../state/recorder.ts';

export type PromptBand = '<1k' | '1k-8k' | '8k-32k' | '>32k' | 'unknown';

/** The band of a prompt of `tokens` tokens (k = 1024: context windows come in powers of two); `unknown` when the upstream did not say. */
export function promptBand(tokens: number | undefined): PromptBand {
  if (tokens === undefined) return 'unknown';
  if (tokens < 1024) return '<1k';
  if (tokens < 8 * 1024) return '1k-8k';
  if (tokens < 32 * 1024) return '8k-32k';
  return '>32k';
}

export function createPromptBandFamilies(registry: Registry, buckets: BucketOverrides | undefined): SampleObserver {
  const ttft = registerLabelledHistogram(registry, {
    name: 'infermeter_time_to_first_token_by_prompt_band_seconds',
    help: "Time to the first token of streamed inference requests per model and prompt size (prompt_band: <1k, 1k-8k, 8k-32k, >32k prompt tokens by the upstream's usage, k = 1024; unknown without usage), in seconds. Observed when the request finishes (the usage comes last).",
    buckets: bucketsFor(OWN_BUCKETS, 'infermeter_time_to_first_token_by_prompt_band_seconds', buckets),
    labelNames: ['model_name', 'prompt_band'],
  });
  const labels: [string, string] = ['', ''];
  return {
    finished(sample: RequestSample) {
      if (sample.ttft === undefined) return;
      labels[0] = sample.model;
      // Only the upstream's own count: a stream without usage is 0 by the spec's fallback, not a small prompt.
      labels[1] = promptBand(sample.usageSource === 'upstream' ? sample.promptTokens : undefined);
      ttft.observe(labels, sample.ttft, 1, sample.requestId);
    },
  };
}
