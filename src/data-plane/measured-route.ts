// The measured route: one inference request's way through, phase by phase (lifecycle.ts).
//   received    a place under the concurrency limit, the deadlines armed;
//   identified  a chat or completions body held to inject usage (request-body.ts), or else
//               read on the side as it streams upstream (stream-tap/request-tap.ts);
//   forwarded   on the lean upstream path (upstream-request.ts); re-sent once if the upstream
//               refuses the injected field (injected-answer.ts);
//   answered    the upstream's head copied (response-head.ts) and its body relayed (relay.ts),
//               an event stream's usage-only chunk stripped, or infermeter's own error
//               (error-answer.ts);
//   finished    the client's side closed: measured, logged.
// The response tap reads the very buffers the client was sent, after they were written.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { AccessLog } from '../access-log.ts';
import type { BodyBudget, BodyHold, HeldBodyUse } from './body-budget.ts';
import type { Logger } from '../log.ts';
import type { InferenceApi } from '../measure/sample.ts';
import { tapRequestBody } from '../stream-tap/request-tap.ts';
import { isEventStream, tapResponse, type ResponseTap, type TapOptions } from '../stream-tap/response-tap.ts';
import { createUsageStrip } from '../stream-tap/usage-strip.ts';
import type { TenantOf } from '../tenant/tenant-of.ts';
import { accessRecord } from './access-record.ts';
import type { ConcurrencyLimit } from './concurrency-limit.ts';
import type { Deadlines } from './deadlines.ts';
import { actOnFailedLeg, writeErrorAnswer, type UpstreamErrorKind } from './error-answer.ts';
import { Exchange, type ExchangeOptions } from './exchange.ts';
import { holdAnswer, mayBeRefusal } from './injected-answer.ts';
import type { ResendReason } from './lifecycle.ts';
import type { ProxyErrorKind } from './openai-error.ts';
import { relay } from './relay.ts';
import { copyBody, holdBody, type BodyCopy } from './request-body.ts';
import { pathOf } from './request-path.ts';
import { copyHead, cutWithUpstream, flushIdleHeaders } from './response-head.ts';
import { mayHaveBeenServed, type SendUpstream } from './upstream-request.ts';
import { askIdentity, injectUsage, takesIdentity } from './usage-injection.ts';
import { utf8FromJsonEncoding } from '../stream-tap/json-encoding.ts';
import { scanWhole } from '../stream-tap/request-body-scanner.ts';

export interface UsageInjection {
  /** Whether to inject now: on, and the upstream has not refused stream_options. */
  active(): boolean;
  /** The upstream refused stream_options: stop injecting, say so once. */
  refused(): void;
  injected(): void;
  stripped(bytes: number): void;
}

export interface MeasuredRouteOptions extends ExchangeOptions {
  readonly log: Logger;
  readonly sendUpstream: SendUpstream;
  readonly deadlines: Deadlines;
  /** undefined: no concurrency limit. */
  readonly limit: ConcurrencyLimit | undefined;
  readonly maxInspectBytes: number;
  /** The process's budget for held bodies (INFERMETER_MAX_HELD_BODY_BYTES); undefined: none. */
  readonly bodyBudget?: BodyBudget | undefined;
  /** Counts bodies not held because the budget was spent, by what holding was for. */
  readonly bodyUnheld?: ((use: HeldBodyUse) => void) | undefined;
  readonly maxEventBytes: number;
  readonly tap: TapOptions;
  /** Counts failures of the proxy itself to reach or hear the upstream, by kind. */
  readonly proxyError: (kind: ProxyErrorKind) => void;
  /** Counts inference requests refused because the concurrency limit's queue was full. */
  readonly rejected?: (() => void) | undefined;
  /** Counts inference requests sent upstream again, by why. */
  readonly retried?: ((reason: ResendReason) => void) | undefined;
  readonly usageInjection?: UsageInjection | undefined;
  readonly accessLog?: AccessLog | undefined;
  /** Who sent a request, read from its headers (per-tenant metering); undefined: off. */
  readonly tenantOf?: TenantOf | undefined;
}

