// One inference request's measurement as an explicit state machine:
//   received -> identified (labels known) -> response headers -> first output -> ... -> closed
// Events may arrive in any order the network allows (a response can start before the request
// body was read to its end); the timer keeps timestamps and tells the sink, in order, that the
// request started, that output began, and that it finished, each exactly once.
// Over 300 lines: one state machine: its transitions and the figures they stamp read best together.
import type { Clock } from './clock.ts';
import { usageOfTimings, type EngineTimings } from './engine-timings.ts';
import type { StreamHealth } from './stream-health.ts';
import { clampParts, MAX_TOKEN_COUNT, mergeUsage, promptTotal, type Usage, usageTooLarge } from './usage.ts';
import type { CancelPhase, FailureReason, InferenceApi, Outcome, RequestInfo, RequestParams, RequestSample, UsageSource } from './sample.ts';

export interface MeasurementSink {
  /** Labels are known; the request is in flight and waiting for output. */
  started(info: RequestInfo): void;
  /** Output began (the request moves from waiting to running); ttft in seconds for streams. */
  firstOutput(info: RequestInfo, ttftSeconds: number | undefined): void;
  /**
   * The first visible output came (text or a tool call, not reasoning; streams only): seconds
   * from arrival, and for a stream that opened with reasoning its reasoning phase. At most once,
   * after firstOutput.
   */
  firstVisibleOutput?(info: RequestInfo, seconds: number, reasoningPhase: number | undefined): void;
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
  /** Upstream status line arrived; `streamed` when the body is text/event-stream (or Ollama's NDJSON stream). */
  responseHeaders(status: number, streamed: boolean): void;
  /**
   * The response's head is being written to the client (just before): TTFB's end, where the
   * route can tell; else the upstream head's arrival. The first call wins.
   */
  headSent(): void;
  /**
   * A chunk of the response body arrived from the upstream (at `at`, for a chunk read after it
   * arrived); the events in it share its arrival time, which is returned. Called without `at`
   * when the chunk was just written to the client: the end of its time in the proxy.
   */
  responseBody(at?: number): number;
  /**
   * An upstream chunk reached the data plane (its 'data' event; the first of a batch written as
   * one), readable since `at` (the turn's arrival stamp, arrival-clock.ts; else now): the start
   * of its time in the proxy, which the next responseBody() ends.
   */
  chunkArrived(at?: number): void;
  /**
   * A token-carrying event arrived; `completionTokens` is the cumulative usage it carries, if
   * any; `reasoning`, its output is reasoning only (no visible output).
   */
  tokenEvent(completionTokens?: number, reasoning?: boolean): void;
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
  /** The client side is closed: `delivered` when the whole response was sent; `health`: its stream health, kept by the exchange. */
  close(delivered: boolean, health?: StreamHealth): RequestSample | undefined;
}

/**
 * `tenant`: who sent the request (per-tenant metering), carried on every event's info.
 * `arrivedAt`: the request's t0 when known before the timer is made (arrival-clock.ts); else now.
 * `requestId`: the request's id (RequestInfo.requestId), carried on every event's info.
 */
export function createRequestTimer(
  api: InferenceApi,
  clock: Clock,
  sink: MeasurementSink,
  tenant?: string,
  arrivedAt?: number,
  requestId?: string,
): RequestTimer {
  return new Timer(api, clock, sink, tenant, arrivedAt, requestId);
}

// A class, not a closure per method: one object per request on the hot path.
class Timer implements RequestTimer {
  private readonly api: InferenceApi;
  private readonly clock: Clock;
  private readonly sink: MeasurementSink;
  private readonly tenant: string | undefined;
  private readonly requestId: string | undefined;
  private accepted: boolean | undefined = undefined;
  private judged = false;
  private readonly t0: number;
  private info: RequestInfo | undefined = undefined;
  private status = 0;
  private streamed = false;
  private outputAt: number | undefined = undefined;
  private firstTokenAt: number | undefined = undefined;
  private firstVisibleAt: number | undefined = undefined;
  private openedWithReasoning = false;
  private lastTokenAt = 0;
  private tokenEvents = 0;
  private headersAt: number | undefined = undefined;
  private headSentAt: number | undefined = undefined;
  private lastCumulative: number | undefined = undefined;
  // When the current chunk arrived: every event in one chunk arrived then (one clock read a chunk).
  private chunkAt: number | undefined = undefined;
  private lastUsage: Usage | undefined = undefined;
  // A report was refused (a count above MAX_TOKEN_COUNT): the request's usage is not taken at all.
  private usageRefused = false;
  private finish: string | undefined = undefined;
  private model: string | undefined = undefined;
  private failure: FailureReason | undefined = undefined;
  private finishedAt: number | undefined = undefined;
  private admittedAt: number | undefined = undefined;
  private requestParams: RequestParams | undefined = undefined;
  private timings: EngineTimings | undefined = undefined;
  // The proxy's own time on the path: a chunk's arrival to its write, summed over the writes.
  private arrivedAt: number | undefined = undefined;
  private overheadMs = 0;
  private overheadWrites = 0;
  private closed = false;

