// A local OTLP/HTTP metrics receiver for the export tests: node:http on port 0, answering every
// POST /v1/metrics with 200 (or a refusal, or a body a byte at a time that never ends) and decoding what arrived, whether binary protobuf
// (application/x-protobuf, decoded here from the opentelemetry-proto field numbers) or JSON
// (application/json), into one shape. Tests await the receiver's exports, never a timer.
import http from 'node:http';
import { listen } from './listen.ts';

export type AttributeValue = string | number | boolean;

export interface HistogramPoint {
  readonly attributes: Readonly<Record<string, AttributeValue>>;
  readonly count: number;
  readonly sum: number | undefined;
  readonly bucketCounts: readonly number[];
  readonly explicitBounds: readonly number[];
  readonly min: number | undefined;
  readonly max: number | undefined;
}

export interface ReceivedMetric {
  readonly name: string;
  readonly unit: string;
  readonly description: string;
  /** 1 delta, 2 cumulative; undefined when the metric is not a histogram. */
  readonly temporality: number | undefined;
  readonly points: readonly HistogramPoint[];
}

export interface ReceivedExport {
  readonly contentType: string;
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly resource: Readonly<Record<string, AttributeValue>>;
  readonly scopes: ReadonlyArray<{ readonly name: string; readonly version: string }>;
  readonly metrics: readonly ReceivedMetric[];
}

export interface OtlpReceiver {
  /** Base URL, e.g. http://127.0.0.1:40123 (OTEL_EXPORTER_OTLP_ENDPOINT). */
  readonly url: string;
  /** Exports answered with a refusal so far. */
  readonly refused: () => number;
  /** Exports begun so far, and the most that were open at once (begun, their connection not closed). */
  readonly begun: () => number;
  readonly mostOpen: () => number;
  readonly exports: readonly ReceivedExport[];
  /** Resolves with the first export (received so far or later) for which `predicate` holds; rejects after `timeoutMs`. */
  waitFor(predicate: (e: ReceivedExport) => boolean, timeoutMs?: number): Promise<ReceivedExport>;
  /** Answers the first export, held since it was received (holdFirst). */
  release(): void;
  close(): Promise<void>;
}

export interface OtlpReceiverOptions {
  /** Answers the first `refuse` exports 400 (not retryable), unread; default 0. */
  readonly refuse?: number;
  /** Receives the first export but answers it only once `release` (of the receiver) is called. */
  readonly holdFirst?: boolean;
  /** Answers every export 200 with a body that never ends, one byte every `trickleMs` ms. */
  readonly trickleMs?: number;
}

export async function startOtlpReceiver(options: OtlpReceiverOptions = {}): Promise<OtlpReceiver> {
  let refusals = options.refuse ?? 0;
  const exports: ReceivedExport[] = [];
  // The first export's answer, while it is held (holdFirst); `holding` until it is received.
  let holding = options.holdFirst === true;
  let heldAnswer: (() => void) | undefined;
  const waiters: Array<{ predicate: (e: ReceivedExport) => boolean; resolve: (e: ReceivedExport) => void }> = [];
  let begun = 0;
  let open = 0;
  let mostOpen = 0;
  const server = http.createServer((req, res) => {
    begun++;
    mostOpen = Math.max(mostOpen, ++open);
    res.once('close', () => open--);
    if (options.trickleMs !== undefined) {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      const drip = setInterval(() => res.write('\0'), options.trickleMs);
      res.once('close', () => clearInterval(drip));
      return;
    }
    if (refusals > 0) {
      refusals--;
      req.resume();
      res.writeHead(400, { 'content-type': 'text/plain' }).end('refused by the test\n');
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const contentType = req.headers['content-type'] ?? '';
      const body = Buffer.concat(chunks);
      let decoded: Omit<ReceivedExport, 'contentType' | 'path' | 'headers'>;
      try {
        decoded = contentType.includes('json') ? fromJson(JSON.parse(body.toString('utf8'))) : fromProtobuf(body);
      } catch (error) {
        res.writeHead(400).end(String(error));
        return;
      }
      const received: ReceivedExport = { contentType, path: req.url ?? '', headers: req.headers, ...decoded };
      exports.push(received);
      for (const w of waiters.splice(0)) {
        if (w.predicate(received)) w.resolve(received);
        else waiters.push(w);
      }
      // An empty ExportMetricsServiceResponse, in the request's encoding.
      const answer = (): void => {
        if (contentType.includes('json')) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      };
      if (holding) {
        holding = false;
        heldAnswer = answer;
      } else answer();
    });
  });
  const { url, close } = await listen(undefined, server);
  return {
    url,
    refused: () => (options.refuse ?? 0) - refusals,
    begun: () => begun,
    mostOpen: () => mostOpen,
    exports,
    release() {
      heldAnswer?.();
      heldAnswer = undefined;
    },
    waitFor(predicate, timeoutMs = 15_000) {
      const hit = exports.find(predicate);
      if (hit !== undefined) return Promise.resolve(hit);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          const i = waiters.findIndex((w) => w.resolve === done);
          if (i !== -1) waiters.splice(i, 1);
          const last = exports.at(-1);
          reject(
            new Error(
              `no matching OTLP export within ${timeoutMs} ms (${exports.length} received; last: ${JSON.stringify(last?.metrics.map((m) => [m.name, m.points.map((p) => [p.attributes, p.count, p.sum])]))})`,
            ),
          );
        }, timeoutMs);
        function done(e: ReceivedExport): void {
          clearTimeout(timer);
          resolve(e);
        }
        waiters.push({ predicate, resolve: done });
      });
    },
    close,
  };
}

