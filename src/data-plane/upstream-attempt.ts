// The upstream attempt: one inference request's sending to the model server, its re-sends
// included, as one object around the lean upstream path (upstream-request.ts), the way undici
// keeps its retry in a handler around the dispatch (lib/handler/retry-handler.js). The route
// hands it the body and hears back one outcome: the answer (`response`) or why none will come
// (`failed`), never both, never twice; after an answer, at most one failure of that answer's
// own leg (`broke`: a parse error mid-body, the idle timeout). Unseen by the route, it re-sends:
//   stale_connection   a reused connection that failed before any byte of a response, within
//                      STALE_RACE_MS of the request's write, was the upstream closing it as it
//                      was reused, not an answer (issues 29, 30): the same body once, on a new
//                      connection; a streamed body only when its copy was kept whole. Never once
//                      a byte of a response came (a 1xx, part of a head), nor after the upstream
//                      had the request longer: what it said or did stands.
//   refused_injection  a 4xx to a request whose body had usage injected, held and read, was the
//                      upstream refusing the field (injected-answer.ts): the client's own body
//                      once; the re-send's success turns injection off when the refusal could
//                      only be the engine's.
// Each sending's late events are ignored; once the route closes it (the client left, the total
// timeout answered), nothing more is sent or reported.
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import type { BodyHold, HeldBodyUse } from './body-budget.ts';
import { HELD_ANSWER_CUT } from './error-answer.ts';
import type { Exchange } from './exchange.ts';
import { holdAnswer, mayBeRefusal } from './injected-answer.ts';
import type { ResendReason } from './lifecycle.ts';
import { copyBody, type BodyCopy } from './request-body.ts';
import type { SendUpstream } from './upstream-request.ts';
import { mayHaveBeenServed, type UpstreamRequestHandle, type UpstreamResponse } from './upstream-response.ts';
import type { UsageInjection } from './usage-injection.ts';
import type { AnswerBudget } from '../stream-tap/tap-contract.ts';

/** How a kept-alive connection the upstream closed fails when it is reused. */
const STALE = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);
/**
 * The longest an upstream may have had a request that failed on a reused connection for the
 * failure to be the stale race (the upstream closed the idle connection as it was reused): that
 * fails within a loopback round trip of the write. Measured through infermeter in one process
 * under an 8-way load, 484 races: 480 under 1 ms, 2 under 2 ms, the slowest 8.4 ms (the event
 * loop's own delay). Past this, the upstream may have worked on the request: it is not sent again.
 */
export const STALE_RACE_MS = 50;

/** What was read of a held 4xx that was not a refusal: `complete`, the whole body; else the rest follows on the (paused) response. */
export interface HeldBytes {
  readonly chunks: readonly Buffer[];
  readonly size: number;
  readonly complete: boolean;
}

interface AttemptHandlers {
  /** The answer: the upstream's head (a held 4xx with what was read of its body). */
  response(response: UpstreamResponse, held: HeldBytes | undefined): void;
  /** No answer will come: the upstream could not be reached, failed before answering, or cut a held answer. */
  failed(error: Error): void;
  /** After `response`: that answer's leg failed (a parse error, a timeout, bytes after its end). */
  broke(error: Error): void;
}

export interface UpstreamAttemptOptions {
  readonly sendUpstream: SendUpstream;
  /** A streamed body is copied for a re-send up to this many bytes (INFERMETER_MAX_INSPECT_BYTES). */
  readonly maxInspectBytes: number;
  /** Counts inference requests sent upstream again, by why. */
  readonly retried?: ((reason: ResendReason) => void) | undefined;
  /** Counts bodies not held because the budget was spent, by what holding was for. */
  readonly bodyUnheld?: ((use: HeldBodyUse) => void) | undefined;
  readonly usageInjection?: UsageInjection | undefined;
  /** The budget a held 4xx's bytes are taken from (INFERMETER_MAX_HELD_ANSWER_BYTES); undefined: none. */
  readonly answerBudget?: AnswerBudget | undefined;
  /** A held 4xx found that budget spent: passed on unread. */
  readonly answerUnheld?: (() => void) | undefined;
  /**
   * The stale race's window (default STALE_RACE_MS). Tests whose upstream shares their loaded
   * process widen it: there a turn of the loop can outlast 50 ms, and whether a reset is the race
   * is tested apart, against a clock it is given (test/unit/stale-race.test.ts).
   */
  readonly staleRaceMs?: number | undefined;
}

