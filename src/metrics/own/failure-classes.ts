// Failed requests told apart by whose fault they are, per model: a client error (the upstream
// answered 4xx but 408 and 429: an unknown model, a malformed or oversized request, a bad key) is
// the client's to fix; a server failure (5xx or another non-2xx status, an unreachable, silent or
// cut upstream, an answer that is not HTTP, an error event in a 2xx stream, a worker that died)
// is the service's. Alerts that page are written on server failures only. MindIE's
// request_failed_total keeps the spec's meaning (every failed request).
import type { Registry } from '@prometheus-io/client';
import type { FailureReason, RequestSample } from '../../measure/sample.ts';
import { registerDerived } from '../exposition/families.ts';
import type { MeasurementState, SampleObserver } from '../state/recorder.ts';

export type FailureClass = 'client_error' | 'server_error';

/** Every (class, reason) pair a failure can have: each model's series exist from 0. */
const PAIRS: ReadonlyArray<readonly [FailureClass, FailureReason]> = [
  ['client_error', 'upstream_status'],
  ['server_error', 'upstream_status'],
  ['server_error', 'upstream_unreachable'],
  ['server_error', 'upstream_timeout'],
  ['server_error', 'upstream_reset'],
  ['server_error', 'upstream_protocol'],
  ['server_error', 'stream_error'],
  ['server_error', 'worker_exit'],
];

/**
 * A client error is the client's to fix, not a failure of the model it named (a 404 for a model
 * that does not exist, a 400 for a malformed body, a 401, a 413, a 422): every 4xx but 408 (the
 * server gave up waiting) and 429 (the server had no room: TGI's answer to a full queue), which
 * are the service's capacity. One rule for the failure classes and the goodput verdict.
 */
export function isClientError(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 429;
}

/** Whose failure a failed request is: a client error from the upstream is the client's, everything else the server's. */
export function failureClass(sample: Pick<RequestSample, 'failure' | 'status'>): FailureClass {
  return sample.failure === 'upstream_status' && isClientError(sample.status) ? 'client_error' : 'server_error';
}

export function createFailureFamilies(registry: Registry, state: MeasurementState): SampleObserver {
  const counts = new Map<string, Float64Array>(); // model -> count per PAIRS index
  registerDerived(registry, {
    name: 'infermeter_request_failures_total',
    help: 'Failed inference requests per model, by class (client_error: the upstream answered 4xx but 408 and 429; server_error: 5xx, 408, 429, unreachable, timeout, reset, not HTTP, an error event in the stream, a worker that died) and reason. Page on server_error; request_failed_total counts both.',
    type: 'counter',
    collect: () =>
      [...state.models.values()].flatMap((m) => {
        const c = counts.get(m.model);
        return PAIRS.map(([cls, reason], i) => ({ value: c?.[i] ?? 0, labels: { model_name: m.model, class: cls, reason } }));
      }),
  });
  return {
    finished(sample) {
      if (sample.outcome !== 'failed' || sample.failure === undefined) return;
      const cls = failureClass(sample);
      const i = PAIRS.findIndex(([c, r]) => c === cls && r === sample.failure);
      if (i < 0) return;
      let c = counts.get(sample.model);
      if (c === undefined) counts.set(sample.model, (c = new Float64Array(PAIRS.length)));
      c[i]!++;
    },
  };
}
