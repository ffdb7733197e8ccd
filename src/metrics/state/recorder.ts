// The shared measurement state, fed by every request timer: per model, the lifetime counts,
// the requests in flight (waiting for output, or running) and token sums over a sliding window.
// Dialects read this state at scrape time for counters and gauges, and get each request's
// events for their histograms: measured once, exposed many ways.
import type { Clock } from '../../measure/clock.ts';
import type { MeasurementSink } from '../../measure/request-timer.ts';
import type { RequestInfo, RequestSample } from '../../measure/sample.ts';
import type { LabelGuard } from '../exposition/label-guard.ts';
import { tenantLabel } from './tenant-label.ts';
import { createSlidingSum, type SlidingSum } from '../windows/sliding-sum.ts';

export interface ModelState {
  readonly model: string;
  received: number;
  success: number;
  failed: number;
  /** Cancelled by the client before output began, and while decoding. */
  cancelledBeforeFirstToken: number;
  cancelledDecoding: number;
  /** Streamed requests that ended without a token, by why. */
  noFirstToken: { no_token: number; error: number; cancelled: number };
  /** Streams that succeeded without a usage report: their tokens count as 0 (the spec's fallback). */
  withoutUsage: number;
  /** Their token-carrying events: the tokens they delivered, as infermeter counts them (one per event). */
  withoutUsageEvents: number;
  promptTokens: number;
  generationTokens: number;
  /** In flight, no output seen yet. */
  waiting: number;
  /** In flight, output flowing. */
  running: number;
  readonly promptWindow: SlidingSum;
  readonly generationWindow: SlidingSum;
}

export interface MeasurementState {
  readonly models: ReadonlyMap<string, ModelState>;
  readonly clock: Clock;
  /** Seconds of the sliding token window. */
  readonly windowSeconds: number;
  /** Seconds covered by the window now: the whole window, or the uptime while it is shorter. */
  windowCoverage(): number;
}

/** What a dialect hears of each request, besides reading the shared state. */
export interface SampleObserver {
  /** A request's labels are known (as sent: model and tenant not yet bounded). */
  started?(raw: RequestInfo): void;
  firstOutput?(info: RequestInfo, ttftSeconds: number | undefined): void;
  /** The first visible output (not reasoning) of a stream: seconds from arrival, and the reasoning phase before it. */
  firstVisibleOutput?(info: RequestInfo, seconds: number, reasoningPhase: number | undefined): void;
  interToken?(info: RequestInfo, seconds: number, tokens: number): void;
  /** `raw`: the same request as sent (model and tenant not bounded). */
  finished?(sample: RequestSample, raw: RequestInfo): void;
}

export interface Recorder {
  readonly state: MeasurementState;
  readonly sink: MeasurementSink;
  addObserver(observer: SampleObserver): void;
}