/** The client's side the attempt reads: whether its connection stays open after this request. */
interface AttemptClient {
  readonly shouldKeepAlive: boolean;
}

// sending: a request is out, no answer yet; copying: a stale failure's body read whole for its
// re-send; holding: a 4xx read for a refusal; then one end state.
type State = 'new' | 'sending' | 'copying' | 'holding' | 'answered' | 'broken' | 'failed' | 'closed';

export class UpstreamAttempt {
  private readonly options: UpstreamAttemptOptions;
  private readonly req: IncomingMessage;
  private readonly client: AttemptClient;
  private readonly exchange: Exchange;
  private readonly hold: BodyHold;
  private readonly handlers: AttemptHandlers;
  private state: State = 'new';
  /** The sending whose events count: each one's late events are ignored. */
  private sending = 0;
  private request: UpstreamRequestHandle | undefined = undefined;
  /** What was sent last: a held body is sent again as it is. */
  private body: Buffer | Readable | undefined = undefined;
  /** A streamed body's chunks, kept until a response begins, for a re-send. */
  private copy: BodyCopy | undefined = undefined;
  /** The injected field's refusal could only be the engine's (not an echo of the client's text). */
  private trustedRefusal = false;

  /** `hold`: the request's share of the budget for held bodies, which a streamed body's copy takes. */
  constructor(options: UpstreamAttemptOptions, req: IncomingMessage, client: AttemptClient, exchange: Exchange, hold: BodyHold, handlers: AttemptHandlers) {
    this.options = options;
    this.req = req;
    this.client = client;
    this.exchange = exchange;
    this.hold = hold;
    this.handlers = handlers;
  }

  /**
   * Sends the request: `body` held whole (with the head, in one write), or still streaming; the
   * client's own request streaming is copied beside it for a re-send. Once.
   */
  send(body: Buffer | Readable): void {
    if (this.state !== 'new') return; // closed before the body was read: the client left
    if (body === this.req) this.copy = copyBody(this.req, this.options.maxInspectBytes, this.hold, () => this.options.bodyUnheld?.('retry_copy'));
    this.forward(body, undefined);
  }

  /** The upstream request is destroyed with `error` (the idle timeout), reported as any failure is. */
  destroy(error: Error): void {
    this.request?.destroy(error);
  }