export type MeasuredRoute = (req: IncomingMessage, res: ServerResponse, api: InferenceApi) => void;

const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;
/** How a kept-alive connection the upstream closed fails when it is reused. */
const STALE = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);
/**
 * The longest an upstream may have had a request that failed on a reused connection for the
 * failure to be the stale race (the upstream closed the idle connection as it was reused): that
 * fails within a loopback round trip of the write. Measured through infermeter in one process
 * under an 8-way load, 484 races: 480 under 1 ms, 2 under 2 ms, the slowest 8.4 ms (the event
 * loop's own delay). Past this, the upstream may have worked on the request: it is not sent again.
 */
const STALE_RACE_MS = 50;

export function createMeasuredRoute(options: MeasuredRouteOptions): MeasuredRoute {
  // Not expected: a write after end would be a bug, but one that must not take the proxy down.
  const onResponseError = (error: Error): void => options.log.warnThrottled('response_error', 'error on a client response', { error: String(error) });
  return (req, res, api) => {
    res.on('error', onResponseError);
    new InferenceCall(options, req, res, api).receive();
  };
}

/** One inference request, from its arrival to its client's close. */
class InferenceCall {
  private readonly options: MeasuredRouteOptions;
  private readonly req: IncomingMessage;
  private readonly res: ServerResponse;
  private readonly exchange: Exchange;
  private begun = false;
  private release: () => void = ignore;
  /** Just before the last bytes are written to the client: the end of e2e. */
  private readonly lastWrite = (): void => this.exchange.timer.responseFinished();
  /** An upstream chunk arrived: the start of the proxy's own time on it (infermeter_proxy_overhead_seconds). */
  private readonly arrived = (): void => this.exchange.chunkArrived();
  /** Just before the response's head is written to the client: TTFB. */
  private readonly headSent = (): void => this.exchange.timer.headSent();
  private unwatch: (() => void) | undefined = undefined;
  /** What was sent upstream last: a held body is sent again as it is. */
  private body: Buffer | Readable | undefined = undefined;
  /** A streamed body's chunks, kept until a response begins, for a retry. */
  private copy: BodyCopy | undefined = undefined;
  /** The upstream attempt whose events count (a retry's; a stale one's are ignored). */
  private attempt = 0;
  /** This request's share of the budget for held bodies, given back when it finishes. */
  private readonly hold: BodyHold;
  /** The injected field's refusal could only be the engine's (not an echo of the client's text). */
  private trustedRefusal = false;

  constructor(options: MeasuredRouteOptions, req: IncomingMessage, res: ServerResponse, api: InferenceApi) {
    this.options = options;
    this.req = req;
    this.res = res;
    const given = req.headers['x-request-id'];
    const sane = typeof given === 'string' && REQUEST_ID.test(given) ? given : undefined;
    let requestId: string | undefined;
    // With the access log, passed upstream, so both logs share it; without, the client's id
    // goes upstream as the client sent it, and an own one only to the histograms' exemplars.
    if (options.accessLog !== undefined) requestId = sane ?? randomUUID();
    this.exchange = new Exchange(api, requestId, options, options.tenantOf?.(req.headers), requestId ?? sane ?? randomUUID());
    this.hold = options.bodyBudget?.hold() ?? UNLIMITED;
  }

  /** received: waits for a place under the limit, or is refused at once. */
  receive(): void {
    this.res.on('close', () => this.finish());
    const { limit } = this.options;
    if (limit === undefined) this.begin();
    else this.release = limit.acquire(() => this.begin(), () => this.refuse());
  }

  /** Refused at once: never forwarded, not counted as received (the engine never saw it). */
  private refuse(): void {
    this.options.rejected?.();
    if (!this.exchange.answered('error')) return;
    writeErrorAnswer(this.res, 'overloaded', undefined, { 'retry-after': '1' });
    this.req.resume();
  }

