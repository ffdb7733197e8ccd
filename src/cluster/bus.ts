// With INFERMETER_WORKERS > 1 the data plane runs in worker processes and the measurement in
// the primary: each worker sends its requests' events (started, first output, inter-token gaps,
// finished samples) and its proxy events to the primary in batches, where the one recorder and
// the dialects turn them into metrics. So /metrics, /metrics-json and the AOM periods are those
// of all workers' traffic, exactly, and nothing has to be merged after the fact.
import { UNAUTHENTICATED_TENANT } from '../metrics/state/tenant-label.ts';
import type { ClientErrorKind } from '../data-plane/client-connections.ts';
import type { HeldBodyUse } from '../data-plane/body-budget.ts';
import type { ResendReason } from '../data-plane/lifecycle.ts';
import type { ProxyErrorKind } from '../data-plane/openai-error.ts';
import type { MeasurementSink } from '../measure/request-timer.ts';
import type { InferenceApi, RequestInfo, RequestSample } from '../measure/sample.ts';
import type { LoopDelayReading } from '../metrics/own/loop-delay.ts';
import type { ProcessReading } from '../metrics/own/process-families.ts';
import type { HeldBodyBytes, ProxyEvents, RejectReason } from '../metrics/own/proxy-families.ts';
import type { InjectedBody } from '../data-plane/usage-injection.ts';
import type { UninspectedReason } from '../stream-tap/request-tap.ts';
import type { TapProblem } from '../stream-tap/response-tap.ts';

/** One event, as compact as structured clone makes cheap. */
type BusEvent =
  | readonly [kind: 0, api: InferenceApi, model: string, stream: boolean, tenant: string | undefined] // started
  | readonly [
      kind: 1,
      api: InferenceApi,
      model: string,
      stream: boolean,
      ttft: number | null,
      tenant: string | undefined,
      accepted: boolean | undefined,
      requestId?: string,
    ] // first output (the id: its TTFT's exemplar)
  | readonly [
      kind: 2,
      api: InferenceApi,
      model: string,
      stream: boolean,
      seconds: number,
      tokens: number,
      tenant: string | undefined,
      accepted: boolean | undefined,
    ] // inter-token
  | readonly [kind: 3, sample: RequestSample] // finished
  | readonly [kind: 4, name: ProxyEventName, arg: string | boolean | null] // a proxy event
  | readonly [kind: 5, dialect: string, route: string, method: string, status: number, seconds: number] // a pass-through request (httpRequest)
  | readonly [
      kind: 6,
      api: InferenceApi,
      model: string,
      stream: boolean,
      seconds: number,
      reasoningPhase: number | null,
      tenant: string | undefined,
      accepted: boolean | undefined,
      requestId?: string,
    ] // first visible output
  | readonly [kind: 7, line: string]; // a usage record, as the worker's writer made it (ledger/ledger.ts)

type ProxyEventName =
  | 'uninspected'
  | 'tapProblem'
  | 'proxyError'
  | 'retried'
  | 'injectionActive'
  | 'usageInjected'
  | 'usageStripped'
  | 'accessLogDropped'
  | 'rejected'
  | 'clientError'
  | 'bodyUnheld';

/** Worker -> primary. */
export type WorkerMessage =
  | { readonly t: 'events'; readonly events: BusEvent[]; readonly connections: number }
  | { readonly t: 'flushed'; readonly seq: number; readonly loopDelay?: LoopDelayReading; readonly held?: HeldBodyBytes; readonly process?: ProcessReading }
  | { readonly t: 'listening'; readonly url: string };

/** Primary -> worker. */
export type PrimaryMessage =
  | { readonly t: 'flush'; readonly seq: number }
  | { readonly t: 'drain'; readonly timeoutMs: number }
  // SIGHUP reached the primary: read INFERMETER_TENANT_ALIASES again.
  | { readonly t: 'reloadTenants' }
  // SIGHUP reached the primary: read INFERMETER_PRICES_FILE again (the usage records' cost).
  | { readonly t: 'reloadPrices' }
  // SIGHUP reached the primary: open INFERMETER_ACCESS_LOG's file again at its path.
  | { readonly t: 'reopenAccessLog' };

export interface WorkerBus {
  readonly sink: MeasurementSink;
  readonly events: ProxyEvents;
  /** Sends what is batched now. */
  flush(): void;
  /** A usage record's line, for the primary's spool. */
  usageLine(line: string): void;
}

