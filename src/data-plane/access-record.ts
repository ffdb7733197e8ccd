// One finished inference request as a line of the access log: figures and sizes, never a
// header or a prompt.
import type { IncomingMessage } from 'node:http';
import { ms, type AccessRecord } from '../access-log.ts';
import { billingBasis, ledgerUsageSource } from '../ledger/usage-event.ts';
import type { RequestSample } from '../measure/sample.ts';
import type { Exchange } from './exchange.ts';
import { pathOf } from './request-path.ts';

export function accessRecord(req: IncomingMessage, exchange: Exchange, s: RequestSample): AccessRecord {
  const injection = exchange.injection;
  const counted = s.usageSource === 'fallback';
  return {
    time: new Date().toISOString(),
    request_id: exchange.requestId,
    method: req.method ?? '',
    path: pathOf(req),
    status: s.status,
    model: s.model,
    tenant: s.tenant,
    stream: s.stream,
    outcome: s.outcome,
    failure: s.failure,
    cancel_phase: s.cancelPhase,
    ttfb_ms: ms(s.ttfb),
    ttft_ms: ms(s.ttft),
    tpot_ms: ms(s.tpot?.seconds),
    e2e_ms: ms(s.e2e),
    // A complete stream without usage: 0 on the spec's families, but here what it delivered.
    prompt_tokens: counted ? undefined : s.promptTokens,
    completion_tokens: counted ? s.tokenEvents : s.completionTokens,
    usage_source: counted ? 'events' : s.usageSource,
    billing_basis: billingBasis(ledgerUsageSource(s.usageSource, s.tokenEvents), s.completionTokens),
    usage_injected: injection !== undefined && !injection.refused,
    bytes_in: exchange.bytesIn,
    bytes_out: exchange.bytesOut,
    proxy_overhead_ms: ms(s.proxyOverhead),
    longest_gap_ms: ms(s.longestGap),
    client_backpressure_ms: ms(s.backpressure),
    resent: exchange.resendReason,
  };
}
