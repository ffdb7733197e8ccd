// The measured route: one inference request's way through, phase by phase (lifecycle.ts).
//   received    a place under the concurrency limit, the deadlines armed;
//   identified  a chat or completions body held to inject usage (request-body.ts), or else
//               read on the side as it streams upstream (stream-tap/request-tap.ts);
//   forwarded   by the upstream attempt (upstream-attempt.ts), which owns the sending and its
//               re-sends and reports one answer or one failure;
//   answered    the upstream's head copied (response-head.ts) and its body relayed (relay.ts),
//               an event stream's usage-only chunk stripped, or infermeter's own error
//               (error-answer.ts);
//   finished    the client's side closed: measured, logged.
// The response tap reads what the upstream sent, after it was written to the client.
// Over 300 lines: one method per phase, in the lifecycle's order; the re-sends live in upstream-attempt.ts.
import type { UpstreamResponse } from './upstream-response.ts';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AccessLog } from '../access-log.ts';
import type { BodyBudget, BodyHold } from './body-budget.ts';
import type { Logger } from '../log.ts';
import type { RejectReason } from '../metrics/own/proxy-families.ts';
import { tapRequestBody } from '../stream-tap/request-tap.ts';
import { isEventStream, type TapOptions } from '../stream-tap/response-tap.ts';
import { createUsageStrip, type UsageStripOptions } from '../stream-tap/usage-strip.ts';
import type { TenantOf } from '../tenants/tenant-of.ts';
import { accessRecord } from './access-record.ts';
import type { UsageWriter } from '../ledger/ledger.ts';
import type { ConcurrencyLimit } from './concurrency-limit.ts';
import type { Deadlines } from './deadlines.ts';
import { actOnFailedLeg, writeErrorAnswer, type UpstreamErrorKind } from './error-answer.ts';
import { Exchange, type ExchangeOptions } from './exchange.ts';
import type { InferenceRoute } from './inference-route.ts';
import type { ProxyErrorKind } from './openai-error.ts';
import { relay } from './relay.ts';
import { holdAndInject } from './injected-request.ts';
import { pathOf } from './request-path.ts';
import { copyHead, cutWithUpstream, flushIdleHeaders } from './response-head.ts';
import { UpstreamAttempt, type HeldBytes, type UpstreamAttemptOptions } from './upstream-attempt.ts';

export type { UsageInjection } from './usage-injection.ts';

export interface MeasuredRouteOptions extends ExchangeOptions, UpstreamAttemptOptions {
  readonly log: Logger;
  readonly deadlines: Deadlines;
  /** undefined: no concurrency limit. */
  readonly limit: ConcurrencyLimit | undefined;
  /** The process's budget for held bodies (INFERMETER_MAX_HELD_BODY_BYTES); undefined: none. */
  readonly bodyBudget?: BodyBudget | undefined;
  readonly maxEventBytes: number;
  readonly tap: TapOptions;
  /** Counts failures of the proxy itself to reach or hear the upstream, by kind. */
  readonly proxyError: (kind: ProxyErrorKind) => void;
  /** Counts inference requests refused with 503, by why. */
  readonly rejected?: ((reason: RejectReason) => void) | undefined;
  readonly accessLog?: AccessLog | undefined;
  /** The usage ledger's writer; undefined: off. */
  readonly usage?: UsageWriter | undefined;
  /** Who sent a request, read from its headers (per-tenant metering); undefined: off. */
  readonly tenantOf?: TenantOf | undefined;
  /** Calls `go` when the request may go upstream (upstream-connections.ts: a pipelined one after the response before it); default at once. */
  readonly turn?: ((res: ServerResponse, go: () => void) => void) | undefined;
  /** Where a request's end leaves its last reading and its recording, after the turn's reads (settle-queue.ts); undefined: at once. */
  readonly settle?: ((work: () => void) => void) | undefined;
}

export type MeasuredRoute = (req: IncomingMessage, res: ServerResponse, route: InferenceRoute) => void;

const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

export function createMeasuredRoute(options: MeasuredRouteOptions): MeasuredRoute {
  // Not expected: a write after end would be a bug, but one that must not take the proxy down.
  const onResponseError = (error: Error): void => options.log.warnThrottled('response_error', 'error on a client response', { error: String(error) });
  // The usage strip's options are the route's: made once, not per request.
  const strip: UsageStripOptions = {
    maxEventBytes: options.maxEventBytes,
    members: options.usageInjection?.continuous === true,
    stripped: (bytes, timings) => {
      options.usageInjection?.stripped(bytes);
      if (timings) options.usageInjection?.countsStated();
    },
  };
  return (req, res, route) => {
    res.on('error', onResponseError);
    new InferenceCall(options, strip, req, res, route).receive();
  };
}

