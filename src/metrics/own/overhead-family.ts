// How much does the proxy add? `infermeter_proxy_overhead_seconds`: per streamed request, the
// mean time an upstream chunk spent in infermeter, from when it was readable (the turn's
// arrival stamp, arrival-clock.ts: every chunk handled in one turn of the loop was readable when
// the turn began, so the work on other streams before it counts) to its write to the client
// (the relay's write returned), over the response's writes (what one turn brought is one
// write). On the hot path: the arrival clock (one clock read per turn) and the stamp the tap
// takes at the write anyway; observed when the request finishes, from its sample. What it
// leaves out, the kernel's and libuv's part of the hop (the poll's wake-up, the send on the tick
// after the write), is what bench:fidelity's tcpdump legs add to it (docs/performance.md).
import type { Registry } from '@prometheus-io/client';
import type { RequestSample } from '../../measure/sample.ts';
import { bucketsFor, OWN_BUCKETS, type BucketOverrides } from '../exposition/buckets.ts';
import { registerLabelledHistogram } from '../exposition/families.ts';
import type { SampleObserver } from '../state/recorder.ts';

const NO_LABELS: readonly string[] = [];

export function createOverheadFamily(registry: Registry, buckets: BucketOverrides | undefined): SampleObserver {
  const overhead = registerLabelledHistogram(registry, {
    name: 'infermeter_proxy_overhead_seconds',
    help: "The proxy's own time on each streamed inference response, in seconds: from an upstream chunk's arrival in the data plane to its write to the client, the mean over the response's writes; observed when the request finishes.",
    buckets: bucketsFor(OWN_BUCKETS, 'infermeter_proxy_overhead_seconds', buckets),
    labelNames: NO_LABELS,
  });
  return {
    finished(sample: RequestSample) {
      if (sample.proxyOverhead !== undefined) overhead.observe(NO_LABELS, sample.proxyOverhead, 1, sample.requestId);
    },
  };
}
