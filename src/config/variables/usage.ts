// The variables table, the usage ledger's part: the spool's directory, the records' source, the
// sync interval, rotation and retention (docs/usage-records.md). variables.ts joins it after
// the proxy's part, in the documented table's order.
import { byteSize, integer } from '../parse/parse.ts';
import { documented, variable } from './variable-table.ts';

const MiB = 1024 * 1024;

export const USAGE_VARIABLES = [
  documented(
    'INFERMETER_USAGE_DIR',
    'unset (off)',
    'a directory: the usage ledger, one CloudEvents record per finished inference request appended to JSON-lines',
    'segment files there, synced every `INFERMETER_USAGE_FSYNC_MS` ([usage records](usage-records.md)); created if',
    'missing; a directory infermeter cannot write to stops the start',
  ),
  documented(
    'INFERMETER_USAGE_SOURCE',
    '`infermeter://<hostname>:<data port>`',
    "the records' CloudEvents `source`, naming this instance (with the event `id`, what a metering service",
    'de-duplicates on): a URI reference of 1 to 256 printable characters; set it where the host name changes',
    'between restarts of the same instance',
  ),
  documented(
    'INFERMETER_PRICES_FILE',
    'unset (no cost figures)',
    "the operator's prices, a YAML or JSON file (`currency`, `version`, `models`: a list of `match` globs over",
    'the model name, each with `per_million_tokens` {`prompt`, `cached_prompt`, `completion`, `reasoning`}',
    'and/or `per_hour`, the pool serving those models): cost per tenant and model in integer nano-units',
    '([chargeback](chargeback.md)). Read again on SIGHUP and when the file changes; a bad file stops the',
    'start naming the key, and on a reload keeps the prices in use, with a warning naming the key',
  ),
  variable({
    name: 'INFERMETER_USAGE_FSYNC_MS',
    key: 'usageFsyncMs',
    parse: integer(1, 10_000),
    value: 100,
    meaning: [
      'the usage ledger writes and fdatasyncs its batch of records this often, {range} ms: a record is on disk at',
      "most this long (plus the write's own time) after its request ended",
    ],
  }),
  variable({
    name: 'INFERMETER_USAGE_SEGMENT_BYTES',
    key: 'usageSegmentBytes',
    parse: byteSize(4096, 1024 * MiB),
    value: 64 * MiB,
    meaning: 'a usage segment file this large is closed and a new one begun, {range} bytes',
  }),
  variable({
    name: 'INFERMETER_USAGE_SEGMENT_SECONDS',
    key: 'usageSegmentSeconds',
    parse: integer(1, 7 * 86_400),
    value: 3600,
    meaning: 'a usage segment file this old is closed and a new one begun at the next write, {range} s',
  }),
  variable({
    name: 'INFERMETER_USAGE_RETENTION_BYTES',
    key: 'usageRetentionBytes',
    parse: byteSize(MiB, 2 ** 50),
    value: 4096 * MiB,
    meaning: 'the oldest closed usage segments are deleted while all of them take more than this, {range} bytes',
  }),
  variable({
    name: 'INFERMETER_USAGE_RETENTION_HOURS',
    key: 'usageRetentionHours',
    parse: integer(1, 10 * 8760),
    value: 24 * 90,
    meaning: 'closed usage segments older than this are deleted, {range} hours',
  }),
  documented(
    'INFERMETER_USAGE_SINK',
    'unset (the spool is the ledger)',
    'where the usage records are delivered from the spool, at least once ([usage records](usage-records.md#sinks)):',
    "an `http(s)://` URL takes CloudEvents batches as OpenMeter's `POST /api/v1/events` does; `nats://host[:port]/<subject>`",
    'publishes to NATS JetStream. Needs `INFERMETER_USAGE_DIR`',
  ),
  documented(
    'INFERMETER_USAGE_SINK_TOKEN_FILE',
    'unset',
    "a file holding the sink's token (at most 64 KiB, white space around it trimmed): sent as `Authorization: Bearer`",
    'to an HTTP sink, as the connection token to NATS; read at start, an unreadable file stops the start',
  ),
  variable({
    name: 'INFERMETER_USAGE_SINK_BATCH',
    key: 'usageSinkBatch',
    parse: integer(1, 10_000),
    value: 500,
    meaning: 'the usage sink sends at most this many records (and about 1 MiB) at once, {range}',
  }),
  variable({
    name: 'INFERMETER_USAGE_SINK_TIMEOUT_MS',
    key: 'usageSinkTimeoutMs',
    parse: integer(100, 600_000),
    value: 10_000,
    meaning: "a usage sink's answer (an HTTP response, JetStream's acknowledgements) not there after this long fails the batch, sent again later, {range} ms",
  }),
  variable({
    name: 'INFERMETER_USAGE_SINK_BACKOFF_MAX_MS',
    key: 'usageSinkBackoffMaxMs',
    parse: integer(100, 3_600_000),
    value: 30_000,
    meaning: 'a failed delivery is retried after a backoff that doubles from 100 ms up to this, jittered, {range} ms',
  }),
] as const;
