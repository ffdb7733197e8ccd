// The usage ledger: each finished inference request's record (usage-event.ts) given its place in
// its writer's sequence, and appended to the spool (spool.ts). A writer is a process that serves
// requests: the one process, or each worker, whose lines cross the worker bus to the primary's
// spool (cluster/bus.ts); its start id and sequence let a reader see a gap.
import { randomUUID } from 'node:crypto';
import type { Registry } from '@prometheus-io/client';
import type { UsageConfig } from './usage-config.ts';
import type { Logger } from '../log.ts';
import type { RequestSample } from '../measure/sample.ts';
import { registerDerived } from '../metrics/exposition/families.ts';
import { httpDelivery } from './http-sink.ts';
import { natsDelivery } from './nats-sink.ts';
import { type Delivery, type SinkLoop, startSink } from './sink.ts';
import { createSpool, type Spool, type SpoolFs } from './spool.ts';
import { type RecordPrice, usageEvent } from './usage-event.ts';

/** What the data plane calls when an inference request finished. */
export interface UsageWriter {
  /** `requestId`: the id logged and sent upstream; `eventId`: infermeter's own id of the request. */
  record(sample: RequestSample, requestId: string, eventId: string): void;
}

/** Bytes of records that may wait in memory for the spool's writer before one is lost (counted). */
const MAX_PENDING_BYTES = 8 * 1024 * 1024;
/** About this many bytes of records per batch a sink sends (at least one record). */
const MAX_BATCH_BYTES = 1024 * 1024;

/** A writer of records: its own start id and sequence; each record handed to `emit` as one JSON line. */
export function createUsageWriter(source: string, emit: (line: string) => void, now: () => number = Date.now, price?: RecordPrice): UsageWriter {
  const processStartId = randomUUID();
  let seq = 0;
  return {
    record(sample, requestId, eventId) {
      seq++;
      const event = usageEvent(sample, { eventId, requestId, seq, processStartId }, source, new Date(now()), price);
      emit(`${JSON.stringify(event)}\n`);
    },
  };
}

export interface Ledger {
  /** Appends a record's line (this process's writer's, or a worker's over the bus). */
  append(line: string): void;
  close(): Promise<void>;
}

/** The sink INFERMETER_USAGE_SINK names, delivering from the spool in `config.dir`. */
function startConfiguredSink(config: UsageConfig, records: Record<'delivered' | 'parked', number>, log: Logger): SinkLoop | undefined {
  const sink = config.sink;
  if (sink === undefined) return undefined;
  const where = sink.kind === 'http' ? sink.url : `nats://${sink.server}/${sink.subject}`;
  const delivery: Delivery =
    sink.kind === 'http'
      ? httpDelivery({
          url: sink.url,
          timeoutMs: sink.timeoutMs,
          ...(sink.token === undefined ? {} : { token: sink.token }),
          refused: (status, reason) =>
            log.warnThrottled('usage-sink-parked', 'usage sink: a record refused, parked in INFERMETER_USAGE_DIR/parked.jsonl', {
              sink: where,
              status,
              reason,
            }),
        })
      : natsDelivery({ server: sink.server, subject: sink.subject, timeoutMs: sink.timeoutMs, ...(sink.token === undefined ? {} : { token: sink.token }) });
  return startSink({
    dir: config.dir,
    delivery,
    maxRecords: sink.batchRecords,
    maxBytes: MAX_BATCH_BYTES,
    backoffMaxMs: sink.backoffMaxMs,
    counters: {
      delivered: (n) => (records.delivered += n),
      parked: (n) => (records.parked += n),
      failed: (error) =>
        log.warn('usage sink: delivery failed; retrying with backoff, the spool keeps the records (infermeter_usage_backlog_records)', {
          variable: 'INFERMETER_USAGE_SINK',
          sink: where,
          error: error.message,
        }),
      recovered: () => log.info('usage sink: delivering again', { sink: where }),
    },
  });
}

