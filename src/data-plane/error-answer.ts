// What a client gets when the proxy's own leg to the upstream fails: a decision that depends
// only on how far the exchange had got (the contract, unit-tested as such), and the writing of
// infermeter's own error answer in the OpenAI error shape (openai-error.ts).
import { STATUS_CODES, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import type { UpstreamResponse } from './upstream-response.ts';
import type { Logger } from '../log.ts';
import { proxyErrorResponse, type ProxyErrorKind } from './openai-error.ts';

const TIMEOUTS = new Set(['ECONNECT_TIMEOUT', 'ETIMEDOUT']);
/** The code of a failure of an answer the upstream closed before its end while infermeter held it unsent. */
export const HELD_ANSWER_CUT = 'ERR_INFERMETER_HELD_ANSWER_CUT';

/** The failures of the upstream leg (the others are infermeter's own refusals). */
export type UpstreamErrorKind = Exclude<ProxyErrorKind, 'overloaded' | 'body_too_large'>;

/** How far an exchange had got when its upstream leg failed. */
export interface ErrorState {
  /** The client's response is over (ended, or its socket gone): nothing more can be sent. */
  readonly clientGone: boolean;
  /** The upstream's response head had arrived. */
  readonly responseBegan: boolean;
  /** ... and its last byte too. */
  readonly responseComplete: boolean;
  /** The client's response head was written already. */
  readonly headSent: boolean;
}

export type ErrorDecision =
  /** The client is gone: it was measured when it left. */
  | { readonly action: 'none' }
  /**
   * After the upstream's last byte (bytes that are not HTTP on a kept-alive connection): the
   * answer finishes reaching the client; the protocol error is counted.
   */
  | { readonly action: 'count'; readonly kind: 'upstream_protocol' }
  /** The upstream's response had begun: it is cut, as a reset would cut it (its close counts). */
  | { readonly action: 'cut_upstream' }
  /** The client's head is out: the client's response is cut; the request failed. */
  | { readonly action: 'cut'; readonly kind: UpstreamErrorKind; readonly failure: 'upstream_timeout' | 'upstream_reset' }
  /** Nothing was sent yet: infermeter's own error answer. */
  | { readonly action: 'answer'; readonly kind: UpstreamErrorKind };

/** The kind of a failure of the upstream leg, from its error code. */
export function errorKind(code: string | undefined): UpstreamErrorKind {
  if (code !== undefined && TIMEOUTS.has(code)) return 'upstream_timeout';
  if (code === HELD_ANSWER_CUT) return 'upstream_reset';
  return code?.startsWith('HPE_') === true ? 'upstream_protocol' : 'upstream_unreachable';
}

/** What to do about a failed upstream leg with error `code`, given how far the exchange got. */
export function decideErrorAnswer(state: ErrorState, code: string | undefined): ErrorDecision {
  if (state.clientGone) return { action: 'none' };
  // A response that began is not answered a second time; a timeout is ours to answer though.
  if (state.responseBegan && !TIMEOUTS.has(code ?? ''))
    return state.responseComplete ? { action: 'count', kind: 'upstream_protocol' } : { action: 'cut_upstream' };
  const kind = errorKind(code);
  if (state.headSent) return { action: 'cut', kind, failure: kind === 'upstream_timeout' ? 'upstream_timeout' : 'upstream_reset' };
  return { action: 'answer', kind };
}

/**
 * Writes infermeter's own error answer of `kind` (with `detail`, an error code such as
 * ECONNREFUSED, never a header or payload value) and ends the response. Returns its status and
 * the body's size in bytes.
 */
export function writeErrorAnswer(
  res: ServerResponse,
  kind: ProxyErrorKind,
  detail: string | undefined,
  headers?: OutgoingHttpHeaders,
): { status: number; bytes: number } {
  const answer = proxyErrorResponse(kind, detail);
  const bytes = Buffer.byteLength(answer.body);
  // The reason phrase said explicitly: one stored by a refused upstream head would be reused.
  res.writeHead(answer.status, STATUS_CODES[answer.status], { ...headers, 'content-type': 'application/json', 'content-length': bytes });
  res.end(answer.body);
  return { status: answer.status, bytes };
}

export interface FailedLeg {
  readonly error: Error;
  /** The client's response. */
  readonly res: ServerResponse;
  /** The upstream's response, if its head had arrived. */
  readonly response: UpstreamResponse | undefined;
  /** The request's path, for the log line. */
  readonly path: string;
  readonly log: Logger;
  readonly proxyError: (kind: ProxyErrorKind) => void;
  /** The client is about to be cut: the request failed so. */
  readonly cut?: (failure: 'upstream_timeout' | 'upstream_reset') => void;
  /** The client is to get infermeter's own error answer. */
  readonly answer: (kind: UpstreamErrorKind, code: string | undefined) => void;
}

/** Decides (decideErrorAnswer), logs, counts and does what a failed upstream leg calls for. */
export function actOnFailedLeg(leg: FailedLeg): void {
  const { res, response } = leg;
  const code = (leg.error as NodeJS.ErrnoException).code;
  const decision = decideErrorAnswer(
    {
      clientGone: res.destroyed || res.writableEnded,
      responseBegan: response !== undefined,
      responseComplete: response?.complete === true,
      headSent: res.headersSent,
    },
    code,
  );
  if (decision.action === 'none') return;
  const began = decision.action === 'count' || decision.action === 'cut_upstream';
  leg.log.warnThrottled(`proxy:${code ?? leg.error.message}`, began ? 'upstream connection failed after its response began' : 'upstream request failed', {
    code,
    path: leg.path,
  });
  switch (decision.action) {
    case 'count':
      leg.proxyError(decision.kind);
      return;
    case 'cut_upstream':
      // Its 'close' counts the reset (response-head.ts cutWithUpstream).
      response?.destroy();
      return;
    case 'cut':
      leg.proxyError(decision.kind);
      leg.cut?.(decision.failure);
      res.destroy();
      return;
    case 'answer':
      leg.proxyError(decision.kind);
      leg.answer(decision.kind, code);
  }
}
