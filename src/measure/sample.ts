// The canonical record of one inference request: measured once by the request timer,
// then mapped by each metric dialect to its own names, units and labels.
import type { EngineTimings } from './engine-timings.ts';
import type { InferenceApi } from './inference-apis.ts';
import type { UsageRejection } from './usage.ts';

/** The name of a row of the API table (inference-apis.ts): the OpenAI routes, and Anthropic's Messages API. */
export type { InferenceApi } from './inference-apis.ts';

export type Outcome = 'success' | 'failed' | 'cancelled';

/** Why a request failed; stable strings, used as label values and in logs. */
export type FailureReason =
  | 'upstream_status' // the upstream answered >= 400 (or a non-2xx status)
  | 'upstream_unreachable' // no response: connection refused, DNS, TLS
  | 'upstream_timeout' // the upstream was silent past INFERMETER_UPSTREAM_IDLE_TIMEOUT_MS, or the request passed INFERMETER_TOTAL_TIMEOUT_MS
  | 'upstream_reset' // the response broke off before its end
  | 'upstream_protocol' // the upstream's answer was not valid HTTP
  | 'stream_error' // an error event inside a 2xx stream
  | 'worker_exit'; // the worker process serving it died (INFERMETER_WORKERS > 1)

/**
 * Where the token counts came from: the upstream's usage; the engine's timings (llama.cpp's
 * `prompt_n` + `cache_n` and `predicted_n`, on a stream without usage); the spec's zero fallback
 * (a complete stream without usage); the token events seen (a stream cut short without usage);
 * none.
 */
export type UsageSource = 'upstream' | 'timings' | 'fallback' | 'events' | 'none';

/** Where a cancelled request was when the client left. */
export type CancelPhase = 'before_first_token' | 'decoding';

export interface RequestInfo {
  readonly api: InferenceApi;
  /** The `model` of the request body, or 'unknown'. */
  readonly model: string;
  /** The `stream` flag of the request body. */
  readonly stream: boolean;
  /** Who sent it (INFERMETER_TENANT: a header's value or a hashed key, aliased); absent when off. */
  readonly tenant?: string | undefined;
  /**
   * The request's id, its histograms' exemplar: the client's x-request-id when it is a sane
   * token (as the access log takes it), else the id infermeter gives the request.
   */
  readonly requestId?: string | undefined;
  /**
   * With a tenant: whether the engine accepted the request (true: a 2xx answer; false: 401 or
   * 403); undefined until it answered, when it never did, or when it answered any other status
   * (a 404 on a path the engine's key check does not guard says nothing). Only an accepted request
   * gives its tenant a place of its own (metrics/state/tenant-label.ts).
   */
  readonly accepted?: boolean | undefined;
}

export interface RequestSample extends RequestInfo {
  /** HTTP status the client got (502 when the upstream could not be reached). */
  readonly status: number;
  readonly outcome: Outcome;
  readonly failure: FailureReason | undefined;
  /** For a cancelled request, whether output had begun. */
  readonly cancelPhase: CancelPhase | undefined;
  /** Seconds from arrival to the upstream's response headers (undefined when none came). */
  readonly ttfb: number | undefined;
  /** The response was a server-sent event stream. */
  readonly streamed: boolean;
  /** Output was seen (first token, or first body byte of a non-streamed answer): it was running, not waiting. */
  readonly outputSeen: boolean;
  /** Seconds from arrival to the first token-carrying event (streams only). */
  readonly ttft: number | undefined;
  /**
   * A streamed response's time in the proxy, in seconds: from an upstream chunk's arrival in the
   * data plane to its write to the client, the mean over the response's writes.
   */
  readonly proxyOverhead?: number | undefined;
  /**
   * A streamed response's longest silence, in seconds: the longest time between two batches
   * relayed to the client (each stamped as it arrived, written in that turn), from the first,
   * less any time the client's socket refused writes meanwhile; for a stream that did not end
   * cleanly, its silence before the end too. Undefined: not a stream, or nothing relayed.
   */
  readonly longestGap?: number | undefined;
  /**
   * Seconds the client's socket refused writes (the relay waited for its 'drain', the upstream
   * paused): the client's own slowness, not the engine's. 0 when never.
   */
  readonly backpressure?: number | undefined;
  /** Seconds from arrival to the last token-carrying event (streams only). */
  readonly lastToken: number | undefined;
  /** Seconds from arrival to the last byte handed to the client (successes only). */
  readonly e2e: number | undefined;
  /** Seconds per output token after the first, and how many tokens that covers (n - 1). */
  readonly tpot: { readonly seconds: number; readonly tokens: number } | undefined;
  readonly promptTokens: number | undefined;
  readonly completionTokens: number | undefined;
  readonly usageSource: UsageSource;
  /**
   * The usage's details, where the upstream stated them (never guessed): prompt tokens a prompt
   * cache served (cached_tokens, prompt_cache_hit_tokens, Anthropic's cache_read_input_tokens),
   * prompt tokens written to Anthropic's cache (cache_creation_input_tokens), generated tokens
   * spent on reasoning (reasoning_tokens). Undefined when the usage lacks the field.
   */
  readonly cachedPromptTokens?: number | undefined;
  readonly cacheWriteTokens?: number | undefined;
  readonly reasoningTokens?: number | undefined;
  /**
   * What was wrong with the upstream's usage, when anything was (at most one of each): a report
   * refused for a count above MAX_TOKEN_COUNT (`too_large`: the request counts as without
   * usage), reasoning tokens above the completion tokens or cached tokens above the prompt's
   * (each cut to its whole). Undefined when nothing was.
   */
  readonly usageRejections?: readonly UsageRejection[] | undefined;
  /** Number of token-carrying events seen. */
  readonly tokenEvents: number;
  /**
   * Why generation stopped, as the upstream said: the last non-null `choices[].finish_reason`
   * ("stop", "length", "tool_calls", ...; at most 64 characters), or for the Responses API
   * "stop" (completed) or its incomplete reason ("length" for max_output_tokens); undefined when
   * the upstream did not say (a cut stream, an engine that leaves it out, an error).
   */
  readonly finishReason: string | undefined;
  /**
   * Seconds from arrival to the end of the request, whatever its outcome: the last byte handed
   * to the client, or when its connection closed (equal to `e2e` for a success). Left out for
   * requests lost with a worker.
   */
  readonly duration?: number | undefined;
  /**
   * The `model` the upstream named in its answer (OpenAI's `gen_ai.response.model`: e.g.
   * gpt-4o-2024-08-06 for gpt-4o), read where the answer is parsed anyway: a non-streamed body,
   * a stream's usage or finish chunk, the Responses API's final event. Undefined when it said none.
   */
  readonly responseModel?: string | undefined;
  /**
   * Seconds the request waited in infermeter's own admission queue (INFERMETER_MAX_CONCURRENCY)
   * before it was forwarded; 0 without a limit. Left out for requests lost with a worker.
   */
  readonly queued?: number | undefined;
  /** What the request asked for: its generation limit and number of choices, when it set them. */
  readonly params?: RequestParams | undefined;
  /** The engine's own timings (llama.cpp's `timings`), when its answer carried them; the last report wins. */
  readonly engineTimings?: EngineTimings | undefined;
}

/**
 * The request's own generation parameters, read from its body: `max_completion_tokens`, else
 * `max_tokens`, else `max_output_tokens` (Responses API); `n`.
 */
export interface RequestParams {
  readonly maxTokens: number | undefined;
  readonly n: number | undefined;
}
