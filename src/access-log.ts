// One JSON line per finished inference request, for grep and log pipelines. Writing never holds
// up the data plane: lines are batched and written every 100 ms (or once 64 KiB wait), to a
// file through an asynchronous stream (or to stdout); when the writer falls behind by more than
// a bound, further lines are dropped and counted rather than buffered without limit. Never a
// header value (the tenant aside, with INFERMETER_TENANT=header:<name>), never an API key (its
// hash at most), never prompt or completion text.
import { createWriteStream } from 'node:fs';
import type { Writable } from 'node:stream';
import type { Logger } from './log.ts';

export interface AccessRecord {
  readonly time: string;
  readonly request_id: string | undefined;
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly model: string;
  /** INFERMETER_TENANT's tenant (aliased, not folded by the label cap); absent when off. */
  readonly tenant?: string | undefined;
  readonly stream: boolean;
  readonly outcome: string;
  readonly failure: string | undefined;
  readonly cancel_phase: string | undefined;
  readonly ttfb_ms: number | undefined;
  readonly ttft_ms: number | undefined;
  readonly tpot_ms: number | undefined;
  readonly e2e_ms: number | undefined;
  readonly prompt_tokens: number | undefined;
  readonly completion_tokens: number | undefined;
  readonly usage_source: string;
  /** The usage record's `billing_basis` (ledger/usage-event.ts): `engine`, `delivered` or `none`. */
  readonly billing_basis: string;
  readonly usage_injected: boolean;
  readonly bytes_in: number;
  readonly bytes_out: number;
  /** A streamed response's time in infermeter (infermeter_proxy_overhead_seconds), in ms. */
  readonly proxy_overhead_ms?: number | undefined;
  /** A streamed response's longest silence (infermeter_stream_longest_gap_seconds), in ms. */
  readonly longest_gap_ms?: number | undefined;
  /** The time the client's socket refused writes (infermeter_client_backpressure_seconds), in ms. */
  readonly client_backpressure_ms?: number | undefined;
  /** Why the request was sent upstream once more (`stale_connection`, `injection_refused`); absent when sent once. */
  readonly resent?: string | undefined;
}

const FLUSH_INTERVAL_MS = 100;
const FLUSH_BYTES = 64 * 1024;

export interface AccessLog {
  write(record: AccessRecord): void;
  /**
   * A file target opened again at its path (SIGHUP, after logrotate moved it): what is batched
   * goes to the old file, later lines to the new one. Nothing for stdout or an injected stream.
   */
  reopen(): void;
  /** Flushes what is batched and closes a file target. */
  close(): Promise<void>;
}

export interface AccessLogOptions {
  /** 'stdout', or a file path (appended to). */
  readonly target: string;
  /** Bytes that may wait to be written before lines are dropped. */
  readonly maxPendingBytes: number;
  readonly dropped: () => void;
  /** A write failed (the lines of that write and every later one are dropped and counted). */
  readonly failed?: (error: NodeJS.ErrnoException) => void;
  /** The file was opened again (`reopen`). */
  readonly reopened?: () => void;
  /** Injected for tests. */
  readonly stream?: Writable;
}

export function createAccessLog(options: AccessLogOptions): AccessLog {
  const ownsStream = options.stream === undefined && options.target !== 'stdout';
  // A failing disk must not take the proxy down: the lines are dropped (counted) and the caller
  // told, which logs it (throttled).
  const opened = (s: Writable): Writable => s.on('error', (error: NodeJS.ErrnoException) => options.failed?.(error));
  let stream: Writable = opened(options.stream ?? (ownsStream ? createWriteStream(options.target, { flags: 'a' }) : process.stdout));
  let batch = '';
  let batchLines = 0;
  let scheduled = false;

  const flush = (): void => {
    scheduled = false;
    if (batch === '') return;
    const text = batch;
    const lines = batchLines;
    batch = '';
    batchLines = 0;
    if (stream.destroyed) {
      for (let i = 0; i < lines; i++) options.dropped();
      return;
    }
    stream.write(text, (error) => {
      if (error) for (let i = 0; i < lines; i++) options.dropped(); // lost with the failed write
    });
  };

  return {
    write(record) {
      const line = `${JSON.stringify(record)}\n`;
      if (stream.destroyed || stream.writableLength + batch.length + line.length > options.maxPendingBytes) {
        options.dropped();
        return;
      }
      batch += line;
      batchLines++;
      if (batch.length >= FLUSH_BYTES) flush();
      else if (!scheduled) {
        // One write per interval, not per request: a write is a system call (and for a file a
        // trip through libuv's thread pool).
        scheduled = true;
        setTimeout(flush, FLUSH_INTERVAL_MS).unref();
      }
    },
    reopen() {
      if (!ownsStream) return;
      flush(); // into the file as it was opened: the moved one
      const old = stream;
      stream = opened(createWriteStream(options.target, { flags: 'a' }));
      old.end();
      options.reopened?.();
    },
    close() {
      flush();
      if (!ownsStream) return Promise.resolve();
      return new Promise((resolve) => stream.end(resolve));
    },
  };
}

/** Access log bytes that may wait for the writer before lines are dropped. */
const MAX_PENDING_BYTES = 4 * 1024 * 1024;

/** INFERMETER_ACCESS_LOG's log: `stdout` or a file, a failed write and a reopening said in `log`. */
export function openAccessLog(target: string, log: Logger, dropped: () => void): AccessLog {
  return createAccessLog({
    target,
    maxPendingBytes: MAX_PENDING_BYTES,
    dropped,
    failed: (error) =>
      log.warnThrottled('access-log', 'access log write failed: its lines are dropped, counted in infermeter_access_log_dropped_total', {
        variable: 'INFERMETER_ACCESS_LOG',
        path: target,
        error: `${error.code ?? ''} ${error.message}`.trim(),
      }),
    reopened: () => log.info('access log reopened', { variable: 'INFERMETER_ACCESS_LOG', path: target, pid: process.pid }),
  });
}

/** Milliseconds from seconds, to the microsecond: readable and exact enough. */
export function ms(seconds: number | undefined): number | undefined {
  return seconds === undefined ? undefined : Math.round(seconds * 1e6) / 1e3;
}
