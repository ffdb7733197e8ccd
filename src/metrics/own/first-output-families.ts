// Was it the model thinking, or the server queueing? TTFT starts at a stream's first token,
// reasoning included; what the user waits for is the first visible output (text or a tool
// call). These histograms give that wait, and the reasoning phase between the two, per model
// and, with per-tenant metering, per tenant and model. Observed when that output arrives (as
// TTFT is at the first token), on the TTFT buckets (their override included), so that the two
// compare bucket by bucket.
import type { Registry } from '@prometheus-io/client';
import type { RequestInfo } from '../../measure/sample.ts';
import { bucketsFor, OWN_BUCKETS, type BucketOverrides } from '../exposition/buckets.ts';
import { MINDIE_BUCKETS } from '../dialects/mindie.ts';
import { registerHistogram, registerLabelledHistogram } from '../exposition/families.ts';
import type { SampleObserver } from '../state/recorder.ts';

/** `tenants`: per-tenant metering is on (the tenant family is registered too). */
export function createFirstOutputFamilies(registry: Registry, buckets: BucketOverrides | undefined, tenants: boolean): SampleObserver {
  const ttfo = registerHistogram(registry, {
    name: 'infermeter_time_to_first_output_seconds',
    help: 'Time from arrival to the first visible output of streamed inference requests (content text or a tool call; not reasoning), in seconds; TTFT when the stream does not open with reasoning. Observed when that output arrives; never for a stream that showed no visible output.',
    buckets: bucketsFor(MINDIE_BUCKETS, 'time_to_first_token_seconds', buckets),
    labelName: 'model_name',
  });
  const phase = registerHistogram(registry, {
    name: 'infermeter_reasoning_phase_seconds',
    help: 'Time from the first token to the first visible output of streamed inference requests that opened with reasoning, in seconds: the reasoning the user waited through. Observed when that output arrives.',
    buckets: bucketsFor(MINDIE_BUCKETS, 'time_to_first_token_seconds', buckets),
    labelName: 'model_name',
  });
  const tenant = tenants
    ? registerLabelledHistogram(registry, {
        name: 'infermeter_tenant_time_to_first_output_seconds',
        help: 'Time to the first visible output of streamed inference requests per tenant and model, in seconds (the TTFT buckets of the tenant families).',
        buckets: bucketsFor(OWN_BUCKETS, 'infermeter_tenant_time_to_first_token_seconds', buckets),
        labelNames: ['tenant', 'model_name'],
      })
    : undefined;
  const labels: [string, string] = ['', ''];
  return {
    firstVisibleOutput(info: RequestInfo, seconds: number, reasoningPhase: number | undefined) {
      ttfo.observe(info.model, seconds, 1, info.requestId);
      if (reasoningPhase !== undefined) phase.observe(info.model, reasoningPhase, 1, info.requestId);
      if (tenant !== undefined && info.tenant !== undefined) {
        labels[0] = info.tenant;
        labels[1] = info.model;
        tenant.observe(labels, seconds, 1, info.requestId);
      }
    },
  };
}