/** One inference request, from its arrival to its client's close. */
class InferenceCall {
  private readonly options: MeasuredRouteOptions;
  private readonly strip: UsageStripOptions;
  private readonly req: IncomingMessage;
  private readonly res: ServerResponse;
  private readonly exchange: Exchange;
  private begun = false;
  private release: () => void = ignore;
  /** Just before the last bytes are written to the client: the end of e2e. */
  private readonly lastWrite = (): void => this.exchange.responseFinished();
  /** An upstream chunk arrived: the start of the proxy's own time on it (infermeter_proxy_overhead_seconds). */
  private readonly arrived = (): void => this.exchange.chunkArrived();
  /** The client's socket refused a write, or drained (infermeter_client_backpressure_seconds). */
  private readonly backpressure = (on: boolean): void => this.exchange.backpressure(on);
  /** Just before the response's head is written to the client: TTFB. */
  private readonly headSent = (): void => this.exchange.headSent();
  private unwatch: (() => void) | undefined = undefined;
  /** The sending upstream, from `begin`. */
  private attempt: UpstreamAttempt | undefined = undefined;
  /** The upstream's answer the client is being given. */
  private answer: UpstreamResponse | undefined = undefined;
  /** This request's share of the budget for held bodies, given back when it finishes. */
  private readonly hold: BodyHold;
  /** infermeter's own id of the request, with the usage ledger: its record's id (a client's id may repeat). */
  private readonly ownId: string | undefined;
  /** The engine's route takes `stream_options` (an OpenAI route): usage may be injected. */
  private readonly streamOptions: boolean;
  /** Refused with 503 after it began (its body could not be held in time): not measured. */
  private bodyRefused = false;

  constructor(options: MeasuredRouteOptions, strip: UsageStripOptions, req: IncomingMessage, res: ServerResponse, route: InferenceRoute) {
    this.options = options;
    this.streamOptions = route.streamOptions;
    this.strip = strip;
    this.req = req;
    this.res = res;
    const given = req.headers['x-request-id'];
    const sane = typeof given === 'string' && REQUEST_ID.test(given) ? given : undefined;
    let requestId: string | undefined;
    // With the access log, passed upstream, so both logs share it; without, the client's id
    // goes upstream as the client sent it, and an own one only to the histograms' exemplars.
    this.ownId = options.usage === undefined ? undefined : randomUUID();
    if (options.accessLog !== undefined || this.ownId !== undefined) requestId = sane ?? this.ownId ?? randomUUID();
    this.exchange = new Exchange(route.api, requestId, options, options.tenantOf?.(req.headers), requestId ?? sane ?? randomUUID());
    // A client's part of the budget is its address's: the connection's peer.
    this.hold = options.bodyBudget?.hold(req.socket.remoteAddress) ?? UNLIMITED;
  }

  /**
   * received (arrival stamped already, by the exchange): waits for its turn on the client's
   * connection (a pipelined request, for the response before it to end), then for a place
   * under the limit, or is refused at once. Neither wait is armed with the deadlines.
   */
  receive(): void {
    this.res.on('close', () => this.finish());
    const { turn } = this.options;
    if (turn === undefined) this.admit();
    else turn(this.res, () => this.admit());
  }

  private admit(): void {
    const { limit } = this.options;
    if (limit === undefined) this.begin();
    else
      this.release = limit.acquire(
        () => this.begin(),
        () => this.refuse(),
      );
  }

  /** Refused at once: never forwarded, not counted as received (the engine never saw it). */
  private refuse(): void {
    this.options.rejected?.('concurrency');
    if (!this.exchange.answered('error')) return;
    writeErrorAnswer(this.res, 'overloaded', undefined, { 'retry-after': '1' });
    this.req.resume();
  }

