// One worker's requests in flight, kept on the primary beside the sink its calls reach
// (cluster/bus.ts), so that a request of a worker that dies is still finished once.
import { UNAUTHENTICATED_TENANT } from '../metrics/state/tenant-label.ts';
import type { MeasurementSink } from '../measure/request-timer.ts';
import type { InferenceApi, RequestInfo, RequestSample } from '../measure/sample.ts';

/**
 * A sink that keeps one worker's requests in flight per model, so that a worker that dies leaves
 * no request waiting or running forever: they are finished as failed (`worker_exit`). The table
 * is keyed by the model's label (`label`: the label guard, uncounted), not the raw name a client
 * sent, so it holds at most as many models as /metrics does, however many names clients invent;
 * with per-tenant metering, by the tenant's label too (`tenantLabel`), so a lost request is
 * still its tenant's.
 */
export function trackInFlight(sink: MeasurementSink, label: (model: string) => string, tenantLabel: (tenant: string, accepted?: boolean) => string) {
  const inFlight = new Map<string, { info: RequestInfo; waiting: number; running: number }>();
  const key = (api: string, model: string, stream: boolean, tenant: string | undefined) => `${api}\u0000${model}\u0000${stream}\u0000${tenant ?? ''}`;
  const entry = (api: InferenceApi, raw: string, stream: boolean, rawTenant: string | undefined, as?: string, accepted?: boolean) => {
    const model = label(raw);
    const tenant = rawTenant === undefined ? undefined : (as ?? tenantLabel(rawTenant, accepted));
    const k = key(api, model, stream, tenant);
    let e = inFlight.get(k);
    if (e === undefined) inFlight.set(k, (e = { info: infoOf(api, model, stream, tenant), waiting: 0, running: 0 }));
    return e;
  };
  // A tenant given its place while a request of its ran was `unauthenticated` when that request
  // started: its count is found under that label (the totals stay exact either way).
  const tracked = (api: InferenceApi, raw: string, stream: boolean, rawTenant: string | undefined, field: 'waiting' | 'running') => {
    const f = entry(api, raw, stream, rawTenant);
    if (f[field] > 0 || rawTenant === undefined) return f;
    const before = entry(api, raw, stream, rawTenant, UNAUTHENTICATED_TENANT);
    return before[field] > 0 ? before : f;
  };
  const tracking: Required<MeasurementSink> = {
    started(i) {
      entry(i.api, i.model, i.stream, i.tenant).waiting++;
      sink.started(i);
    },
    firstOutput(i, ttft) {
      // Running under the label its tenant has now that the engine answered (the recorder's).
      tracked(i.api, i.model, i.stream, i.tenant, 'waiting').waiting--;
      entry(i.api, i.model, i.stream, i.tenant, undefined, i.accepted).running++;
      sink.firstOutput(i, ttft);
    },
    interToken: (i, seconds, tokens) => sink.interToken?.(i, seconds, tokens),
    firstVisibleOutput: (i, seconds, phase) => sink.firstVisibleOutput?.(i, seconds, phase),
    finished(s) {
      if (s.outputSeen) entry(s.api, s.model, s.stream, s.tenant, undefined, s.accepted).running--;
      else tracked(s.api, s.model, s.stream, s.tenant, 'waiting').waiting--;
      sink.finished(s);
    },
  };
  return {
    sink: tracking,
    get tracked() {
      return inFlight.size;
    },
    lost() {
      let n = 0;
      for (const { info, waiting, running } of inFlight.values()) {
        for (let i = 0; i < waiting + running; i++) {
          sink.finished(lostSample(info, i >= waiting));
          n++;
        }
      }
      inFlight.clear();
      return n;
    },
  };
}

/** A request's info as the data plane writes it: no key for what is absent. */
export function infoOf(api: InferenceApi, model: string, stream: boolean, tenant: string | undefined, accepted?: boolean, requestId?: string): RequestInfo {
  const info: RequestInfo =
    tenant === undefined ? { api, model, stream } : accepted === undefined ? { api, model, stream, tenant } : { api, model, stream, tenant, accepted };
  return requestId === undefined ? info : { ...info, requestId };
}

function lostSample(info: RequestInfo, outputSeen: boolean): RequestSample {
  return {
    ...info,
    status: 502,
    outcome: 'failed',
    failure: 'worker_exit',
    cancelPhase: undefined,
    ttfb: undefined,
    streamed: info.stream,
    outputSeen,
    ttft: undefined,
    lastToken: undefined,
    e2e: undefined,
    tpot: undefined,
    promptTokens: undefined,
    completionTokens: undefined,
    usageSource: 'none',
    tokenEvents: 0,
    finishReason: undefined,
  };
}