/** The spool (and the sink, when one is set) and their families on `registry`: records spooled, delivered, parked and lost, what waits, what is on disk. */
export function startLedger(config: UsageConfig, registry: Registry, log: Logger, fs?: SpoolFs): Ledger {
  const records = { spooled: 0, lost: 0, delivered: 0, parked: 0 };
  // Before the spool: its first retention pass asks the sink what it must keep.
  const sink = startConfiguredSink(config, records, log);
  const spool: Spool = createSpool({
    dir: config.dir,
    fsyncMs: config.fsyncMs,
    segmentBytes: config.segmentBytes,
    segmentMs: config.segmentMs,
    retentionBytes: config.retentionBytes,
    retentionMs: config.retentionMs,
    maxPendingBytes: MAX_PENDING_BYTES,
    ...(fs === undefined ? {} : { fs }),
    ...(sink === undefined ? {} : { keep: sink.keep }),
    counters: {
      spooled: (n) => {
        records.spooled += n;
        sink?.spooled(n);
      },
      lost: (n) => (records.lost += n),
      failed: (error) =>
        log.error(
          'usage ledger: writing to the spool failed; records are lost (counted in infermeter_usage_records_total{state="lost"}) until a write succeeds',
          {
            variable: 'INFERMETER_USAGE_DIR',
            dir: config.dir,
            error: `${error.code ?? ''} ${error.message}`.trim(),
          },
        ),
      recovered: () => log.info('usage ledger: writing to the spool works again', { dir: config.dir }),
    },
  });
  registerDerived(registry, {
    name: 'infermeter_usage_records_total',
    help: 'Usage records of finished inference requests, by state: spooled (written and synced to INFERMETER_USAGE_DIR), lost (a failed write, or more waiting than the memory bound); with INFERMETER_USAGE_SINK, delivered (acknowledged by the sink) and parked (refused by the sink, kept in parked.jsonl).',
    type: 'counter',
    collect: () => [
      { value: records.spooled, labels: { state: 'spooled' } },
      { value: records.lost, labels: { state: 'lost' } },
      ...(sink === undefined
        ? []
        : [
            { value: records.delivered, labels: { state: 'delivered' } },
            { value: records.parked, labels: { state: 'parked' } },
          ]),
    ],
  });
  if (sink !== undefined) {
    registerDerived(registry, {
      name: 'infermeter_usage_backlog_records',
      help: 'Usage records in the spool not yet delivered to INFERMETER_USAGE_SINK (nor parked).',
      type: 'gauge',
      collect: () => [{ value: sink.backlog().records, labels: {} }],
    });
    registerDerived(registry, {
      name: 'infermeter_usage_backlog_bytes',
      help: "Bytes of the spool from the sink's committed position on: not yet delivered to INFERMETER_USAGE_SINK.",
      type: 'gauge',
      collect: () => [{ value: sink.backlog().bytes, labels: {} }],
    });
    registerDerived(registry, {
      name: 'infermeter_usage_backlog_oldest_seconds',
      help: 'Age (by its time) of the oldest usage record not yet delivered to INFERMETER_USAGE_SINK; 0 when none waits.',
      type: 'gauge',
      collect: () => [{ value: sink.backlog().oldestSeconds, labels: {} }],
    });
  }
  registerDerived(registry, {
    name: 'infermeter_usage_pending_records',
    help: 'Usage records waiting in memory for the next write to the spool.',
    type: 'gauge',
    collect: () => [{ value: spool.backlog().pendingRecords, labels: {} }],
  });
  registerDerived(registry, {
    name: 'infermeter_usage_pending_oldest_seconds',
    help: 'How long the oldest usage record waiting in memory has waited (0 when none waits).',
    type: 'gauge',
    collect: () => [{ value: spool.backlog().oldestPendingSeconds, labels: {} }],
  });
  registerDerived(registry, {
    name: 'infermeter_usage_spool_bytes',
    help: 'Bytes of the usage segment files in INFERMETER_USAGE_DIR.',
    type: 'gauge',
    collect: () => [{ value: spool.backlog().bytes, labels: {} }],
  });
  registerDerived(registry, {
    name: 'infermeter_usage_spool_segments',
    help: 'Usage segment files in INFERMETER_USAGE_DIR (as of the last rotation).',
    type: 'gauge',
    collect: () => [{ value: spool.backlog().segments, labels: {} }],
  });
  return {
    append: (line) => spool.append(line),
    async close() {
      // The spool's last batch first, so a sink still running may take it; then the sink stops where it is.
      await spool.close();
      await sink?.close();
    },
  };
}
