// The HTTP sink: batches of records POSTed as a CloudEvents JSON batch
// (`application/cloudevents-batch+json`, a JSON array of the events), as OpenMeter's ingest API
// (`POST /api/v1/events`) takes them. A 2xx acknowledges the batch. A 400, 413 or 422 refuses
// something in it: the batch is split in halves, again, until the records refused are alone;
// those are parked, the rest delivered. Anything else (5xx, 429, 408, 401/403, a redirect, a
// timeout, a connection refused or reset) says nothing about the records: the batch is sent
// again after a backoff, so that a wrong token or a sink that is down parks nothing.
import type { Delivery } from './sink.ts';

/** Statuses that refuse the batch's content, not the sender: the batch is split to find the records refused. */
const REFUSED = new Set([400, 413, 422]);
/** Bytes of a refusal's body kept for the log. */
const MAX_REASON = 512;

export interface HttpSinkOptions {
  readonly url: string;
  /** A bearer token (from INFERMETER_USAGE_SINK_TOKEN_FILE). */
  readonly token?: string;
  readonly timeoutMs: number;
  /** Called once per record refused (parked), with the status and the start of the body. */
  readonly refused?: (status: number, reason: string) => void;
}

class SinkStatusError extends Error {
  readonly status: number;
  constructor(status: number) {
    super(`the sink answered ${status}`);
    this.status = status;
  }
}

export function httpDelivery(options: HttpSinkOptions): Delivery {
  const inFlight = new Set<AbortController>();
  const headers: Record<string, string> = { 'content-type': 'application/cloudevents-batch+json' };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;

  /** The response's status and the start of its body (never more than MAX_REASON bytes read into text). */
  const post = async (body: string): Promise<{ status: number; reason: string }> => {
    const abort = new AbortController();
    inFlight.add(abort);
    const timer = setTimeout(() => abort.abort(new Error(`no answer within ${options.timeoutMs} ms`)), options.timeoutMs);
    try {
      const res = await fetch(options.url, { method: 'POST', headers, body, redirect: 'manual', signal: abort.signal });
      let reason = '';
      if (res.body !== null) {
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          if (reason.length < MAX_REASON) reason += decoder.decode(value, { stream: true });
        }
      }
      return { status: res.status, reason: reason.slice(0, MAX_REASON) };
    } finally {
      clearTimeout(timer);
      inFlight.delete(abort);
    }
  };

  const send = async (lines: readonly string[], indexes: number[]): Promise<number[]> => {
    const { status, reason } = await post(`[${indexes.map((i) => lines[i]).join(',')}]`);
    if (status >= 200 && status < 300) return [];
    if (!REFUSED.has(status)) throw new SinkStatusError(status);
    if (indexes.length === 1) {
      options.refused?.(status, reason);
      return indexes;
    }
    const half = Math.ceil(indexes.length / 2);
    return [...(await send(lines, indexes.slice(0, half))), ...(await send(lines, indexes.slice(half)))];
  };

  return {
    send: (lines) =>
      send(
        lines,
        lines.map((_, i) => i),
      ),
    async close() {
      for (const abort of inFlight) abort.abort(new Error('closing'));
    },
  };
}
