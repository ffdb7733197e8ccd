// One inference request's measurement as an explicit state machine:
//   received -> identified (labels known) -> response headers -> first output -> ... -> closed
// Events may arrive in any order the network allows (a response can start before the request
// body was read to its end); the timer keeps timestamps and tells the sink, in order, that the
// request started, that output began, and that it finished, each exactly once.
import type { Clock } from './clock.ts';
import type { EngineTimings } from './engine-timings.ts';
import { mergeUsage, promptTotal, type Usage } from './usage.ts';
import type { CancelPhase, FailureReason, InferenceApi, Outcome, RequestInfo, RequestParams, RequestSample, UsageSource } from './sample.ts';

export interface MeasurementSink {
  /** Labels are known; the request is in flight and waiting for output. */
  started(info: RequestInfo): void;
  /** Output began (the request moves from waiting to running); ttft in seconds for streams. */
  firstOutput(info: RequestInfo, ttftSeconds: number | undefined): void;
  /** The request is over. Called once, after started. */
  finished(sample: RequestSample): void;
  /**
   * A token-carrying event after the first: `seconds` per token since the previous one, over
   * `tokens` tokens (the event's usage delta when the upstream reports cumulative usage, else 1).
   */
  interToken?(info: RequestInfo, seconds: number, tokens: number): void;
}

export interface RequestTimer {
  /** The request body told us the model and stream flag (and its parameters). Later calls are ignored. */
  identify(model: string, stream: boolean, params?: RequestParams): void;
  /** The request left infermeter's admission queue and is forwarded now (only called with a limit). */
  admitted(): void;
  /** Upstream status line arrived; `streamed` when the body is text/event-stream. */
  responseHeaders(status: number, streamed: boolean): void;
  /**
   * The response's head is being written to the client (just before): TTFB's end, where the
   * route can tell; else the upstream head's arrival. The first call wins.
   */
  headSent(): void;
  /**
   * A chunk of the response body arrived from the upstream (at `at`, for a chunk read after it
   * arrived); the events in it share its arrival time, which is returned.
   */
  responseBody(at?: number): number;
  /** A token-carrying event arrived; `completionTokens` is the cumulative usage it carries, if any. */
  tokenEvent(completionTokens?: number): void;
  /** The upstream reported usage; the last report wins, field by field (reports are cumulative). */
  usage(usage: Usage): void;
  /** The upstream said why generation stopped (`finish_reason`); the last report wins. */
  finishReason(reason: string): void;
  /** The upstream named the model that answered (its response's `model`); the first one wins. */
  responseModel(model: string): void;
  /** The engine reported its own timings (llama.cpp's `timings`); the last report wins. */
  engineTimings(timings: EngineTimings): void;
  /** The upstream sent an error event inside the stream. */
  streamError(): void;
  /** The request failed on the upstream side; the first reason wins. */
  fail(reason: FailureReason, status?: number): void;
  /**
   * The last byte of the response is being handed to the client's socket (called just before
   * its last write, so e2e never ends after the last byte left; the first call wins).
   */
  responseFinished(): void;
  /** The client side is closed: `delivered` when the whole response was sent. */
  close(delivered: boolean): RequestSample | undefined;
  readonly closed: boolean;
}

/**
 * `tenant`: who sent the request (per-tenant metering), carried on every event's info.
 * `arrivedAt`: the request's t0 when known before the timer is made (arrival-clock.ts); else now.
 */
export function createRequestTimer(api: InferenceApi, clock: Clock, sink: MeasurementSink, tenant?: string, arrivedAt?: number): RequestTimer {
  return new Timer(api, clock, sink, tenant, arrivedAt);
}

