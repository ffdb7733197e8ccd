// One inference request on its way through the proxy: its lifecycle (lifecycle.ts) and what
// each phase owns. The upstream request exists from `forwarded`, the upstream's response from
// when its head arrived, the answer's kind from `answered`; the request timer measures beside
// them (measure/request-timer.ts), driven only through the methods below (the response tap is
// handed it by `tap`). Only these methods move a request on, and each checks its move: a move
// the lifecycle does not allow is reported, not acted on.
import type { UpstreamRequestHandle, UpstreamResponse } from './upstream-response.ts';
import type { Clock } from '../measure/clock.ts';
import { createRequestTimer, type MeasurementSink, type RequestTimer } from '../measure/request-timer.ts';
import { StreamHealth } from '../measure/stream-health.ts';
import type { FailureReason, InferenceApi, RequestSample } from '../measure/sample.ts';
import type { RequestInspection, UninspectedReason } from '../stream-tap/request-tap.ts';
import { tapResponse, type ResponseTap, type TapOptions } from '../stream-tap/response-tap.ts';
import { allowed, LifecycleViolation, type AnswerKind, type Phase, type ResendReason } from './lifecycle.ts';

export interface ExchangeOptions {
  readonly clock: Clock;
  /** The request's t0 (measure/arrival-clock.ts); undefined: the clock's now. */
  readonly arrival?: Clock | undefined;
  readonly sink: MeasurementSink;
  /** Counts bodies that gave no labels. */
  readonly uninspected: (reason: UninspectedReason) => void;
  /** An impossible move: the data plane's bug, reported (never thrown into a socket's handler). */
  readonly violation: (error: LifecycleViolation) => void;
}

/**
 * A request whose usage was injected: the client's own body, for the one re-send without it
 * (undefined for a body that streamed through, which cannot be sent again, and once an answer
 * that is no refusal began: it is let go then).
 */
export interface Injection {
  readonly original: Buffer | undefined;
  readonly refused: boolean;
}

const RESEND_BITS: Readonly<Record<ResendReason, number>> = { refused_injection: 1, stale_connection: 2 };

export class Exchange {
  readonly api: InferenceApi;
  readonly requestId: string | undefined;
  /** Body bytes read from the client and handed to it (the access log). */
  bytesIn = 0;
  bytesOut = 0;
  private current: Phase = 'received';
  private identified = false;
  private lastResend: ResendReason | undefined = undefined;
  private resends = 0; // a bit per reason: each at most once
  private answer: AnswerKind | undefined = undefined;
  private injected: Injection | undefined = undefined;
  private request: UpstreamRequestHandle | undefined = undefined;
  private response: UpstreamResponse | undefined = undefined;
  private readonly options: ExchangeOptions;
  private readonly timer: RequestTimer;
  /** The longest silence between the batches relayed, and the client's back-pressure. */
  private readonly health = new StreamHealth();

  /** `metricsId`: the request's id in its histograms' exemplars (RequestInfo.requestId). */
  constructor(api: InferenceApi, requestId: string | undefined, options: ExchangeOptions, tenant?: string, metricsId?: string) {
    this.api = api;
    this.requestId = requestId;
    this.options = options;
    // Arrival: t0 of every figure of this request.
    this.timer = createRequestTimer(api, options.clock, options.sink, tenant, options.arrival?.(), metricsId ?? requestId);
  }

  /**
   * An upstream chunk arrived: readable since the turn's arrival stamp (every chunk and request
   * handled in one turn of the loop was readable when it began), the start of its time in the proxy.
   */
  chunkArrived(): void {
    // The arrival clock reads the clock once per turn: a batch is written in the turn it arrived.
    const at = this.options.arrival?.() ?? this.options.clock();
    this.health.batch(at);
    this.timer.chunkArrived(at);
  }

  /** The client's socket refused a write (`true`) or drained (`false`): its back-pressure. */
  backpressure(on: boolean): void {
    this.health.backpressure(on, this.options.clock());
  }

  /** It left the concurrency limit's queue and is forwarded now (only with a limit). */
  admitted(): void {
    this.timer.admitted();
  }
  /** Just before the client's response head is written: TTFB. */
  headSent(): void {
    this.timer.headSent();
  }
  /** Just before the last bytes are written to the client: the end of e2e. */
  responseFinished(): void {
    this.timer.responseFinished();
  }
  /** The upstream's head of an answer the tap does not read (a held 4xx passed on). */
  heldHead(status: number): void {
    this.timer.responseHeaders(status, false);
  }
  /** The request failed on the upstream's side (or its own timeout); the first reason wins. */
  fail(reason: FailureReason, status?: number): void {
    this.timer.fail(reason, status);
  }
  /** The response tap on the upstream's answer, reading into this request's timer; undefined (reported) when it cannot start. */
  tap(response: UpstreamResponse, options: TapOptions): ResponseTap | undefined {
    try {
      return tapResponse(response, this.timer, options);
    } catch (error) {
      options.problem('tap_error', error);
      return undefined;
    }
  }

