// The usage ledger's configuration: off unless INFERMETER_USAGE_DIR names a directory, which is
// created and probed for writing here, at start, so that a ledger that could not write one
// record stops the start instead of counting every record lost. The records' source defaults
// to this host's name and the data port: the same for every restart of the instance where the
// host name is (a VM, a StatefulSet's pod); INFERMETER_USAGE_SOURCE names it elsewhere.
import { closeSync, mkdirSync, openSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { nonEmpty, utf8Capped, type Env, type Problem } from '../config/parse/parse.ts';

/** Where the records go besides the spool (INFERMETER_USAGE_SINK): an HTTP endpoint or a NATS JetStream subject. */
type SinkConfig = ({ readonly kind: 'http'; readonly url: string } | { readonly kind: 'nats'; readonly server: string; readonly subject: string }) & {
  /** INFERMETER_USAGE_SINK_TOKEN_FILE's token: a bearer token (HTTP), a connection token (NATS). */
  readonly token: string | undefined;
  readonly batchRecords: number;
  readonly timeoutMs: number;
  readonly backoffMaxMs: number;
};

export interface UsageConfig {
  readonly dir: string;
  readonly source: string;
  readonly fsyncMs: number;
  readonly segmentBytes: number;
  readonly segmentMs: number;
  readonly retentionBytes: number;
  readonly retentionMs: number;
  readonly sink: SinkConfig | undefined;
}

export interface UsageValues {
  readonly usageFsyncMs: number;
  readonly usageSegmentBytes: number;
  readonly usageSegmentSeconds: number;
  readonly usageRetentionBytes: number;
  readonly usageRetentionHours: number;
  readonly usageSinkBatch: number;
  readonly usageSinkTimeoutMs: number;
  readonly usageSinkBackoffMaxMs: number;
}

/** A URI reference (RFC 3986) of printable ASCII without spaces: CloudEvents' `source`. */
const URI_REFERENCE = /^[\x21-\x7e]{1,256}$/;

export function parseUsage(env: Env, values: UsageValues, host: string, port: number, problem: Problem, probe = true): UsageConfig | undefined {
  const dir = nonEmpty(env.INFERMETER_USAGE_DIR);
  const rawSource = nonEmpty(env.INFERMETER_USAGE_SOURCE);
  if (rawSource !== undefined && !URI_REFERENCE.test(rawSource)) {
    problem('INFERMETER_USAGE_SOURCE', 'a URI reference of 1 to 256 printable ASCII characters, no spaces', env.INFERMETER_USAGE_SOURCE);
  }
  const sink = parseSink(env, values, problem);
  if (dir === undefined) {
    if (sink !== undefined) problem('INFERMETER_USAGE_SINK', 'INFERMETER_USAGE_DIR to be set too (a sink delivers from the spool)', env.INFERMETER_USAGE_SINK);
    return undefined;
  }
  if (probe) {
    try {
      mkdirSync(dir, { recursive: true });
      const test = join(dir, `.probe-${process.pid}`);
      closeSync(openSync(test, 'w'));
      unlinkSync(test);
    } catch (error) {
      problem('INFERMETER_USAGE_DIR', `a directory infermeter can create files in (${(error as Error).message})`, dir);
    }
  }
  return {
    dir,
    source: rawSource ?? defaultSource(host, port),
    fsyncMs: values.usageFsyncMs,
    segmentBytes: values.usageSegmentBytes,
    segmentMs: values.usageSegmentSeconds * 1000,
    retentionBytes: values.usageRetentionBytes,
    retentionMs: values.usageRetentionHours * 3_600_000,
    sink,
  };
}

/** A NATS subject to publish to: dot-separated tokens, no wildcards, no white space. */
const SUBJECT = /^[^.*>\s]+(\.[^.*>\s]+)*$/;
/** A token file's bound: a token is a line, not a document. */
const readToken = utf8Capped(64 * 1024);

function parseSink(env: Env, values: UsageValues, problem: Problem, readFile: (path: string) => string = readToken): SinkConfig | undefined {
  const raw = nonEmpty(env.INFERMETER_USAGE_SINK);
  const tokenFile = nonEmpty(env.INFERMETER_USAGE_SINK_TOKEN_FILE);
  let token: string | undefined;
  if (tokenFile !== undefined) {
    try {
      token = readFile(tokenFile).trim();
      if (token === '' || /[\s\x00-\x1f\x7f]/.test(token)) {
        problem('INFERMETER_USAGE_SINK_TOKEN_FILE', 'a file holding one token (no white space or control characters inside)', tokenFile);
      }
    } catch (error) {
      problem('INFERMETER_USAGE_SINK_TOKEN_FILE', `a readable file holding the token (${(error as Error).message})`, tokenFile);
    }
  }
  if (raw === undefined) {
    if (tokenFile !== undefined) problem('INFERMETER_USAGE_SINK_TOKEN_FILE', 'INFERMETER_USAGE_SINK to be set too', tokenFile);
    return undefined;
  }
  const common = { token, batchRecords: values.usageSinkBatch, timeoutMs: values.usageSinkTimeoutMs, backoffMaxMs: values.usageSinkBackoffMaxMs };
  const expected = "an http(s)://host[:port]/path URL (e.g. OpenMeter's https://openmeter.example/api/v1/events) or nats://host[:port]/<subject>";
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    problem('INFERMETER_USAGE_SINK', expected, raw);
    return undefined;
  }
  if ((url.protocol === 'http:' || url.protocol === 'https:') && url.username === '' && url.password === '') {
    return { kind: 'http', url: url.href, ...common };
  }
  const subject = decodeURIComponent(url.pathname.slice(1));
  if (url.protocol === 'nats:' && url.hostname !== '' && url.search === '' && url.username === '' && SUBJECT.test(subject)) {
    return { kind: 'nats', server: `${url.hostname}:${url.port === '' ? 4222 : url.port}`, subject, ...common };
  }
  problem('INFERMETER_USAGE_SINK', `${expected} (credentials go in INFERMETER_USAGE_SINK_TOKEN_FILE, not in the URL)`, raw);
  return undefined;
}

/** `infermeter://<host>:<port>`, the host name lowered and cut to what a URI's authority takes. */
export function defaultSource(host: string, port: number): string {
  const name = host.toLowerCase().replace(/[^a-z0-9.-]/g, '-') || 'localhost';
  return `infermeter://${name}:${port}`;
}