// A class, not a closure per method: one object per request on the hot path.
class Timer implements RequestTimer {
  private readonly api: InferenceApi;
  private readonly clock: Clock;
  private readonly sink: MeasurementSink;
  private readonly tenant: string | undefined;
  private accepted: boolean | undefined = undefined;
  private readonly t0: number;
  private info: RequestInfo | undefined = undefined;
  private status = 0;
  private streamed = false;
  private outputAt: number | undefined = undefined;
  private firstTokenAt: number | undefined = undefined;
  private lastTokenAt = 0;
  private tokenEvents = 0;
  private headersAt: number | undefined = undefined;
  private headSentAt: number | undefined = undefined;
  private lastCumulative: number | undefined = undefined;
  // When the current chunk arrived: every event in one chunk arrived then (one clock read a chunk).
  private chunkAt: number | undefined = undefined;
  private lastUsage: Usage | undefined = undefined;
  private finish: string | undefined = undefined;
  private model: string | undefined = undefined;
  private failure: FailureReason | undefined = undefined;
  private finishedAt: number | undefined = undefined;
  private admittedAt: number | undefined = undefined;
  private requestParams: RequestParams | undefined = undefined;
  private timings: EngineTimings | undefined = undefined;
  closed = false;

  constructor(api: InferenceApi, clock: Clock, sink: MeasurementSink, tenant: string | undefined, arrivedAt: number | undefined) {
    this.api = api;
    this.clock = clock;
    this.sink = sink;
    this.tenant = tenant;
    this.t0 = arrivedAt ?? clock();
  }

  private ttft(): number | undefined {
    return this.firstTokenAt === undefined ? undefined : (this.firstTokenAt - this.t0) / 1000;
  }

  private output(at: number): void {
    if (this.outputAt !== undefined) return;
    this.outputAt = at;
    if (this.info !== undefined) this.sink.firstOutput(this.info, this.ttft());
  }

  private infoOf(model: string, stream: boolean): RequestInfo {
    const { api, tenant } = this;
    if (tenant === undefined) return { api, model, stream };
    return this.accepted === undefined ? { api, model, stream, tenant } : { api, model, stream, tenant, accepted: this.accepted };
  }

  identify(model: string, stream: boolean, params?: RequestParams): void {
    if (this.info !== undefined || this.closed) return;
    this.info = this.infoOf(model, stream);
    this.requestParams = params;
    this.sink.started(this.info);
    if (this.outputAt !== undefined) this.sink.firstOutput(this.info, this.ttft());
  }

  admitted(): void {
    if (!this.closed) this.admittedAt ??= this.clock();
  }

  responseHeaders(code: number, isStream: boolean): void {
    if (this.closed) return;
    this.headersAt ??= this.clock();
    this.status = code;
    this.streamed = isStream;
    if (this.tenant !== undefined && this.accepted === undefined) {
      // The engine's word on the request's credentials: every later event carries it.
      this.accepted = code !== 401 && code !== 403;
      if (this.info !== undefined) this.info = { ...this.info, accepted: this.accepted };
    }
    if (code < 200 || code > 299) this.failure ??= 'upstream_status';
  }

  headSent(): void {
    if (!this.closed) this.headSentAt ??= this.clock();
  }

  responseBody(at?: number): number {
    const now = at ?? this.clock();
    if (this.closed) return now;
    this.chunkAt = now;
    // A non-streamed answer arrives whole: its first byte is the first output the wire shows.
    if (!this.streamed && this.outputAt === undefined) this.output(now);
    return now;
  }

  tokenEvent(completionTokens?: number): void {
    if (this.closed) return;
    const at = this.chunkAt ?? this.clock();
    this.tokenEvents++;
    if (this.firstTokenAt === undefined) {
      this.firstTokenAt = at;
      this.output(at);
    } else if (this.info !== undefined && this.sink.interToken !== undefined) {
      // With cumulative usage on every chunk (vLLM's continuous usage stats) an event may carry
      // several tokens: the gap is shared among them.
      const delta = completionTokens !== undefined && this.lastCumulative !== undefined ? completionTokens - this.lastCumulative : 1;
      const tokens = delta >= 1 ? delta : 1;
      this.sink.interToken(this.info, (at - this.lastTokenAt) / 1000 / tokens, tokens);
    }
    if (completionTokens !== undefined) this.lastCumulative = completionTokens;
    this.lastTokenAt = at;
  }