/** `tenants`: the guard of the tenant label (per-tenant metering), like `guard`'s of model_name. */
export function createRecorder(clock: Clock, windowSeconds: number, guard?: LabelGuard, tenants?: LabelGuard): Recorder {
  const models = new Map<string, ModelState>();
  // Every event's model (and tenant) goes through its guard: a bounded set of label values, the
  // same for every event of one request.
  // A tenant gets a place only once the engine accepted one of its requests (a 2xx answer):
  // before that (and for any request the engine refused with 401 or 403) it is
  // `unauthenticated`, so keys the engine refuses, or answers 404 on a path its key check does
  // not guard, never take the real tenants' places. `started` needs no tenant.
  // An overflow is counted once per request: the model's when it starts, the tenant's when it ends.
  const infoOf = <T extends RequestInfo>(i: T, event: 'started' | 'finished' | 'other' = 'other'): T => {
    let info = i;
    if (guard !== undefined) {
      const m = guard.model(i.model, event === 'started');
      if (m !== i.model) info = { ...info, model: m };
    }
    if (event !== 'started' && tenants !== undefined && i.tenant !== undefined) {
      const t = tenantLabel(tenants, i.tenant, i.accepted, event === 'finished');
      if (t !== i.tenant) info = { ...info, tenant: t };
    }
    return info;
  };
  // Indexed loops over the observers: a for-of here allocated an iterator per call (~1 KB a
  // request in an allocation profile of the round trip).
  const observers: SampleObserver[] = [];
  const startedAt = clock();

  const model = (name: string): ModelState => {
    let m = models.get(name);
    if (m === undefined) {
      m = {
        model: name,
        received: 0,
        success: 0,
        failed: 0,
        cancelledBeforeFirstToken: 0,
        cancelledDecoding: 0,
        noFirstToken: { no_token: 0, error: 0, cancelled: 0 },
        withoutUsage: 0,
        withoutUsageEvents: 0,
        promptTokens: 0,
        generationTokens: 0,
        waiting: 0,
        running: 0,
        promptWindow: createSlidingSum(windowSeconds),
        generationWindow: createSlidingSum(windowSeconds),
      };
      models.set(name, m);
    }
    return m;
  };

  const sink: MeasurementSink = {
    started(raw) {
      const info = infoOf(raw, 'started');
      const m = model(info.model);
      m.received++;
      m.waiting++;
      for (let i = 0; i < observers.length; i++) observers[i]!.started?.(raw);
    },
    interToken(raw, seconds, tokens) {
      const info = infoOf(raw);
      for (let i = 0; i < observers.length; i++) observers[i]!.interToken?.(info, seconds, tokens);
    },
    firstOutput(raw, ttft) {
      const info = infoOf(raw);
      const m = model(info.model);
      m.waiting--;
      m.running++;
      for (let i = 0; i < observers.length; i++) observers[i]!.firstOutput?.(info, ttft);
    },
    firstVisibleOutput(raw, seconds, reasoningPhase) {
      const info = infoOf(raw);
      for (let i = 0; i < observers.length; i++) observers[i]!.firstVisibleOutput?.(info, seconds, reasoningPhase);
    },
    finished(raw) {
      let sample = infoOf(raw, 'finished');
      // The upstream's answer names a model too (gen_ai.response.model): bounded the same way.
      if (guard !== undefined && sample.responseModel !== undefined) {
        const responseModel = guard.model(sample.responseModel);
        if (responseModel !== sample.responseModel) sample = { ...sample, responseModel };
      }
      const m = model(sample.model);
      if (sample.outputSeen) m.running--;
      else m.waiting--;
      if (sample.outcome === 'success') m.success++;
      else if (sample.outcome === 'failed') m.failed++;
      else if (sample.cancelPhase === 'decoding') m.cancelledDecoding++;
      else m.cancelledBeforeFirstToken++;
      if ((sample.stream || sample.streamed) && sample.ttft === undefined) {
        m.noFirstToken[sample.outcome === 'success' ? 'no_token' : sample.outcome === 'failed' ? 'error' : 'cancelled']++;
      }
      if (sample.usageSource === 'fallback') {
        m.withoutUsage++;
        m.withoutUsageEvents += sample.tokenEvents;
      }
      const now = clock();
      if (sample.promptTokens !== undefined) {
        m.promptTokens += sample.promptTokens;
        m.promptWindow.add(now, sample.promptTokens);
      }
      if (sample.completionTokens !== undefined) {
        m.generationTokens += sample.completionTokens;
        m.generationWindow.add(now, sample.completionTokens);
      }
      for (let i = 0; i < observers.length; i++) observers[i]!.finished?.(sample, raw);
    },
  };

  const state: MeasurementState = {
    models,
    clock,
    windowSeconds,
    windowCoverage: () => Math.min(windowSeconds, Math.max((clock() - startedAt) / 1000, 1)),
  };

  return { state, sink, addObserver: (o) => observers.push(o) };
}
