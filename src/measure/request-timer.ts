// One inference request's measurement as an explicit state machine:
//   received -> identified (labels known) -> response headers -> first output -> ... -> closed
// Events may arrive in any order the network allows (a response can start before the request
// body was read to its end); the timer keeps timestamps and tells the sink, in order, that the
// request started, that output began, and that it finished, each exactly once.
import type { Clock } from './clock.ts';
import type { Usage } from './usage.ts';
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
   * A chunk of the response body arrived from the upstream (at `at`, for a chunk read after it
   * arrived); the events in it share its arrival time, which is returned.
   */
  responseBody(at?: number): number;
  /** A token-carrying event arrived; `completionTokens` is the cumulative usage it carries, if any. */
  tokenEvent(completionTokens?: number): void;
  /** The upstream reported usage; the last report wins (reports are cumulative). */
  usage(usage: Usage): void;
  /** The upstream said why generation stopped (`finish_reason`); the last report wins. */
  finishReason(reason: string): void;
  /** The upstream named the model that answered (its response's `model`); the first one wins. */
  responseModel(model: string): void;
  /** The upstream sent an error event inside the stream. */
  streamError(): void;
  /** The request failed on the upstream side; the first reason wins. */
  fail(reason: FailureReason, status?: number): void;
  /** The last byte of the response was handed to the client's socket. */
  responseFinished(): void;
  /** The client side is closed: `delivered` when the whole response was sent. */
  close(delivered: boolean): RequestSample | undefined;
  readonly closed: boolean;
}

export function createRequestTimer(api: InferenceApi, clock: Clock, sink: MeasurementSink): RequestTimer {
  const t0 = clock();
  let info: RequestInfo | undefined;
  let status = 0;
  let streamed = false;
  let outputAt: number | undefined;
  let firstTokenAt: number | undefined;
  let lastTokenAt = 0;
  let tokenEvents = 0;
  let headersAt: number | undefined;
  let lastCumulative: number | undefined;
  // When the current chunk arrived: every event in one chunk arrived then (one clock read a chunk).
  let chunkAt: number | undefined;
  let lastUsage: Usage | undefined;
  let finishReason: string | undefined;
  let responseModel: string | undefined;
  let failure: FailureReason | undefined;
  let finishedAt: number | undefined;
  let closed = false;
  let admittedAt: number | undefined;
  let requestParams: RequestParams | undefined;

  const ttft = (): number | undefined => (firstTokenAt === undefined ? undefined : (firstTokenAt - t0) / 1000);

  function output(at: number): void {
    if (outputAt !== undefined) return;
    outputAt = at;
    if (info !== undefined) sink.firstOutput(info, ttft());
  }

  return {
    get closed() {
      return closed;
    },
    identify(model, stream, params) {
      if (info !== undefined || closed) return;
      info = { api, model, stream };
      requestParams = params;
      sink.started(info);
      if (outputAt !== undefined) sink.firstOutput(info, ttft());
    },
    admitted() {
      if (!closed) admittedAt ??= clock();
    },
    responseHeaders(code, isStream) {
      if (closed) return;
      headersAt ??= clock();
      status = code;
      streamed = isStream;
      if (code < 200 || code > 299) failure ??= 'upstream_status';
    },
    responseBody(at) {
      const now = at ?? clock();
      if (closed) return now;
      chunkAt = now;
      // A non-streamed answer arrives whole: its first byte is the first output the wire shows.
      if (!streamed && outputAt === undefined) output(chunkAt);
      return now;
    },
    tokenEvent(completionTokens) {
      if (closed) return;
      const at = chunkAt ?? clock();
      tokenEvents++;
      if (firstTokenAt === undefined) {
        firstTokenAt = at;
        output(at);
      } else if (info !== undefined && sink.interToken !== undefined) {
        // With cumulative usage on every chunk (vLLM's continuous usage stats) an event may carry
        // several tokens: the gap is shared among them.
        const delta = completionTokens !== undefined && lastCumulative !== undefined ? completionTokens - lastCumulative : 1;
        const tokens = delta >= 1 ? delta : 1;
        sink.interToken(info, (at - lastTokenAt) / 1000 / tokens, tokens);
      }
      if (completionTokens !== undefined) lastCumulative = completionTokens;
      lastTokenAt = at;
    },
    usage(u) {
      if (!closed) lastUsage = u;
    },
    finishReason(reason) {
      if (!closed) finishReason = reason;
    },
    responseModel(model) {
      if (!closed) responseModel ??= model;
    },
    streamError() {
      if (!closed) failure ??= 'stream_error';
    },
    fail(reason, code) {
      if (closed) return;
      failure ??= reason;
      if (code !== undefined && status === 0) status = code;
    },
    responseFinished() {
      if (!closed) finishedAt ??= clock();
    },
    close(delivered) {
      if (closed) return undefined;
      closed = true;
      if (info === undefined) {
        info = { api, model: 'unknown', stream: false };
        sink.started(info);
        if (outputAt !== undefined) sink.firstOutput(info, ttft());
      }
      const outcome: Outcome = failure !== undefined ? 'failed' : delivered ? 'success' : 'cancelled';
      let promptTokens: number | undefined;
      let completionTokens: number | undefined;
      let usageSource: UsageSource = 'none';
      if (lastUsage !== undefined) {
        promptTokens = lastUsage.promptTokens;
        completionTokens = lastUsage.completionTokens;
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
        const n = lastUsage?.completionTokens ?? tokenEvents;
        if (n > 1) tpot = { seconds: (lastTokenAt - firstTokenAt) / 1000 / (n - 1), tokens: n - 1 };
      }
      const end = finishedAt ?? clock();
      const sample: RequestSample = {
        ...info,
        status,
        outcome,
        failure,
        cancelPhase: outcome === 'cancelled' ? ((outputAt === undefined ? 'before_first_token' : 'decoding') satisfies CancelPhase) : undefined,
        ttfb: headersAt === undefined ? undefined : (headersAt - t0) / 1000,
        streamed,
        outputSeen: outputAt !== undefined,
        ttft: ttft(),
        lastToken: firstTokenAt === undefined ? undefined : (lastTokenAt - t0) / 1000,
        e2e: outcome === 'success' ? (end - t0) / 1000 : undefined,
        tpot,
        promptTokens,
        completionTokens,
        usageSource,
        tokenEvents,
        finishReason,
        duration: (end - t0) / 1000,
        responseModel,
        queued: admittedAt === undefined ? 0 : (admittedAt - t0) / 1000,
        params: requestParams,
      };
      sink.finished(sample);
      return sample;
    },
  };
}