  get phase(): Phase {
    return this.current;
  }
  /** How the client was answered, once it was. */
  get answeredWith(): AnswerKind | undefined {
    return this.answer;
  }
  /** Why the request was forwarded last, when that was a re-send. */
  get resendReason(): ResendReason | undefined {
    return this.lastResend;
  }
  /** Whether it was re-sent for `reason` already. */
  resentFor(reason: ResendReason): boolean {
    return (this.resends & RESEND_BITS[reason]) !== 0;
  }
  /** Set when the body sent upstream had usage injected. */
  get injection(): Injection | undefined {
    return this.injected;
  }
  /** The request to the upstream, from `forwarded` (a timeout or a client that left aborts it). */
  get upstreamRequest(): UpstreamRequestHandle | undefined {
    return this.request;
  }
  /** The upstream's response, once its head arrived (for the request forwarded last). */
  get upstreamResponse(): UpstreamResponse | undefined {
    return this.response;
  }

  /**
   * The body told the model, the stream flag and the generation parameters, or why it could
   * not. Before forwarding (a held body) this is the `identified` phase; a body read as it
   * streams upstream is identified on the side, later. Once per request; a side reader that
   * ends after the client left is too late to matter and is ignored.
   */
  identify(result: RequestInspection): void {
    if (this.current === 'finished') {
      if (!result.ok) this.options.uninspected(result.reason);
      return;
    }
    if (this.identified) {
      this.options.violation(new LifecycleViolation(this.current, 'identify', 'identified twice'));
      return;
    }
    this.identified = true;
    if (this.current === 'received') this.current = 'identified';
    if (result.ok) {
      const { maxTokens, n } = result;
      this.timer.identify(result.model ?? 'unknown', result.stream === true, maxTokens === undefined && n === undefined ? undefined : { maxTokens, n });
    } else {
      this.options.uninspected(result.reason);
      this.timer.identify('unknown', false);
    }
  }

  /** The request goes upstream with usage injected into its body (`original`: the client's, when held). */
  /**
   * The client's own stream_options names continuous_usage_stats: with the include_usage
   * injected, the engine puts usage on every chunk, which the client would not get directly
   * (vLLM takes it only with include_usage): each chunk's usage member is removed too.
   */
  continuousAsked = false;

  inject(original: Buffer | undefined): void {
    this.injected = { original, refused: false };
  }

  /** An answer that is no refusal began: the client's own body is not needed again. */
  letOriginalGo(): void {
    if (this.injected?.original !== undefined) this.injected = { original: undefined, refused: this.injected.refused };
  }

  /** The upstream refused the injected field: the client's own body is sent again. */
  refuseInjection(): void {
    if (this.injected !== undefined) this.injected = { original: this.injected.original, refused: true };
  }

  /** Sent upstream: first, or once more (`resend`), at most once for each reason. */
  forwarded(request: UpstreamRequestHandle, resend?: ResendReason): boolean {
    if (resend === undefined ? this.current === 'forwarded' : this.current !== 'forwarded' || this.resentFor(resend)) {
      this.options.violation(new LifecycleViolation(this.current, resend === undefined ? 'forwarded' : 'resend', resend));
      return false;
    }
    if (!this.move('forwarded')) return false;
    this.lastResend = resend;
    if (resend !== undefined) this.resends |= RESEND_BITS[resend];
    this.request = request;
    // A re-send's answer is still to come: the refusal was not it.
    this.response = undefined;
    return true;
  }

  /** The upstream's head arrived: not an answer yet (a held 4xx may turn out a refusal). */
  responded(response: UpstreamResponse): void {
    this.response = response;
  }

  /** The client's answer begins: the upstream's, or infermeter's own error. */
  answered(kind: AnswerKind): boolean {
    if (!this.move('answered')) return false;
    this.answer = kind;
    return true;
  }

  /**
   * The client's side closed (`delivered`: the whole answer was sent): the request's measurement
   * ends and its sample is returned. `measured` false: refused or given up before it began (it
   * never reached the upstream and is not counted).
   */
  finish(delivered: boolean, measured = true): RequestSample | undefined {
    if (!this.move('finished')) return undefined;
    return measured ? this.timer.close(delivered, this.health) : undefined;
  }

  private move(to: Phase): boolean {
    if (!allowed(this.current, to)) {
      this.options.violation(new LifecycleViolation(this.current, to));
      return false;
    }
    this.current = to;
    return true;
  }
}