  private begin(): void {
    const { exchange, req, res, options } = this;
    this.begun = true;
    if (options.limit !== undefined) exchange.timer.admitted();
    // The end of e2e is stamped at the last write where the route makes it; 'finish' (later,
    // once the socket took the bytes) for the answers written otherwise.
    res.on('finish', this.lastWrite);
    this.unwatch = options.deadlines.watch(
      exchange,
      () => exchange.upstreamRequest?.destroy(timeoutError('the model server was silent too long')),
      () => this.overTime(),
    );
    const encoded = req.headers['content-encoding'] !== undefined && req.headers['content-encoding'].trim().toLowerCase() !== 'identity';
    if (options.usageInjection !== undefined && (exchange.api === 'chat' || exchange.api === 'completions') && !encoded) {
      this.holdAndForward();
      return;
    }
    tapRequestBody(req, options.maxInspectBytes, (result, size) => {
      exchange.bytesIn = size;
      exchange.identify(result);
    });
    this.copy = copyBody(req, options.maxInspectBytes, this.hold, () => options.bodyUnheld?.('retry_copy'));
    this.forward(req);
  }

  /** identified: the whole body read first, to inject usage into it. */
  private holdAndForward(): void {
    const { exchange, options } = this;
    holdBody(this.req, options.maxInspectBytes, this.hold, {
      read: (bytes) => (exchange.bytesIn += bytes),
      tooLarge: (body) => {
        exchange.identify({ ok: false, reason: 'too_large' });
        this.forward(body);
      },
      // Not injected, and not replayable; still measured (the scan goes on as it streams).
      overBudget: (body) => {
        options.bodyUnheld?.('usage_injection');
        this.forward(body);
      },
      scanned: (scan) => exchange.identify(scan),
      held: (body, rawScan) => {
        // A UTF-16 or UTF-32 body (which Python's json.loads takes) is read, and injected, in UTF-8.
        const recoded = rawScan.ok ? undefined : utf8FromJsonEncoding(body);
        const scan = recoded === undefined ? rawScan : scanWhole(recoded);
        exchange.identify(scan);
        const injected = options.usageInjection?.active() === true && takesIdentity(this.req.headers['accept-encoding']) ? injectUsage(recoded ?? body, scan) : undefined;
        if (injected === undefined) {
          this.forward(body);
          return;
        }
        // A compressed answer could not have the usage chunk cut out.
        askIdentity(this.req.rawHeaders);
        options.usageInjection?.injected();
        exchange.inject(body);
        this.forward(injected);
      },
    });
  }

  /** forwarded: the body (held: sent with the head in one write; or still streaming) goes upstream. */
  private forward(body: Buffer | Readable, resend?: ResendReason): void {
    // A client that left before its body was read is not forwarded.
    if (this.exchange.phase === 'finished') return;
    const attempt = ++this.attempt;
    this.body = body;
    if (resend !== undefined) this.options.retried?.(resend);
    const request = this.options.sendUpstream(
      this.req,
      body,
      {
        response: (response) => {
          if (attempt === this.attempt) this.respond(response);
          else response.resume();
        },
        error: (error) => {
          if (attempt === this.attempt) this.upstreamFailed(error, true);
        },
      },
      this.exchange.requestId,
      resend === 'stale_connection',
      this.res.shouldKeepAlive,
    );
    if (!this.exchange.forwarded(request, resend)) request.destroy();
  }