  private begin(): void {
    const { exchange, req, res, options } = this;
    this.begun = true;
    if (options.limit !== undefined) exchange.admitted();
    // The end of e2e is stamped at the last write where the route makes it; 'finish' (later,
    // once the socket took the bytes) for the answers written otherwise.
    res.on('finish', this.lastWrite);
    // The call hears the attempt's outcome itself (response, failed, broke): no closures per request.
    const attempt = new UpstreamAttempt(options, req, res, exchange, this.hold, this);
    this.attempt = attempt;
    this.unwatch = options.deadlines.watch(
      exchange,
      () => attempt.destroy(Object.assign(new Error('the model server was silent too long'), { code: 'ETIMEDOUT' })),
      () => this.overTime(),
    );
    if (options.usageInjection !== undefined && this.streamOptions) {
      // identified: the whole body read first, to inject usage into it (or read as it streams through).
      holdAndInject(
        req,
        exchange,
        this.hold,
        options,
        (body) => attempt.send(body),
        () => this.refuseBody(),
      );
      return;
    }
    tapRequestBody(req, (result, size) => {
      exchange.bytesIn = size;
      exchange.identify(result);
    });
    attempt.send(req);
  }

  /**
   * Its body found the budget for held bodies spent before the upstream was known to take the
   * injected field, and no room came in time: 503 with Retry-After, as for a full queue; not
   * measured (never sent upstream). The rest of the body is read and dropped.
   */
  private refuseBody(): void {
    const { exchange, res, options } = this;
    options.rejected?.('held_body_budget');
    this.bodyRefused = true;
    this.attempt?.close(false);
    if (!exchange.answered('error')) return;
    res.shouldKeepAlive = false;
    writeErrorAnswer(res, 'overloaded', 'the bodies held by infermeter reached INFERMETER_MAX_HELD_BODY_BYTES', { 'retry-after': '1' });
    this.req.resume();
  }

  /** The upstream attempt failed: no answer came. */
  failed(error: Error): void {
    this.upstreamFailed(error, undefined);
  }

  /** The answer's own leg failed after it began. */
  broke(error: Error): void {
    this.upstreamFailed(error, this.answer);
  }

  /** The upstream attempt's answer: the client is answered with it. */
  response(response: UpstreamResponse, held: HeldBytes | undefined): void {
    const { exchange, res, options } = this;
    this.answer = response;
    if (res.writableEnded || res.destroyed) {
      // Answered already (the total timeout) or the client is gone: nothing to forward.
      response.resume();
      return;
    }
    // The upstream closes its connection after this answer: the client's closes too (mirror).
    if (response.closesConnection) res.shouldKeepAlive = false;
    cutWithUpstream(response, res, () => {
      exchange.fail('upstream_reset');
      options.proxyError('upstream_reset');
      options.log.warnThrottled('upstream_reset', 'upstream closed a response before its end', { path: pathOf(this.req) });
    });
    if (held !== undefined) this.answerHeld(response, held);
    else if (exchange.injection?.refused === false && isEventStream(response.headers['content-type'])) this.answerStripped(response);
    else this.answerRelayed(response);
  }

  /** answered: the upstream's response as it came. */
  private answerRelayed(response: UpstreamResponse): void {
    if (!this.answerWithHead(response, 'relayed', false)) return;
    setImmediate(flushIdleHeaders, this.res, response, this.headSent);
    relay(response, this.res, this.exchange.tap(response, this.options.tap), {
      sent: this.bytesSent(),
      firstWrite: this.headSent,
      lastWrite: this.lastWrite,
      arrived: this.arrived,
      backpressure: this.backpressure,
      settle: this.options.settle,
    });
  }

  /** answered: an event stream with the usage-only chunk infermeter asked for taken out. */
  private answerStripped(response: UpstreamResponse): void {
    const { options } = this;
    // Its length changes: no content-length.
    if (!this.answerWithHead(response, 'stripped', true)) return;
    setImmediate(flushIdleHeaders, this.res, response, this.headSent);
    // A client's own continuous_usage_stats, taking effect with the injected include_usage: its members go too.
    const filter = createUsageStrip(this.exchange.continuousAsked && this.strip.members !== true ? { ...this.strip, members: true } : this.strip);
    relay(response, this.res, this.exchange.tap(response, options.tap), {
      sent: this.bytesSent(),
      firstWrite: this.headSent,
      lastWrite: this.lastWrite,
      arrived: this.arrived,
      backpressure: this.backpressure,
      filter,
      settle: options.settle,
    });
  }

