// The phases of one inference request's way through the proxy, and the moves allowed between
// them. Asserted, as undici asserts its request lifecycle: a move the table does not allow is a
// bug in the data plane (a request answered twice, forwarded after it finished), reported as a
// violation instead of being miscounted in silence.
//
//   received ──► identified ──► forwarded ──► answered ──► finished
//       │             │          │   ▲  │                     ▲
//       │             │          └───┘  │ (re-sent, once a    │
//       │             │                 │  reason)            │
//       ├─────────────┴──────────►──────┴──────►──────────────┤ (the client left, or cut)
//       └────────────────────────► answered (refused: overloaded)
//
// `identified` is a phase when the body is read before it is forwarded (held for usage
// injection); a body forwarded as it streams is identified on the side, in `forwarded` or
// `answered`, at most once (Exchange.identify).

export type Phase = 'received' | 'identified' | 'forwarded' | 'answered' | 'finished';

/** How the client was answered. */
export type AnswerKind =
  /** The upstream's response, as it came. */
  | 'relayed'
  /** The upstream's event stream with the usage-only chunk infermeter asked for removed. */
  | 'stripped'
  /** infermeter's own error answer (502, 503, 504): the upstream's could not be forwarded. */
  | 'error';

/** Why a request was forwarded again: each reason at most once per request. */
export type ResendReason =
  /** The upstream refused the injected stream_options: the client's own body, once more. */
  | 'refused_injection'
  /**
   * A reused (kept-alive) upstream connection failed before any byte of a response: the upstream
   * had closed it as it was reused (llama.cpp closes right after a streamed answer that says
   * keep-alive). The same body, once more, on a new connection.
   */
  | 'stale_connection';

const ALLOWED: Readonly<Record<Phase, readonly Phase[]>> = {
  received: ['identified', 'forwarded', 'answered', 'finished'],
  identified: ['forwarded', 'answered', 'finished'],
  // forwarded -> forwarded: a re-send, at most once for each reason.
  forwarded: ['forwarded', 'answered', 'finished'],
  answered: ['finished'],
  finished: [],
};

/** An impossible move of one request's lifecycle. */
export class LifecycleViolation extends Error {
  readonly code = 'ERR_INFERMETER_LIFECYCLE';
  readonly from: Phase;
  readonly to: Phase | 'identify' | 'resend';
  constructor(from: Phase, to: Phase | 'identify' | 'resend', detail?: string) {
    super(`an inference request cannot move from ${from} to ${to}${detail === undefined ? '' : ` (${detail})`}`);
    this.from = from;
    this.to = to;
  }
}

/** Whether a request in `from` may move to `to`. */
export function allowed(from: Phase, to: Phase): boolean {
  return ALLOWED[from].includes(to);
}