  /**
   * forwarded again: a reused connection that failed before any byte of a response, within
   * STALE_RACE_MS of the request's write, was the upstream closing it as it was reused, not an
   * answer. The same body, once, on a new connection; a streamed body only when it was kept
   * whole (up to the inspection cap). Never once a byte of a response came (a 1xx, part of a
   * head), nor after the upstream had the request longer: what it said or did stands.
   */
  private retryStale(error: Error): boolean {
    const { exchange, res } = this;
    const code = (error as NodeJS.ErrnoException).code;
    const request = exchange.upstreamRequest;
    if (request?.reusedSocket !== true || !STALE.has(code ?? '') || exchange.upstreamResponse !== undefined) return false;
    // The upstream may have worked on it: what it did stands (an engine must not compute it twice).
    if (mayHaveBeenServed(request, STALE_RACE_MS)) return false;
    if (exchange.resentFor('stale_connection') || res.destroyed || res.writableEnded) return false;
    const body = this.body;
    if (Buffer.isBuffer(body)) {
      this.forward(body, 'stale_connection');
      return true;
    }
    const copy = this.copy;
    if (copy === undefined || body !== this.req) return false;
    copy.whole((whole) => {
      if (whole === undefined || res.destroyed || res.writableEnded) this.upstreamFailed(error, true, false);
      else this.forward(whole, 'stale_connection');
    });
    return true;
  }

  /** The upstream's head arrived: the client is answered with it, or a held 4xx is read first. */
  private respond(response: IncomingMessage): void {
    const { exchange, res, options } = this;
    exchange.responded(response);
    // A response began: what it says stands, the body is not sent again.
    this.copy?.release();
    this.copy = undefined;
    if (res.writableEnded || res.destroyed) {
      // Answered already (the total timeout) or the client is gone: nothing to forward.
      response.resume();
      return;
    }
    cutWithUpstream(response, res, () => {
      exchange.timer.fail('upstream_reset');
      options.proxyError('upstream_reset');
      options.log.warnThrottled('upstream_reset', 'upstream closed a response before its end', { path: pathOf(this.req) });
    });
    const injection = exchange.injection;
    // The client's own body, re-sent after a refusal the engine itself wrote, was accepted: the
    // field was the only difference, so the refusal was real and injection stops.
    if (exchange.resendReason === 'refused_injection' && this.trustedRefusal && (response.statusCode ?? 0) < 300) options.usageInjection?.refused();
    if (injection !== undefined && !injection.refused) {
      const status = response.statusCode ?? 0;
      if (mayBeRefusal(status)) this.holdRefusal(response, status, injection.original);
      else if (isEventStream(response.headers['content-type'])) this.answerStripped(response);
      else this.answerRelayed(response);
      return;
    }
    this.answerRelayed(response);
  }

  /** answered: the upstream's response as it came. */
  private answerRelayed(response: IncomingMessage): void {
    if (!this.answerWithHead(response, 'relayed', false)) return;
    setImmediate(flushIdleHeaders, this.res, response, this.headSent);
    relay(response, this.res, this.startTap(response), { sent: this.bytesSent(), firstWrite: this.headSent, lastWrite: this.lastWrite, arrived: this.arrived });
  }

  /** answered: an event stream with the usage-only chunk infermeter asked for taken out. */
  private answerStripped(response: IncomingMessage): void {
    const { options } = this;
    // Its length changes: no content-length.
    if (!this.answerWithHead(response, 'stripped', true)) return;
    setImmediate(flushIdleHeaders, this.res, response, this.headSent);
    const filter = createUsageStrip({
      maxEventBytes: options.maxEventBytes,
      stripped: (bytes) => options.usageInjection?.stripped(bytes),
    });
    relay(response, this.res, this.startTap(response), { sent: this.bytesSent(), firstWrite: this.headSent, lastWrite: this.lastWrite, arrived: this.arrived, filter });
  }

