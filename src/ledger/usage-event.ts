// One finished inference request as a CloudEvents 1.0 event (structured JSON mode): the record
// a bill is made from. Built from the same sample the metrics and the access log read, so the
// ledger cannot count differently from /metrics. Token figures are the sample's: null where the
// upstream did not state them, never invented.
import type { RequestSample, UsageSource } from '../measure/sample.ts';

export const USAGE_EVENT_TYPE = 'io.infermeter.inference.usage';
/** The version of `data`'s shape: a change that is not an added field is a new version. */
export const USAGE_DATA_SCHEMA = 'urn:infermeter:schema:inference-usage:1';

/**
 * What the token figures of a record mean. `engine`: the engine's own usage. `delivered`: a
 * stream cancelled or cut before the engine's usage came, counted from the token events that
 * reached the client (the engine may have generated more). `none`: no figure to bill.
 */
export type BillingBasis = 'engine' | 'delivered' | 'none';

/** The record's `usage_source`: where its figures came from, in the ledger's own words. */
export type LedgerUsageSource = 'engine' | 'fallback' | 'events' | 'none';

interface UsageData {
  readonly request_id: string;
  readonly model: string;
  readonly tenant: string | null;
  readonly route: string;
  readonly stream: boolean;
  readonly status: number;
  readonly outcome: string;
  readonly failure: string | null;
  readonly cancel_phase: string | null;
  readonly prompt_tokens: number | null;
  readonly completion_tokens: number | null;
  readonly reasoning_tokens: number | null;
  readonly cached_prompt_tokens: number | null;
  readonly usage_source: LedgerUsageSource;
  readonly billing_basis: BillingBasis;
  /** The per-token cost of the request at the prices in use, nano-units floored; null without a per-token price. */
  readonly cost_nanos: number | null;
  /** The version of those prices (INFERMETER_PRICES_FILE); null without a prices file. */
  readonly price_version: string | null;
  readonly ttft_ms: number | null;
  readonly e2e_ms: number | null;
  readonly client_backpressure_ms: number | null;
  readonly seq: number;
  readonly process_start_id: string;
}

export interface UsageEvent {
  readonly specversion: '1.0';
  readonly id: string;
  readonly source: string;
  readonly type: typeof USAGE_EVENT_TYPE;
  readonly dataschema: typeof USAGE_DATA_SCHEMA;
  readonly subject: string;
  readonly time: string;
  readonly datacontenttype: 'application/json';
  readonly data: UsageData;
}

/** Who wrote a record: the writer's start id, and where its sequence stands. */
export interface RecordIds {
  /** infermeter's own id of the request (never a client's): the event's id. */
  readonly eventId: string;
  /** The request's id as logged and sent upstream: the client's X-Request-Id, else infermeter's own. */
  readonly requestId: string;
  readonly seq: number;
  readonly processStartId: string;
}

/**
 * The sample's usage source mapped to the ledger's words; a value this version does not know
 * (another part may add one) is kept as `events` when token events were counted, else `none`:
 * never a figure the record cannot explain.
 */
export function ledgerUsageSource(source: UsageSource | string, tokenEvents: number): LedgerUsageSource {
  switch (source) {
    case 'upstream':
    case 'timings': // the engine's own figures, stated in its timings
      return 'engine';
    case 'fallback':
    case 'events':
    case 'none':
      return source;
    default:
      return tokenEvents > 0 ? 'events' : 'none';
  }
}

export function billingBasis(usage: LedgerUsageSource, completionTokens: number | undefined): BillingBasis {
  if (usage === 'engine') return 'engine';
  if (usage === 'events' && completionTokens !== undefined) return 'delivered';
  return 'none';
}

const ms = (seconds: number | undefined): number | null => (seconds === undefined ? null : Math.round(seconds * 1e6) / 1e3);
const orNull = <T>(v: T | undefined): T | null => (v === undefined ? null : v);

/** A request's cost at the prices in use (chargeback/), and their version; undefined: no prices. */
export type RecordPrice = (sample: RequestSample) => { readonly costNanos: bigint | undefined; readonly version: string } | undefined;

export function usageEvent(s: RequestSample, ids: RecordIds, source: string, at: Date, price?: RecordPrice): UsageEvent {
  const usage = ledgerUsageSource(s.usageSource, s.tokenEvents);
  const priced = price?.(s);
  return {
    specversion: '1.0',
    id: ids.eventId,
    source,
    type: USAGE_EVENT_TYPE,
    dataschema: USAGE_DATA_SCHEMA,
    subject: s.tenant ?? s.model,
    time: at.toISOString(),
    datacontenttype: 'application/json',
    data: {
      request_id: ids.requestId,
      model: s.model,
      tenant: orNull(s.tenant),
      route: s.api,
      stream: s.stream,
      status: s.status,
      outcome: s.outcome,
      failure: orNull(s.failure),
      cancel_phase: orNull(s.cancelPhase),
      prompt_tokens: orNull(s.promptTokens),
      completion_tokens: orNull(s.completionTokens),
      reasoning_tokens: orNull(s.reasoningTokens),
      cached_prompt_tokens: orNull(s.cachedPromptTokens),
      usage_source: usage,
      billing_basis: billingBasis(usage, s.completionTokens),
      cost_nanos: priced?.costNanos === undefined ? null : Number(priced.costNanos),
      price_version: priced?.version ?? null,
      ttft_ms: ms(s.ttft),
      e2e_ms: ms(s.duration ?? s.e2e),
      client_backpressure_ms: ms(s.backpressure),
      seq: ids.seq,
      process_start_id: ids.processStartId,
    },
  };
}
