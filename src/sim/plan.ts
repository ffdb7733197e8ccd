/** What the simulator will generate for one request, whichever API asked. */
export interface Plan {
  readonly id: string;
  readonly model: string;
  readonly promptTokens: number;
  readonly tokens: number;
  readonly ttftMs: number;
  /** Milliseconds between two tokens, drawn per gap. */
  readonly gapMs: () => number;
  readonly tokensPerEvent: number;
  /** Tokens after which a stream's connection is destroyed (x-sim-cut-after); undefined: none. */
  readonly cutAfter?: number;
  /** Tokens after which a stream sends nothing more until the client leaves (x-sim-hold-after); undefined: none. */
  readonly holdAfter?: number;
  /** The request body, for the fields an answer echoes. */
  readonly body: Readonly<Record<string, unknown>>;
}