  /** A 4xx to an injected request: a refusal is re-sent without the field, anything else passed on. */
  private holdRefusal(response: IncomingMessage, status: number, original: Buffer): void {
    const { exchange, options, res } = this;
    holdAnswer(response, status, original, {
      refused: (trusted) => {
        if (res.writableEnded || res.destroyed) return;
        this.trustedRefusal = trusted;
        exchange.refuseInjection();
        this.forward(original, 'refused_injection');
      },
      passOn: (held, size, complete) => {
        if (res.writableEnded || res.destroyed) return;
        // The tap does not see a held answer: its head is told to the timer here.
        exchange.timer.responseHeaders(status, false);
        if (options.accessLog !== undefined) exchange.bytesOut += size;
        if (!this.answerWithHead(response, 'relayed', false)) return;
        if (complete) {
          res.end(held[0]);
          return;
        }
        res.flushHeaders();
        for (const chunk of held) res.write(chunk);
        if (options.accessLog !== undefined) response.on('data', (chunk: Buffer) => (exchange.bytesOut += chunk.length));
        response.pipe(res);
      },
    });
  }

  /**
   * answered with the upstream's head; false when Node refuses to send it (a status out of
   * range): the client gets a 502 instead.
   */
  private answerWithHead(response: IncomingMessage, kind: 'relayed' | 'stripped', rewritten: boolean): boolean {
    try {
      copyHead(response, this.res, rewritten);
    } catch (error) {
      response.destroy();
      const unsendable = Object.assign(new Error(`the upstream's response head cannot be forwarded: ${(error as Error).message}`), { code: 'HPE_UNSENDABLE_HEAD' });
      this.upstreamFailed(unsendable, false);
      return false;
    }
    if (this.exchange.answered(kind)) return true;
    // Answered already: a bug, reported by the exchange; neither answer may go on.
    response.destroy();
    this.res.destroy();
    return false;
  }

  private startTap(response: IncomingMessage): ResponseTap | undefined {
    try {
      return tapResponse(response, this.exchange.timer, this.options.tap);
    } catch (error) {
      this.options.tap.problem('tap_error', error);
      return undefined;
    }
  }

  /** What counts the bytes handed to the client, when the access log wants them. */
  private bytesSent(): ((bytes: number) => void) | undefined {
    const { exchange } = this;
    return this.options.accessLog === undefined ? undefined : (bytes) => (exchange.bytesOut += bytes);
  }

  /**
   * The upstream leg failed: the upstream could not be reached, or failed before answering, or
   * its head could not be forwarded (`began` false: no response of its counts as begun).
   */
  private upstreamFailed(error: Error, began: boolean, retry = true): void {
    const { exchange, options } = this;
    if (began && retry && this.retryStale(error)) return;
    actOnFailedLeg({
      error,
      res: this.res,
      response: began ? exchange.upstreamResponse : undefined,
      path: pathOf(this.req),
      log: options.log,
      proxyError: options.proxyError,
      cut: (failure) => exchange.timer.fail(failure),
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
    exchange.timer.fail(kind, status);
    if (this.options.accessLog !== undefined) exchange.bytesOut += bytes;
  }

  /** Past INFERMETER_TOTAL_TIMEOUT_MS: the upstream request is aborted, the client told or cut. */
  private overTime(): void {
    const { exchange, res, options } = this;
    if (res.writableEnded || res.destroyed) return;
    exchange.timer.fail('upstream_timeout', 504);
    options.proxyError('upstream_timeout');
    exchange.upstreamRequest?.destroy();
    if (res.headersSent) res.destroy();
    else this.answerError('upstream_timeout', 'total timeout');
  }

  /** finished: the client's side closed. */
  private finish(): void {
    const { exchange, res, options } = this;
    if (this.begun) {
      // A client that left gives its upstream request up.
      if (!res.writableFinished) exchange.upstreamRequest?.destroy();
      const sample = exchange.finish(res.writableFinished);
      if (sample !== undefined && options.accessLog !== undefined) options.accessLog.write(accessRecord(this.req, exchange, sample));
    } else {
      exchange.finish(res.writableFinished, false);
    }
    this.unwatch?.();
    this.hold.release();
    this.release(); // a request that waited and left gives up its place
  }
}

function timeoutError(message: string): Error {
  return Object.assign(new Error(message), { code: 'ETIMEDOUT' });
}

function ignore(): void {}

const UNLIMITED: BodyHold = { take: () => true, release: ignore };
