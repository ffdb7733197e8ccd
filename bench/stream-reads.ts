// node bench/stream-reads.ts: the CPU of one upstream read of an event stream on infermeter's
// default path (a client without include_usage: usage injected, then stripped), without sockets:
// the usage strip's pass over the read and the response tap's reading of it (the event
// splitter, the skim, the timer), as the relay drives them. The shapes of read: one event a
// read (the latency scenario: a token every few milliseconds), eight events a read (the
// throughput scenario: tokens back to back), 100-byte reads (events split across reads), 4 KiB
// reads (many events, each read ending inside one, as a fast stream's socket reads do), and
// CRLF line ends (the SSE specification's other form); and a one-token stream whole in one read
// (the round trip's answer, where the usage chunk's reading weighs most).
// BENCH_COMPARE=<another checkout> runs that checkout's strip and tap too, interleaved round by
// round in this one process, and prints the ratio: only ratios side by side mean anything on a
// shared machine. Bounded: a fixed number of streams per round, a fixed number of rounds.
import type { IncomingMessage } from 'node:http';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

interface Build {
  readonly name: string;
  readonly createUsageStrip: (o: { maxEventBytes: number; stripped: (n: number) => void }) => {
    pass(c: Buffer): Buffer | undefined;
    end(): Buffer | undefined;
  };
  readonly tapResponse: (
    res: IncomingMessage,
    timer: unknown,
    o: { maxEventBytes: number; maxBodyBytes: number; problem: (kind: string) => void },
  ) => { chunk(c: Buffer): void; end(): void; close(): void };
  readonly createRequestTimer: (
    api: 'chat',
    clock: () => number,
    sink: object,
  ) => { identify(m: string, s: boolean): void; responseFinished(): void; close(ok: boolean): void };
}

async function load(dir: string, name: string): Promise<Build> {
  const url = (p: string) => pathToFileURL(join(dir, p)).href;
  const strip = (await import(url('src/stream-tap/usage-strip.ts'))) as Pick<Build, 'createUsageStrip'>;
  const tap = (await import(url('src/stream-tap/response-tap.ts'))) as Pick<Build, 'tapResponse'>;
  const timer = (await import(url('src/measure/request-timer.ts'))) as Pick<Build, 'createRequestTimer'>;
  return { name, ...strip, ...tap, ...timer };
}

// The bench upstream's chunks (bench/upstream.ts), its finish, the injected usage and [DONE].
const head = '{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1764500000,"model":"bench-model","choices":[{"index":0,"delta":{"content":"';
const tail = '"},"logprobs":null,"finish_reason":null}]}';
const TOKENS = 128;
const events = Array.from({ length: TOKENS }, (_, i) => `data: ${head}tok${i % 64}${tail}\n\n`);
const finish =
  'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1764500000,"model":"bench-model","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}\n\n';
const usageOf = (tokens: number) =>
  `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1764500000,"model":"bench-model","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":${tokens},"total_tokens":${12 + tokens}}}\n\n`;
const usage = usageOf(TOKENS);
const all = [...events, finish, usage, 'data: [DONE]\n\n'];
// A one-token stream whole in one read, as the round trip's answer comes: its usage chunk is a
// larger part of it than of a long stream's reads.
const oneToken = Buffer.from([events[0], finish, usageOf(1), 'data: [DONE]\n\n'].join(''));
const stream = Buffer.from(all.join(''));
const crlf = Buffer.from(all.join('').replaceAll('\n', '\r\n'));

/** The stream as reads: `perRead` events each, or pieces of `bytes` bytes; CRLF line ends if asked. */
function reads(shape: { perRead?: number; bytes?: number; crlf?: boolean; oneToken?: boolean }): Buffer[] {
  if (shape.oneToken === true) return [oneToken];
  if (shape.crlf === true) return all.map((e) => Buffer.from(e.replaceAll('\n', '\r\n')));
  if (shape.bytes !== undefined) {
    const out: Buffer[] = [];
    for (let i = 0; i < stream.length; i += shape.bytes) out.push(Buffer.from(stream.subarray(i, i + shape.bytes)));
    return out;
  }
  const out: Buffer[] = [];
  for (let i = 0; i < all.length; i += shape.perRead!) out.push(Buffer.from(all.slice(i, i + shape.perRead!).join('')));
  return out;
}