  constructor(
    api: InferenceApi,
    clock: Clock,
    sink: MeasurementSink,
    tenant: string | undefined,
    arrivedAt: number | undefined,
    requestId: string | undefined,
  ) {
    this.api = api;
    this.clock = clock;
    this.sink = sink;
    this.tenant = tenant;
    this.requestId = requestId;
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

  /** Tells the sink of the first visible output, once the labels are known. */
  private visibleOutput(info: RequestInfo): void {
    const { firstVisibleAt, firstTokenAt } = this;
    if (firstVisibleAt === undefined || this.sink.firstVisibleOutput === undefined) return;
    const phase = this.openedWithReasoning && firstTokenAt !== undefined ? (firstVisibleAt - firstTokenAt) / 1000 : undefined;
    this.sink.firstVisibleOutput(info, (firstVisibleAt - this.t0) / 1000, phase);
  }

  private infoOf(model: string, stream: boolean): RequestInfo {
    const { api, tenant, requestId, accepted } = this;
    const info: RequestInfo =
      tenant === undefined ? { api, model, stream } : accepted === undefined ? { api, model, stream, tenant } : { api, model, stream, tenant, accepted };
    return requestId === undefined ? info : { ...info, requestId };
  }

  identify(model: string, stream: boolean, params?: RequestParams): void {
    if (this.info !== undefined || this.closed) return;
    this.info = this.infoOf(model, stream);
    this.requestParams = params;
    this.sink.started(this.info);
    if (this.outputAt !== undefined) this.sink.firstOutput(this.info, this.ttft());
    this.visibleOutput(this.info);
  }

  admitted(): void {
    if (!this.closed) this.admittedAt ??= this.clock();
  }

  responseHeaders(code: number, isStream: boolean): void {
    if (this.closed) return;
    this.headersAt ??= this.clock();
    this.status = code;
    this.streamed = isStream;
    if (this.tenant !== undefined && !this.judged) {
      // The engine's word on the request: every later event carries it. Only a 2xx accepts it (a
      // place for its tenant): an engine's key check may guard some paths only (vLLM's, those
      // under /v1), so a 404 or any other refusal says nothing of the key. 401 and 403 refuse it.
      this.judged = true;
      this.accepted = code === 401 || code === 403 ? false : code >= 200 && code <= 299 ? true : undefined;
      if (this.info !== undefined && this.accepted !== undefined) this.info = { ...this.info, accepted: this.accepted };
    }
    if (code < 200 || code > 299) this.failure ??= 'upstream_status';
  }

  headSent(): void {
    if (!this.closed) this.headSentAt ??= this.clock();
  }

  chunkArrived(at?: number): void {
    if (!this.closed && this.arrivedAt === undefined) this.arrivedAt = at ?? this.clock();
  }

  responseBody(at?: number): number {
    // A chunk handed over after the last write was stamped left in that write (the relay holds
    // the last read to send it with the end): its time is that write's, never after e2e's end.
    const now = at ?? this.finishedAt ?? this.clock();
    if (this.closed) return now;
    if (at === undefined && this.arrivedAt !== undefined) {
      this.overheadMs += now - this.arrivedAt;
      this.overheadWrites++;
      this.arrivedAt = undefined;
    }
    this.chunkAt = now;
    // A non-streamed answer arrives whole: its first byte is the first output the wire shows.
    if (!this.streamed && this.outputAt === undefined) this.output(now);
    return now;
  }

  tokenEvent(completionTokens?: number, reasoning?: boolean): void {
    if (this.closed) return;
    const at = this.chunkAt ?? this.clock();
    this.tokenEvents++;
    const firstVisible = reasoning !== true && this.firstVisibleAt === undefined;
    if (firstVisible) this.firstVisibleAt = at;
    if (this.firstTokenAt === undefined) {
      this.firstTokenAt = at;
      this.openedWithReasoning = reasoning === true;
      this.output(at);
    } else if (this.info !== undefined && this.sink.interToken !== undefined) {
      // With cumulative usage on every chunk (vLLM's continuous usage stats) an event may carry
      // several tokens: the gap is shared among them.
      const delta =
        completionTokens !== undefined && completionTokens <= MAX_TOKEN_COUNT && this.lastCumulative !== undefined ? completionTokens - this.lastCumulative : 1;
      // biome-ignore lint/complexity/useMathMinMax: a NaN delta counts as one token here; Math.max would pass the NaN on
      const tokens = delta >= 1 ? delta : 1;
      this.sink.interToken(this.info, (at - this.lastTokenAt) / 1000 / tokens, tokens);
    }
    if (completionTokens !== undefined && completionTokens <= MAX_TOKEN_COUNT) this.lastCumulative = completionTokens;
    this.lastTokenAt = at;
    if (firstVisible && this.info !== undefined) this.visibleOutput(this.info);
  }

  usage(u: Usage): void {
    if (this.closed || this.usageRefused) return;
    if (usageTooLarge(u)) {
      // One report that lies makes the others of the request no better: none is taken.
      this.usageRefused = true;
      this.lastUsage = undefined;
      return;
    }
    this.lastUsage = mergeUsage(this.lastUsage, u);
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

  close(delivered: boolean, health?: StreamHealth): RequestSample | undefined {
    if (this.closed) return undefined;
    this.closed = true;
    let info = this.info;
    if (info === undefined) {
      info = this.info = this.infoOf('unknown', false);
      this.sink.started(info);
      if (this.outputAt !== undefined) this.sink.firstOutput(info, this.ttft());
      this.visibleOutput(info);
    }
    const { t0, failure, streamed, tokenEvents, lastUsage, firstTokenAt, lastTokenAt, outputAt } = this;
    const outcome: Outcome = failure !== undefined ? 'failed' : delivered ? 'success' : 'cancelled';
    let promptTokens: number | undefined;
    let completionTokens: number | undefined;
    let usageSource: UsageSource = 'none';
    // Without usage, the engine's own timings state the counts (the current llama-server's
    // stream when usage was not asked): the engine's figures, under the same trust rules.
    const timed = lastUsage === undefined && !this.usageRefused ? this.timingsUsage() : undefined;
    const stated = lastUsage ?? timed;
    if (stated !== undefined) {
      promptTokens = promptTotal(stated);
      completionTokens = stated.completionTokens;
      // A stream that did not end cleanly may have delivered more than its last report counted:
      // the Messages API reports output_tokens at message_start, then only at the end.
      if (streamed && outcome !== 'success' && tokenEvents > (completionTokens ?? 0)) completionTokens = tokenEvents;
      usageSource = timed === undefined ? 'upstream' : 'timings';
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
    const { reasoningTokens, cachedTokens, rejections } = clampParts(stated, promptTokens, completionTokens, this.usageRefused);
    let tpot: RequestSample['tpot'];
    if (streamed && firstTokenAt !== undefined && tokenEvents > 1) {
      const n = (usageSource === 'upstream' || usageSource === 'timings' ? completionTokens : undefined) ?? tokenEvents;
      if (n > 1) tpot = { seconds: (lastTokenAt - firstTokenAt) / 1000 / (n - 1), tokens: n - 1 };
    }
    const end = this.finishedAt ?? this.clock();
    health?.end(this.clock(), streamed && outcome !== 'success'); // a cut stream's silence before its end counts
    const headersAt = this.headSentAt ?? this.headersAt;
    // The request's labels as plain members, not a spread: spreading them first made each later
    // member grow the object's property store (~1.5 KB of garbage a request).
    const sample: RequestSample = {
      api: info.api,
      model: info.model,
      stream: info.stream,
      tenant: info.tenant,
      requestId: info.requestId,
      accepted: info.accepted,
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
      // Plain members (undefined where unknown), not spreads: the sample is built once per request.
      engineTimings: this.timings,
      cachedPromptTokens: cachedTokens,
      cacheWriteTokens: lastUsage?.cacheCreationTokens,
      reasoningTokens,
      usageRejections: rejections,
      longestGap: streamed ? health?.longestGap : undefined,
      backpressure: health?.blocked ?? 0,
      proxyOverhead: streamed && this.overheadWrites > 0 ? this.overheadMs / this.overheadWrites / 1000 : undefined,
    };
    this.sink.finished(sample);
    return sample;
  }

  /**
   * The counts the engine's timings state, as a usage report: prompt = prompt_n + cache_n (as
   * llama-server's usage.prompt_tokens), completion = predicted_n. Undefined unless they are
   * whole numbers; one above MAX_TOKEN_COUNT is refused as a usage report's would be.
   */
  private timingsUsage(): Usage | undefined {
    const u = this.timings === undefined ? undefined : usageOfTimings(this.timings);
    if (u === undefined || !usageTooLarge(u)) return u;
    this.usageRefused = true;
    return undefined;
  }
}