// --- JSON (the OTLP/JSON mapping: camelCase fields, 64-bit integers as numbers or strings) ---

interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
}
interface JsonKeyValue {
  key: string;
  value?: JsonAnyValue;
}

function jsonAttributes(list: JsonKeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const kv of list ?? []) {
    const v = kv.value ?? {};
    out[kv.key] = v.stringValue ?? v.boolValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.doubleValue ?? ''));
  }
  return out;
}

function fromJson(body: {
  resourceMetrics?: Array<{
    resource?: { attributes?: JsonKeyValue[] };
    scopeMetrics?: Array<{
      scope?: { name?: string; version?: string };
      metrics?: Array<{
        name: string;
        unit?: string;
        description?: string;
        histogram?: {
          aggregationTemporality?: number;
          dataPoints?: Array<{
            attributes?: JsonKeyValue[];
            count?: number | string;
            sum?: number;
            bucketCounts?: Array<number | string>;
            explicitBounds?: number[];
            min?: number;
            max?: number;
          }>;
        };
      }>;
    }>;
  }>;
}): Omit<ReceivedExport, 'contentType' | 'path' | 'headers'> {
  const rm = body.resourceMetrics ?? [];
  const resource = jsonAttributes(rm[0]?.resource?.attributes);
  const scopes: Array<{ name: string; version: string }> = [];
  const metrics: ReceivedMetric[] = [];
  for (const r of rm) {
    for (const sm of r.scopeMetrics ?? []) {
      scopes.push({ name: sm.scope?.name ?? '', version: sm.scope?.version ?? '' });
      for (const m of sm.metrics ?? []) {
        metrics.push({
          name: m.name,
          unit: m.unit ?? '',
          description: m.description ?? '',
          temporality: m.histogram?.aggregationTemporality,
          points: (m.histogram?.dataPoints ?? []).map((p) => ({
            attributes: jsonAttributes(p.attributes),
            count: Number(p.count ?? 0),
            sum: p.sum,
            bucketCounts: (p.bucketCounts ?? []).map(Number),
            explicitBounds: p.explicitBounds ?? [],
            min: p.min,
            max: p.max,
          })),
        });
      }
    }
  }
  return { resource, scopes, metrics };
}

// --- Protobuf (opentelemetry/proto/collector/metrics/v1 and metrics/v1 field numbers) ---

interface Field {
  readonly field: number;
  readonly wire: number;
  /** varint and fixed64 as bigint (fixed64 as its raw bits), length-delimited as bytes. */
  readonly value: bigint | Buffer;
}