  /**
   * The route is done with the attempt: nothing more is sent or reported. `abort`: the client
   * has not had the whole answer (it left, or was answered otherwise): the upstream request is
   * given up too.
   */
  close(abort: boolean): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.copy?.release();
    this.copy = undefined;
    if (abort) this.request?.destroy();
  }

  private forward(body: Buffer | Readable, resend: ResendReason | undefined): void {
    const sending = ++this.sending;
    this.state = 'sending';
    this.body = body;
    if (resend !== undefined) this.options.retried?.(resend);
    const request = this.options.sendUpstream(
      this.req,
      body,
      {
        response: (response) => {
          if (sending === this.sending) this.responded(response);
          else response.resume();
        },
        error: (error) => {
          if (sending === this.sending) this.errored(error);
        },
      },
      this.exchange.requestId,
      resend === 'stale_connection',
      this.client.shouldKeepAlive,
    );
    this.request = request;
    if (!this.exchange.forwarded(request, resend)) request.destroy();
  }

  /** The upstream's head arrived: the answer, or a 4xx to hold and read first. */
  private responded(response: UpstreamResponse): void {
    if (this.state !== 'sending') {
      response.resume(); // closed: nobody wants it
      return;
    }
    this.exchange.responded(response);
    // A response began: what it says stands, the body is not sent again.
    this.copy?.release();
    this.copy = undefined;
    const status = response.statusCode ?? 0;
    // The client's own body, re-sent after a refusal the engine itself wrote, was accepted: the
    // field was the only difference, so the refusal was real and injection stops.
    if (this.exchange.resendReason === 'refused_injection' && this.trustedRefusal && status < 300) this.options.usageInjection?.refused();
    const injection = this.exchange.injection;
    // A body with the field added was served: the upstream takes it (bodies that stream through may have it too).
    if (injection !== undefined && !injection.refused && status >= 200 && status < 300) this.options.usageInjection?.accept();
    // A held body's refusal is read, to send it again without the field; a streamed one cannot be sent again.
    if (injection?.original !== undefined && !injection.refused && mayBeRefusal(status)) this.holdRefusal(response, status, injection.original);
    else this.answer(response, undefined);
  }

  /** A 4xx to an injected request: a refusal is re-sent without the field, anything else is the answer. */
  private holdRefusal(response: UpstreamResponse, status: number, original: Buffer): void {
    this.state = 'holding';
    // Nothing of it reached the client: an answer cut before its end is a failure like any other.
    const onClose = (): void => {
      if (!response.complete) this.fail(Object.assign(new Error('the model server closed an answer before its end'), { code: HELD_ANSWER_CUT }));
    };
    response.on('error', ignore);
    response.on('close', onClose);
    holdAnswer(
      response,
      status,
      original,
      {
        refused: (trusted) => {
          response.off('close', onClose);
          if (this.state !== 'holding') return;
          this.trustedRefusal = trusted;
          this.exchange.refuseInjection();
          this.forward(original, 'refused_injection');
        },
        passOn: (chunks, size, complete) => {
          response.off('close', onClose);
          if (this.state === 'holding') this.answer(response, { chunks, size, complete });
        },
      },
      this.options.answerBudget,
      this.options.answerUnheld,
    );
  }

  private answer(response: UpstreamResponse, held: HeldBytes | undefined): void {
    this.state = 'answered';
    this.letBodyGo();
    this.handlers.response(response, held);
  }

  /**
   * Nothing will be sent again: the body (and the client's own, kept for a re-send) is let go,
   * and its bytes given back to the budget for held bodies, long before a long answer ends.
   */
  private letBodyGo(): void {
    this.body = undefined;
    this.exchange.letOriginalGo();
    this.hold.release();
  }

  private errored(error: Error): void {
    switch (this.state) {
      case 'sending':
        if (!this.retryStale(error)) this.fail(error);
        return;
      case 'holding':
        this.fail(error);
        return;
      case 'answered':
        this.state = 'broken';
        this.handlers.broke(error);
        return;
      default: // an end reported already, or closed
    }
  }

  private fail(error: Error): void {
    if (this.state !== 'sending' && this.state !== 'copying' && this.state !== 'holding') return;
    this.state = 'failed';
    this.copy?.release();
    this.copy = undefined;
    this.letBodyGo();
    this.handlers.failed(error);
  }

  /** Sent again when the failure was the stale race (the opening comment says when); whether it was. */
  private retryStale(error: Error): boolean {
    const request = this.request;
    const code = (error as NodeJS.ErrnoException).code;
    if (request?.reusedSocket !== true || !STALE.has(code ?? '')) return false;
    // The upstream may have worked on it: what it did stands (an engine must not compute it twice).
    if (mayHaveBeenServed(request, this.options.staleRaceMs ?? STALE_RACE_MS) || this.exchange.resentFor('stale_connection')) return false;
    const body = this.body;
    if (Buffer.isBuffer(body)) {
      this.forward(body, 'stale_connection');
      return true;
    }
    const copy = this.copy;
    if (copy === undefined || body !== this.req) return false;
    this.state = 'copying';
    copy.whole((whole) => {
      if (this.state !== 'copying') return; // closed meanwhile
      if (whole === undefined) this.fail(error);
      else this.forward(whole, 'stale_connection');
    });
    return true;
  }
}

function ignore(): void {}