  /** answered: a 4xx to an injected request that was not a refusal, what was read of it first. */
  private answerHeld(response: UpstreamResponse, held: HeldBytes): void {
    const { exchange, options, res } = this;
    // The tap does not see a held answer: its head is told to the timer here.
    exchange.heldHead(response.statusCode ?? 0);
    if (options.accessLog !== undefined) exchange.bytesOut += held.size;
    if (!this.answerWithHead(response, 'relayed', false)) return;
    if (held.complete) {
      res.end(held.chunks[0]);
      return;
    }
    res.flushHeaders();
    for (const chunk of held.chunks) res.write(chunk);
    if (options.accessLog !== undefined) response.on('data', (chunk: Buffer) => (exchange.bytesOut += chunk.length));
    response.pipe(res);
  }

  /**
   * answered with the upstream's head; false when Node refuses to send it (a status out of
   * range): the client gets a 502 instead.
   */
  private answerWithHead(response: UpstreamResponse, kind: 'relayed' | 'stripped', rewritten: boolean): boolean {
    try {
      copyHead(response, this.res, rewritten);
    } catch (error) {
      response.destroy();
      const unsendable = Object.assign(new Error(`the upstream's response head cannot be forwarded: ${(error as Error).message}`), {
        code: 'HPE_UNSENDABLE_HEAD',
      });
      this.upstreamFailed(unsendable, undefined);
      return false;
    }
    if (this.exchange.answered(kind)) return true;
    // Answered already: a bug, reported by the exchange; neither answer may go on.
    response.destroy();
    this.res.destroy();
    return false;
  }

  /** What counts the bytes handed to the client, when the access log wants them. */
  private bytesSent(): ((bytes: number) => void) | undefined {
    const { exchange } = this;
    return this.options.accessLog === undefined ? undefined : (bytes) => (exchange.bytesOut += bytes);
  }

  /**
   * The upstream leg failed: no answer came (`response` undefined: the upstream could not be
   * reached, failed before answering, or its head could not be forwarded), or the answer being
   * given broke off.
   */
  private upstreamFailed(error: Error, response: UpstreamResponse | undefined): void {
    const { exchange, options } = this;
    actOnFailedLeg({
      error,
      res: this.res,
      response,
      path: pathOf(this.req),
      log: options.log,
      proxyError: options.proxyError,
      cut: (failure) => exchange.fail(failure),
      answer: (kind, code) => this.answerError(kind, code),
    });
  }

  /** answered with infermeter's own error. */
  private answerError(kind: UpstreamErrorKind, detail: string | undefined): void {
    const { exchange } = this;
    if (!exchange.answered('error')) {
      this.res.destroy();
      return;
    }
    const { status, bytes } = writeErrorAnswer(this.res, kind, detail);
    exchange.fail(kind, status);
    if (this.options.accessLog !== undefined) exchange.bytesOut += bytes;
  }

  /** Past INFERMETER_TOTAL_TIMEOUT_MS: the upstream request is aborted, the client told or cut. */
  private overTime(): void {
    const { exchange, res, options } = this;
    if (res.writableEnded || res.destroyed) return;
    exchange.fail('upstream_timeout', 504);
    options.proxyError('upstream_timeout');
    this.attempt?.close(true);
    if (res.headersSent) res.destroy();
    else this.answerError('upstream_timeout', 'total timeout');
  }

  /**
   * finished: the client's side closed. What the request holds is let go now; its recording
   * (with the tap's reading of the end before it) is left for after the turn's reads.
   */
  private finish(): void {
    const { exchange, res, options } = this;
    if (this.begun && !this.bodyRefused) {
      const delivered = res.writableFinished;
      // A client that left gives its upstream request up.
      this.attempt?.close(!delivered);
      if (options.settle === undefined) this.record(delivered);
      else options.settle(() => this.record(delivered));
    } else {
      exchange.finish(res.writableFinished, false);
    }
    this.unwatch?.();
    this.hold.release();
    this.release(); // a request that waited and left gives up its place
  }

  /** The request's sample, recorded; to the access log and the ledger with them. */
  private record(delivered: boolean): void {
    const { exchange, options } = this;
    const sample = exchange.finish(delivered);
    // A complete stream that stated no counts at all: the engine does not state them unasked.
    if (sample?.streamed === true && sample.outcome === 'success' && sample.usageSource === 'fallback' && this.streamOptions)
      options.usageInjection?.countsMissing();
    if (sample !== undefined && options.accessLog !== undefined) options.accessLog.write(accessRecord(this.req, exchange, sample));
    if (sample !== undefined && this.ownId !== undefined) options.usage?.record(sample, exchange.requestId ?? this.ownId, this.ownId);
  }
}

function ignore(): void {}

const UNLIMITED: BodyHold = { take: () => true, release: ignore, wait: () => ignore, fits: () => true };