function fields(b: Buffer): Field[] {
  const out: Field[] = [];
  let i = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (i >= b.length) throw new Error('truncated varint');
      const byte = b[i++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (i < b.length) {
    const tag = Number(varint());
    const field = tag >>> 3;
    const wire = tag & 7;
    if (wire === 0) out.push({ field, wire, value: varint() });
    else if (wire === 1) {
      out.push({ field, wire, value: b.readBigUInt64LE(i) });
      i += 8;
    } else if (wire === 2) {
      const length = Number(varint());
      out.push({ field, wire, value: b.subarray(i, i + length) });
      i += length;
    } else if (wire === 5) {
      out.push({ field, wire, value: BigInt(b.readUInt32LE(i)) });
      i += 4;
    } else throw new Error(`unsupported wire type ${wire}`);
  }
  return out;
}

const bytes = (f: Field): Buffer => f.value as Buffer;
const text = (f: Field): string => bytes(f).toString('utf8');
const double = (f: Field): number => {
  const buf = Buffer.alloc(8);
  buf.writeBigUInt64LE(f.value as bigint);
  return buf.readDoubleLE(0);
};

/** A repeated fixed64 or double field: packed (one length-delimited field) or not. */
function repeated64(fs: Field[], n: number, read: (raw: bigint) => number): number[] {
  const out: number[] = [];
  for (const f of fs) {
    if (f.field !== n) continue;
    if (f.wire === 2) {
      const b = bytes(f);
      for (let i = 0; i < b.length; i += 8) out.push(read(b.readBigUInt64LE(i)));
    } else out.push(read(f.value as bigint));
  }
  return out;
}

const asDouble = (raw: bigint): number => {
  const buf = Buffer.alloc(8);
  buf.writeBigUInt64LE(raw);
  return buf.readDoubleLE(0);
};

function anyValue(b: Buffer): AttributeValue {
  for (const f of fields(b)) {
    if (f.field === 1) return text(f);
    if (f.field === 2) return f.value === 1n;
    if (f.field === 3) return Number(BigInt.asIntN(64, f.value as bigint));
    if (f.field === 4) return double(f);
  }
  return '';
}

function keyValues(fs: Field[], n: number): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const f of fs) {
    if (f.field !== n) continue;
    let key = '';
    let value: AttributeValue = '';
    for (const kv of fields(bytes(f))) {
      if (kv.field === 1) key = text(kv);
      else if (kv.field === 2) value = anyValue(bytes(kv));
    }
    out[key] = value;
  }
  return out;
}

function histogramPoint(b: Buffer): HistogramPoint {
  const fs = fields(b);
  const one = (n: number): Field | undefined => fs.find((f) => f.field === n);
  const count = one(4);
  const sum = one(5);
  const min = one(11);
  const max = one(12);
  return {
    attributes: keyValues(fs, 9),
    count: count === undefined ? 0 : Number(count.value as bigint),
    sum: sum === undefined ? undefined : double(sum),
    bucketCounts: repeated64(fs, 6, Number),
    explicitBounds: repeated64(fs, 7, asDouble),
    min: min === undefined ? undefined : double(min),
    max: max === undefined ? undefined : double(max),
  };
}

function fromProtobuf(body: Buffer): Omit<ReceivedExport, 'contentType' | 'path' | 'headers'> {
  let resource: Record<string, AttributeValue> = {};
  const scopes: Array<{ name: string; version: string }> = [];
  const metrics: ReceivedMetric[] = [];
  for (const rm of fields(body).filter((f) => f.field === 1)) {
    const rfs = fields(bytes(rm));
    const res = rfs.find((f) => f.field === 1);
    if (res !== undefined) resource = keyValues(fields(bytes(res)), 1);
    for (const sm of rfs.filter((f) => f.field === 2)) {
      const sfs = fields(bytes(sm));
      const scope = sfs.find((f) => f.field === 1);
      const scopeFields = scope === undefined ? [] : fields(bytes(scope));
      scopes.push({
        name: scopeFields.filter((f) => f.field === 1).map(text)[0] ?? '',
        version: scopeFields.filter((f) => f.field === 2).map(text)[0] ?? '',
      });
      for (const m of sfs.filter((f) => f.field === 2)) {
        const mfs = fields(bytes(m));
        const str = (n: number): string => mfs.filter((f) => f.field === n).map(text)[0] ?? '';
        const histogram = mfs.find((f) => f.field === 9);
        const hfs = histogram === undefined ? [] : fields(bytes(histogram));
        const temporality = hfs.find((f) => f.field === 2);
        metrics.push({
          name: str(1),
          description: str(2),
          unit: str(3),
          temporality: temporality === undefined ? undefined : Number(temporality.value as bigint),
          points: hfs.filter((f) => f.field === 1).map((p) => histogramPoint(bytes(p))),
        });
      }
    }
  }
  return { resource, scopes, metrics };
}