  usage(u: Usage): void {
    if (!this.closed) this.lastUsage = mergeUsage(this.lastUsage, u);
  }

  finishReason(reason: string): void {
    if (!this.closed) this.finish = reason;
  }

  responseModel(model: string): void {
    if (!this.closed) this.model ??= model;
  }

  engineTimings(timings: EngineTimings): void {
    if (!this.closed) this.timings = timings;
  }

  streamError(): void {
    if (!this.closed) this.failure ??= 'stream_error';
  }

  fail(reason: FailureReason, code?: number): void {
    if (this.closed) return;
    this.failure ??= reason;
    if (code !== undefined && this.status === 0) this.status = code;
  }

  responseFinished(): void {
    if (!this.closed) this.finishedAt ??= this.clock();
  }

  close(delivered: boolean): RequestSample | undefined {
    if (this.closed) return undefined;
    this.closed = true;
    let info = this.info;
    if (info === undefined) {
      info = this.info = this.infoOf('unknown', false);
      this.sink.started(info);
      if (this.outputAt !== undefined) this.sink.firstOutput(info, this.ttft());
    }
    const { t0, failure, streamed, tokenEvents, lastUsage, firstTokenAt, lastTokenAt, outputAt } = this;
    const outcome: Outcome = failure !== undefined ? 'failed' : delivered ? 'success' : 'cancelled';
    let promptTokens: number | undefined;
    let completionTokens: number | undefined;
    let usageSource: UsageSource = 'none';
    if (lastUsage !== undefined) {
      promptTokens = promptTotal(lastUsage);
      completionTokens = lastUsage.completionTokens;
      // A stream that did not end cleanly may have delivered more than its last report counted:
      // the Messages API reports output_tokens at message_start, then only at the end.
      if (streamed && outcome !== 'success' && tokenEvents > (completionTokens ?? 0)) completionTokens = tokenEvents;
      usageSource = 'upstream';
    } else if (streamed && outcome === 'success') {
      // The spec's fallback for a stream without usage: tokens are reported as 0.
      promptTokens = 0;
      completionTokens = 0;
      usageSource = 'fallback';
    } else if (streamed && tokenEvents > 0) {
      // A stream cut short (cancelled, or broken) keeps the tokens it did deliver, one per event.
      completionTokens = tokenEvents;
      usageSource = 'events';
    }
    let tpot: RequestSample['tpot'];
    if (streamed && firstTokenAt !== undefined && tokenEvents > 1) {
      const n = (usageSource === 'upstream' ? completionTokens : undefined) ?? tokenEvents;
      if (n > 1) tpot = { seconds: (lastTokenAt - firstTokenAt) / 1000 / (n - 1), tokens: n - 1 };
    }
    const end = this.finishedAt ?? this.clock();
    const headersAt = this.headSentAt ?? this.headersAt;
    const sample: RequestSample = {
      ...info,
      status: this.status,
      outcome,
      failure,
      cancelPhase: outcome === 'cancelled' ? ((outputAt === undefined ? 'before_first_token' : 'decoding') satisfies CancelPhase) : undefined,
      ttfb: headersAt === undefined ? undefined : (headersAt - t0) / 1000,
      streamed,
      outputSeen: outputAt !== undefined,
      ttft: this.ttft(),
      lastToken: firstTokenAt === undefined ? undefined : (lastTokenAt - t0) / 1000,
      e2e: outcome === 'success' ? (end - t0) / 1000 : undefined,
      tpot,
      promptTokens,
      completionTokens,
      usageSource,
      tokenEvents,
      finishReason: this.finish,
      duration: (end - t0) / 1000,
      responseModel: this.model,
      queued: this.admittedAt === undefined ? 0 : (this.admittedAt - t0) / 1000,
      params: this.requestParams,
      ...(this.timings === undefined ? {} : { engineTimings: this.timings }),
    };
    this.sink.finished(sample);
    return sample;
  }
}