let lastTokens = -1;
const sink = { started() {}, firstOutput() {}, finished: (sample: { tokenEvents: number }) => (lastTokens = sample.tokenEvents) };
const options = {
  maxEventBytes: 1 << 20,
  maxBodyBytes: 1 << 20,
  problem: (kind: string) => {
    throw new Error(`tap problem: ${kind}`);
  },
};
let now = 0;
const clock = () => now;

/** One stream through the build's strip and tap, as the relay drives them; the bytes it wrote. */
function oneStream(build: Build, input: readonly Buffer[]): number {
  const timer = build.createRequestTimer('chat', clock, sink);
  timer.identify('bench-model', true);
  const res = { statusCode: 200, headers: { 'content-type': 'text/event-stream' }, complete: false } as unknown as IncomingMessage;
  const tap = build.tapResponse(res, timer, options);
  const strip = build.createUsageStrip({ maxEventBytes: 1 << 20, stripped() {} });
  let written = 0;
  for (const read of input) {
    now += 1;
    written += strip.pass(read)?.length ?? 0;
    tap.chunk(read);
    tap.close(); // the tick the tap reads in, run here: what is queued is read
  }
  written += strip.end()?.length ?? 0;
  tap.end();
  timer.responseFinished();
  timer.close(true);
  return written;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const builds = [await load(resolve(import.meta.dirname, '..'), 'this checkout')];
  const compare = process.env.BENCH_COMPARE;
  if (compare !== undefined && compare !== '') builds.push(await load(resolve(compare), compare));
  const rounds = Number(process.env.BENCH_ROUNDS ?? 15);
  const streams = Number(process.env.BENCH_STREAMS ?? 200);
  const shapes = [
    { name: 'one event a read (latency)', perRead: 1 },
    { name: 'eight events a read (throughput)', perRead: 8 },
    { name: '100-byte reads (events split)', bytes: 100 },
    // Tokens back to back as the socket reads them: many events a read, each read ending inside one.
    { name: '4 KiB reads (many events, the last one split)', bytes: 4096 },
    // Before the one splitter, the tap's general path (TextDecoder and eventsource-parser).
    { name: 'CRLF line ends, one event a read', crlf: true },
    { name: 'a one-token stream in one read (round trip)', oneToken: true },
  ];
  console.log(`| shape | ${builds.map((b) => `${b.name} µs per read`).join(' | ')}${builds.length > 1 ? ' | ratio' : ''} |`);
  console.log(`|---|${builds.map(() => '---|').join('')}${builds.length > 1 ? '---|' : ''}`);
  for (const shape of shapes) {
    const input = reads(shape);
    const expected =
      shape.oneToken === true
        ? oneToken.length - usageOf(1).length
        : shape.crlf === true
          ? crlf.length - usage.length - usage.split('\n').length + 1
          : stream.length - usage.length;
    const tokens = shape.oneToken === true ? 1 : TOKENS;
    for (const b of builds) {
      for (let i = 0; i < 50; i++) {
        if (oneStream(b, input) !== expected) throw new Error(`${b.name}: wrong bytes written`);
        if (lastTokens !== tokens) throw new Error(`${b.name}: ${lastTokens} token events read, not ${tokens}`);
      }
    }
    const perRead = builds.map(() => [] as number[]);
    for (let r = 0; r < rounds; r++) {
      // The order alternates every round, so that neither build always runs first.
      const order = r % 2 === 0 ? builds.map((_, i) => i) : builds.map((_, i) => builds.length - 1 - i);
      for (const i of order) {
        const t0 = process.cpuUsage();
        for (let s = 0; s < streams; s++) oneStream(builds[i]!, input);
        const t = process.cpuUsage(t0);
        perRead[i]!.push((t.user + t.system) / (streams * input.length));
      }
    }
    const m = perRead.map(median);
    const ratios = perRead.length > 1 ? median(perRead[0]!.map((x, r) => x / perRead[1]![r]!)) : undefined;
    console.log(`| ${shape.name} | ${m.map((x) => x.toFixed(3)).join(' | ')}${ratios === undefined ? '' : ` | ${ratios.toFixed(2)}x`} |`);
  }
}

await main();
