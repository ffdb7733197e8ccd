// The usage ledger's configuration: off unless INFERMETER_USAGE_DIR names a directory, which is
// created and probed for writing here, at start, so that a ledger that could not write one
// record stops the start instead of counting every record lost. The records' source defaults
// to this host's name and the data port: the same for every restart of the instance where the
// host name is (a VM, a StatefulSet's pod); INFERMETER_USAGE_SOURCE names it elsewhere.
import { closeSync, mkdirSync, openSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { nonEmpty, type Env, type Problem } from './parse.ts';

export interface UsageConfig {
  readonly dir: string;
  readonly source: string;
  readonly fsyncMs: number;
  readonly segmentBytes: number;
  readonly segmentMs: number;
  readonly retentionBytes: number;
  readonly retentionMs: number;
}

export interface UsageValues {
  readonly usageFsyncMs: number;
  readonly usageSegmentBytes: number;
  readonly usageSegmentSeconds: number;
  readonly usageRetentionBytes: number;
  readonly usageRetentionHours: number;
}

/** A URI reference (RFC 3986) of printable ASCII without spaces: CloudEvents' `source`. */
const URI_REFERENCE = /^[\x21-\x7e]{1,256}$/;

export function parseUsage(env: Env, values: UsageValues, host: string, port: number, problem: Problem, probe = true): UsageConfig | undefined {
  const dir = nonEmpty(env.INFERMETER_USAGE_DIR);
  const rawSource = nonEmpty(env.INFERMETER_USAGE_SOURCE);
  if (rawSource !== undefined && !URI_REFERENCE.test(rawSource)) {
    problem('INFERMETER_USAGE_SOURCE', 'a URI reference of 1 to 256 printable ASCII characters, no spaces', env.INFERMETER_USAGE_SOURCE);
  }
  if (dir === undefined) return undefined;
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
  };
}

/** `infermeter://<host>:<port>`, the host name lowered and cut to what a URI's authority takes. */
export function defaultSource(host: string, port: number): string {
  const name = host.toLowerCase().replace(/[^a-z0-9.-]/g, '-') || 'localhost';
  return `infermeter://${name}:${port}`;
}