/** Worker side: batches events and sends them every `intervalMs`, or sooner when many wait. */
export function createWorkerBus(send: (m: WorkerMessage) => void, connections: () => number, intervalMs = 50, maxBatch = 512): WorkerBus {
  let batch: BusEvent[] = [];
  let timer: NodeJS.Timeout | undefined;
  const flush = (): void => {
    if (timer !== undefined) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (batch.length === 0) return;
    const events = batch;
    batch = [];
    send({ t: 'events', events, connections: connections() });
  };
  const push = (e: BusEvent): void => {
    batch.push(e);
    if (batch.length >= maxBatch) flush();
    else if (timer === undefined) {
      timer = setTimeout(flush, intervalMs);
      timer.unref();
    }
  };
  const proxy = (name: ProxyEventName) => (arg?: string | boolean) => push([4, name, arg ?? null]);
  return {
    flush,
    usageLine: (line) => push([7, line]),
    sink: {
      started: (i) => push([0, i.api, i.model, i.stream, i.tenant]),
      firstOutput: (i, ttft) => push([1, i.api, i.model, i.stream, ttft ?? null, i.tenant, i.accepted, i.requestId]),
      interToken: (i, seconds, tokens) => push([2, i.api, i.model, i.stream, seconds, tokens, i.tenant, i.accepted]),
      firstVisibleOutput: (i, seconds, phase) => push([6, i.api, i.model, i.stream, seconds, phase ?? null, i.tenant, i.accepted, i.requestId]),
      finished: (s) => push([3, s]),
    },
    events: {
      uninspected: proxy('uninspected') as (r: UninspectedReason) => void,
      tapProblem: proxy('tapProblem') as (k: TapProblem) => void,
      proxyError: proxy('proxyError') as (k: ProxyErrorKind) => void,
      retried: proxy('retried') as (r: ResendReason) => void,
      injectionActive: proxy('injectionActive') as (on: boolean) => void,
      usageInjected: proxy('usageInjected') as (b: InjectedBody) => void,
      usageStripped: proxy('usageStripped'),
      accessLogDropped: proxy('accessLogDropped'),
      rejected: proxy('rejected') as (r: RejectReason) => void,
      clientError: proxy('clientError') as (k: ClientErrorKind) => void,
      bodyUnheld: proxy('bodyUnheld') as (u: HeldBodyUse) => void,
      httpRequest: (dialect, route, method, status, seconds) => push([5, dialect, route, method, status, seconds]),
    },
  };
}

export interface WorkerReceiver {
  receive(batch: readonly BusEvent[]): void;
  /** The worker is gone: finish what it had in flight as failed; returns how many. */
  lost(): number;
  /** Entries of the in-flight table (tests: bounded by the label cap, never by the names sent). */
  readonly tracked: number;
}

/**
 * Primary side: replays one worker's events into the real sink and proxy families, and keeps
 * that worker's in-flight requests per model, so that a worker that dies leaves no request
 * waiting or running forever: they are finished as failed (`worker_exit`). The table is keyed
 * by the model's label (`label`: the label guard, uncounted), not the raw name a client sent,
 * so it holds at most as many models as /metrics does, however many names clients invent; with
 * per-tenant metering, by the tenant's label too (`tenantLabel`), so a lost request is still
 * its tenant's.
 */
export function createWorkerReceiver(
  sink: MeasurementSink,
  events: ProxyEvents,
  label: (model: string) => string,
  tenantLabel: (tenant: string, accepted?: boolean) => string = (t) => t,
  usageLine?: (line: string) => void,
): WorkerReceiver {
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
  return {
    get tracked() {
      return inFlight.size;
    },
    receive(batch) {
      for (const e of batch) {
        switch (e[0]) {
          case 0:
            entry(e[1], e[2], e[3], e[4]).waiting++;
            sink.started(infoOf(e[1], e[2], e[3], e[4]));
            break;
          case 1: {
            // Running under the label its tenant has now that the engine answered (the recorder's).
            tracked(e[1], e[2], e[3], e[5], 'waiting').waiting--;
            entry(e[1], e[2], e[3], e[5], undefined, e[6]).running++;
            const info = infoOf(e[1], e[2], e[3], e[5], e[6]);
            sink.firstOutput(e[7] === undefined ? info : { ...info, requestId: e[7] }, e[4] ?? undefined);
            break;
          }
          case 2:
            sink.interToken?.(infoOf(e[1], e[2], e[3], e[6], e[7]), e[4], e[5]);
            break;
          case 3: {
            const s = e[1];
            if (s.outputSeen) entry(s.api, s.model, s.stream, s.tenant, undefined, s.accepted).running--;
            else tracked(s.api, s.model, s.stream, s.tenant, 'waiting').waiting--;
            sink.finished(s);
            break;
          }
          case 4: {
            const [, name, arg] = e;
            (events[name] as (a?: unknown) => void)(arg ?? undefined);
            break;
          }
          case 5:
            events.httpRequest?.(e[1], e[2], e[3], e[4], e[5]);
            break;
          case 6: {
            const info = infoOf(e[1], e[2], e[3], e[6], e[7]);
            sink.firstVisibleOutput?.(e[8] === undefined ? info : { ...info, requestId: e[8] }, e[4], e[5] ?? undefined);
            break;
          }
          case 7:
            usageLine?.(e[1]);
            break;
        }
      }
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

function infoOf(api: InferenceApi, model: string, stream: boolean, tenant: string | undefined, accepted?: boolean): RequestInfo {
  if (tenant === undefined) return { api, model, stream };
  return accepted === undefined ? { api, model, stream, tenant } : { api, model, stream, tenant, accepted };
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
