// infermeter's own families: what happened to traffic that the measurement could not read,
// so that nothing is lost silently. Incremented rarely (per fault), so the client's labelled
// counters are fine here.
import type { Registry } from '@prometheus-io/client';
import { prometheus } from '../../prometheus-parts.ts';
import { registerDerived } from '../exposition/families.ts';
import type { UninspectedReason } from '../../stream-tap/request-tap.ts';
import type { TapProblem } from '../../stream-tap/response-tap.ts';

/** What the data plane reports besides requests: the events behind infermeter's own families. */
export interface ProxyEvents {
  uninspected(reason: UninspectedReason): void;
  tapProblem(kind: TapProblem): void;
  proxyError(kind: ProxyErrorKind): void;
  /** An inference request sent upstream again, by why. */
  retried(reason: ResendReason): void;
  /** Usage injection: whether it is on now, requests injected, usage chunks removed. */
  injectionActive(on: boolean): void;
  usageInjected(body: InjectedBody): void;
  usageStripped(): void;
  accessLogDropped(): void;
  /**
   * An inference request refused with 503: the concurrency limit's queue was full, or its body
   * could not be held before the upstream was known to take the injected field.
   */
  rejected(reason: RejectReason): void;
  /** A client connection dropped before a request could be read: too slow, or not HTTP. */
  clientError(kind: ClientErrorKind): void;
  /** A request body not held because INFERMETER_MAX_HELD_BODY_BYTES were held already. */
  bodyUnheld(use: HeldBodyUse): void;
  /**
   * A request of a route infermeter forwards without measuring, for `dialect`, with the bounded
   * labels that dialect's passThroughLabels gave it (dialects/index.ts); undefined when no
   * dialect counts such requests.
   */
  readonly httpRequest?: ((dialect: string, route: string, method: string, status: number, seconds: number) => void) | undefined;
}

export interface ProxyFamilies extends ProxyEvents {
  /** A worker process exited and was restarted; `lost` of its requests were in flight. */
  workerRestarted(lost: number): void;
  readonly metricNames: readonly string[];
}

/** Why an inference request was refused with 503 (infermeter_requests_rejected_total's `reason`). */
export type RejectReason = 'concurrency' | 'held_body_budget';

// Every known label value starts at 0, so that rate() and alerts see a series before the first
// fault instead of none.
const UNINSPECTED: readonly UninspectedReason[] = ['empty', 'invalid_json', 'not_object', 'encoded'];
const TAP_PROBLEMS: readonly TapProblem[] = [
  'malformed_event',
  'event_too_large',
  'body_too_large',
  'body_unheld',
  'malformed_body',
  'compressed_stream',
  'unknown_encoding',
  'tap_error',
];
// The label values these families count, in the data plane's words: written here so that metrics/
// does not import the data plane (which imports it); test/unit/vocabulary.test.ts holds
// each equal to the data plane's own type.
const UPSTREAM_ERRORS = ['upstream_unreachable', 'upstream_timeout', 'upstream_reset', 'upstream_protocol'] as const;
export type ProxyErrorKind = (typeof UPSTREAM_ERRORS)[number] | 'overloaded' | 'body_too_large';
const CLIENT_ERRORS = ['timeout', 'malformed'] as const;
export type ClientErrorKind = (typeof CLIENT_ERRORS)[number];
const RETRIES = ['stale_connection', 'refused_injection'] as const;
export type ResendReason = (typeof RETRIES)[number];
const HELD_BODY_USES = ['usage_injection', 'retry_copy', 'content_length'] as const;
export type HeldBodyUse = (typeof HELD_BODY_USES)[number];
const INJECTED_BODIES = ['held', 'streamed'] as const;
export type InjectedBody = (typeof INJECTED_BODIES)[number];
const REJECT_REASONS: readonly RejectReason[] = ['concurrency', 'held_body_budget'];

/** Bytes held in memory now against the process's budgets (with workers, all workers' added up). */
export interface HeldBodyBytes {
  /** Request bodies (INFERMETER_MAX_HELD_BODY_BYTES). */
  readonly request: number;
  /** Answers kept to be read (INFERMETER_MAX_HELD_ANSWER_BYTES). */
  readonly answer: number;
}

