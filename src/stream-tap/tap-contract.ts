// What a response tap is to the data plane: the reader it hands a response's body to, the
// options it is made with, and the problems it counts. Its own module, so that the event-stream
// tap, the body tap and the dispatcher (response-tap.ts) share it without importing each other.

/** Why part of a response could not be measured; label values of infermeter_stream_tap_problems_total. */
export type TapProblem =
  | 'malformed_event' // an SSE data payload that is not JSON
  | 'event_too_large' // one event exceeded INFERMETER_MAX_EVENT_BYTES; the rest of the stream is not read
  | 'body_too_large' // a JSON body over INFERMETER_MAX_RESPONSE_INSPECT_BYTES; its usage is not read
  | 'body_unheld' // an answer not kept: INFERMETER_MAX_HELD_ANSWER_BYTES of answers were held; relayed unchanged, unread
  | 'malformed_body' // a JSON body that does not parse
  | 'compressed_stream' // a content-encoded event stream: forwarded, not measured
  | 'unknown_encoding' // a content-encoding we cannot decode
  | 'tap_error'; // an unexpected exception inside the tap (a bug; logged)

/** The process's budget for answers kept to be read (body-budget.ts's kind, INFERMETER_MAX_HELD_ANSWER_BYTES). */
export interface AnswerBudget {
  hold(): { take(bytes: number): boolean; release(): void };
}

export interface TapOptions {
  readonly maxEventBytes: number;
  readonly maxBodyBytes: number;
  /** What answers kept whole to be read take their bytes from; undefined: no total. */
  readonly answerBudget?: AnswerBudget | undefined;
  readonly problem: (kind: TapProblem, error?: unknown) => void;
}

/**
 * What reads a response body: handed each chunk once it was sent on to the client. `sent`: its
 * bytes are on the client's socket already (a write straight to an uncorked socket), so it may
 * be read at once; otherwise Node's response may still hold them corked until the next tick.
 */
export interface ResponseTap {
  readonly chunk: (chunk: Buffer, sent?: boolean) => void;
  /** The body ended. */
  readonly end: () => void;
  /** The response closed, ended or not: what was handed over is read still. */
  readonly close: () => void;
}
