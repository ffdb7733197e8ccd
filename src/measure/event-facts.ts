// What one event means for measurement, whichever API sent it (openai-events.ts for the OpenAI
// shapes, anthropic-events.ts for Anthropic's): the shared shape both classifiers answer in.
import type { EngineTimings } from './engine-timings.ts';
import type { Usage } from './usage.ts';

export interface EventFacts {
  /** The event carries generated output: it counts for TTFT and as a token-carrying event. */
  readonly token: boolean;
  /** The usage this event reports, when it reports one. */
  readonly usage: Usage | undefined;
  /** The upstream reported an error inside the stream. */
  readonly error: boolean;
  /** `data: [DONE]`, the chat/completions end marker. */
  readonly done: boolean;
  /** The payload was not JSON: nothing else could be read from it. */
  readonly malformed: boolean;
  /** Why generation stopped, when this event says (see readFinishReason). */
  readonly finishReason: string | undefined;
  /** The payload's `model` (the Responses API: its response's), on events that report usage or a finish reason. */
  readonly model?: string | undefined;
  /** The engine's own `timings` (llama.cpp), on the event that carries them. */
  readonly timings?: EngineTimings | undefined;
  /**
   * The token's output is reasoning only (`reasoning_content`, `reasoning`, Anthropic's
   * thinking, the Responses API's reasoning events): it counts for TTFT, not as visible output.
   * Absent on a token with visible output (text, a tool call, a refusal, audio).
   */
  readonly reasoning?: true;
}

/** A token-carrying event whose output is reasoning only, and nothing else. */
export const REASONING: EventFacts = { token: true, usage: undefined, error: false, done: false, malformed: false, finishReason: undefined, reasoning: true };

/** Longest finish reason kept: engines send short words; anything longer is cut. */
const MAX_FINISH_REASON = 64;

/** A `finish_reason` value: a non-empty string (cut to 64 characters), else undefined (null, absent). */
export function readFinishReason(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length === 0) return undefined;
  return value.length > MAX_FINISH_REASON ? value.slice(0, MAX_FINISH_REASON) : value;
}