/** `held`: read at every scrape. */
export function createProxyFamilies(registry: Registry, version: string, held: () => HeldBodyBytes = () => ({ request: 0, answer: 0 })): ProxyFamilies {
  const { Counter, Gauge } = prometheus();
  const uninspected = new Counter({
    name: 'infermeter_request_body_uninspected_total',
    help: 'Inference request bodies whose model and stream flag could not be read (counted with model_name="unknown"), by reason.',
    labelNames: ['reason'],
    registers: [registry],
  });
  const tapProblems = new Counter({
    name: 'infermeter_stream_tap_problems_total',
    help: 'Parts of inference responses that were forwarded but could not be measured, by kind.',
    labelNames: ['kind'],
    registers: [registry],
  });
  const proxyErrors = new Counter({
    name: 'infermeter_upstream_errors_total',
    help: 'Requests on which the proxy could not reach the upstream or lost it mid-response, by kind.',
    labelNames: ['kind'],
    registers: [registry],
  });
  const retries = new Counter({
    name: 'infermeter_upstream_retries_total',
    help: 'Inference requests sent upstream a second time, by reason: stale_connection (a reused connection failed before any response byte; sent again on a new one), refused_injection (the upstream refused the injected stream_options; sent again as the client wrote it).',
    labelNames: ['reason'],
    registers: [registry],
  });
  const injectionActive = new Gauge({
    name: 'infermeter_usage_injection_active',
    help: "1 while stream_options.include_usage is added to streaming requests that lack it; 0 when off, refused by the upstream, or not needed: the engine states a stream's counts without being asked (llama.cpp's timings).",
    registers: [registry],
  });
  const injected = new Counter({
    name: 'infermeter_usage_injected_total',
    help: 'Streaming requests to which stream_options.include_usage was added, by body: held (held whole, the field inserted first; sent again without it if the upstream refuses it) or streamed (a body not held, streamed through with the field appended at the end of its object, once the upstream is known to take it).',
    labelNames: ['body'],
    registers: [registry],
  });
  const stripped = new Counter({
    name: 'infermeter_usage_chunks_stripped_total',
    help: 'Usage-only chunks removed from streams because infermeter had asked for them.',
    registers: [registry],
  });
  const dropped = new Counter({
    name: 'infermeter_access_log_dropped_total',
    help: 'Access log lines dropped because the log writer fell behind.',
    registers: [registry],
  });
  const rejected = new Counter({
    name: 'infermeter_requests_rejected_total',
    help: "Inference requests refused with 503, by reason: concurrency (INFERMETER_MAX_CONCURRENCY requests in flight and twice as many waiting), held_body_budget (a chat or completions body that found INFERMETER_MAX_HELD_BODY_BYTES, or its client's part of it, spent before the upstream was known to take the injected stream_options, and no room within the wait).",
    labelNames: ['reason'],
    registers: [registry],
  });
  const clientErrors = new Counter({
    name: 'infermeter_client_errors_total',
    help: 'Client connections answered 408 (headers or body not received within INFERMETER_HEADERS_TIMEOUT_MS / INFERMETER_REQUEST_TIMEOUT_MS) or 400 (not HTTP), by kind.',
    labelNames: ['kind'],
    registers: [registry],
  });
  const unheld = new Counter({
    name: 'infermeter_request_bodies_unheld_total',
    help: 'Request bodies not held in memory because INFERMETER_MAX_HELD_BODY_BYTES of bodies were held already (per process), by what holding was for: usage_injection (forwarded as it came and still read for model and stream, without stream_options added), retry_copy (forwarded without the copy that lets it be sent again after a stale connection), content_length (a chunked DELETE or OPTIONS, answered 503 with Retry-After).',
    labelNames: ['use'],
    registers: [registry],
  });
  registerDerived(registry, {
    name: 'infermeter_held_body_bytes',
    help: 'Bytes held in memory now (per process, with workers all workers added up), by kind: request (request bodies held for usage injection, a re-send or a length; bounded by INFERMETER_MAX_HELD_BODY_BYTES per process), answer (non-streamed answers kept to read their usage, 4xx answers to injected requests read for a refusal; bounded by INFERMETER_MAX_HELD_ANSWER_BYTES per process). Back to 0 when no request is in flight.',
    type: 'gauge',
    collect: () => {
      const now = held();
      return [
        { value: now.request, labels: { kind: 'request' } },
        { value: now.answer, labels: { kind: 'answer' } },
      ];
    },
  });
  const restarts = new Counter({
    name: 'infermeter_worker_restarts_total',
    help: 'Worker processes that exited and were restarted (INFERMETER_WORKERS > 1). Their in-flight requests are counted as failed (worker_exit).',
    registers: [registry],
  });
  const lostRequests = new Counter({
    name: 'infermeter_worker_lost_requests_total',
    help: 'Requests in flight in a worker process when it exited, counted as failed.',
    registers: [registry],
  });
  const build = new Gauge({
    name: 'infermeter_build_info',
    help: 'Always 1; the labels name the infermeter and Node.js versions.',
    labelNames: ['version', 'node_version'],
    registers: [registry],
  });
  build.set({ version, node_version: process.versions.node }, 1);
  for (const reason of UNINSPECTED) uninspected.inc({ reason }, 0);
  for (const kind of TAP_PROBLEMS) tapProblems.inc({ kind }, 0);
  for (const kind of UPSTREAM_ERRORS) proxyErrors.inc({ kind }, 0);
  for (const kind of CLIENT_ERRORS) clientErrors.inc({ kind }, 0);
  for (const reason of RETRIES) retries.inc({ reason }, 0);
  for (const use of HELD_BODY_USES) unheld.inc({ use }, 0);
  for (const body of INJECTED_BODIES) injected.inc({ body }, 0);
  for (const reason of REJECT_REASONS) rejected.inc({ reason }, 0);
  return {
    uninspected: (reason) => uninspected.inc({ reason }),
    tapProblem: (kind) => tapProblems.inc({ kind }),
    proxyError: (kind) => proxyErrors.inc({ kind }),
    retried: (reason) => retries.inc({ reason }),
    injectionActive: (on) => injectionActive.set(on ? 1 : 0),
    usageInjected: (body) => injected.inc({ body }),
    usageStripped: () => stripped.inc(),
    accessLogDropped: () => dropped.inc(),
    rejected: (reason) => rejected.inc({ reason }),
    clientError: (kind) => clientErrors.inc({ kind }),
    bodyUnheld: (use) => unheld.inc({ use }),
    workerRestarted(lost) {
      restarts.inc();
      lostRequests.inc(lost);
    },
    metricNames: [
      'infermeter_request_body_uninspected_total',
      'infermeter_stream_tap_problems_total',
      'infermeter_upstream_errors_total',
      'infermeter_upstream_retries_total',
      'infermeter_usage_injection_active',
      'infermeter_usage_injected_total',
      'infermeter_usage_chunks_stripped_total',
      'infermeter_access_log_dropped_total',
      'infermeter_requests_rejected_total',
      'infermeter_client_errors_total',
      'infermeter_request_bodies_unheld_total',
      'infermeter_held_body_bytes',
      'infermeter_worker_restarts_total',
      'infermeter_worker_lost_requests_total',
      'infermeter_build_info',
    ],
  };
}
