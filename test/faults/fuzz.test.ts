// Fuzzing the stream tap: recorded streams, mutated at random (bytes flipped, inserted, cut,
// repeated; invalid UTF-8; stray CR/LF; huge lines; two streams spliced) and cut at random chunk
// boundaries. Whatever comes, no exception escapes the tap, the request is measured to an
// outcome, and the bytes the client gets are exactly the input: in process (piped as the proxy
// pipes, thousands of cases) and through the real proxy on sockets (fewer, slower cases).
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { PassThrough, Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { createRequestTimer } from '../../src/measure/request-timer.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { tapResponse } from '../../src/stream-tap/response-tap.ts';
import { listenTap } from '../helpers/tap-harness.ts';
import { createUsageStrip } from '../../src/stream-tap/usage-strip.ts';
import { assertRealStreamsIn, ownStreams, realStreamCorpus, realStreamsSkip } from '../helpers/fixtures.ts';
import { nextFinished, startProxy } from '../helpers/proxy-harness.ts';
import { rechunk, seededRandom } from '../helpers/random.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 20261129);
const CASES = Number(process.env.FUZZ_CASES ?? 3000);

// The real recordings join the corpus where they exist; where they do not, the test below says
// so by a skip (a failure under CI).
const corpus: Buffer[] = [...ownStreams().map((f) => f.bytes), ...realStreamCorpus()];

const PIECES = [
  '\n',
  '\r',
  '\r\n',
  '\n\n',
  'data: ',
  'data:',
  'data: [DONE]\n\n',
  '{',
  '}',
  '"',
  '\\',
  ':',
  'event: error\n',
  'id: 1\n',
  '\u00e9',
  '\u{1F680}',
  '{"usage":{"prompt_tokens":1e309,"completion_tokens":-1}}',
  '{"choices":[],"usage":null}',
];

/** One random change to `bytes`. */
function mutate(bytes: Buffer, random: () => number): Buffer {
  const at = Math.floor(random() * (bytes.length + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  switch (Math.floor(random() * 9)) {
    case 0: {
      // Flip a byte to any value (invalid UTF-8 included).
      const out = Buffer.from(bytes);
      if (out.length > 0) out[Math.min(at, out.length - 1)] = Math.floor(random() * 256);
      return out;
    }
    case 1:
      return Buffer.concat([bytes.subarray(0, at), Buffer.from(pick(PIECES)), bytes.subarray(at)]);
    case 2: // Cut a range out.
      return Buffer.concat([bytes.subarray(0, at), bytes.subarray(Math.min(bytes.length, at + Math.floor(random() * 200)))]);
    case 3: // Truncate.
      return bytes.subarray(0, at);
    case 4: {
      // Repeat a range.
      const end = Math.min(bytes.length, at + Math.floor(random() * 300));
      return Buffer.concat([bytes.subarray(0, end), bytes.subarray(at, end), bytes.subarray(end)]);
    }
    case 5: // Invalid UTF-8 sequences.
      return Buffer.concat([bytes.subarray(0, at), Buffer.from([0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0xf0, 0x90, 0x28, 0xbc, 0xff]), bytes.subarray(at)]);
    case 6: // A very long line, with or without its end.
      return Buffer.concat([
        bytes.subarray(0, at),
        Buffer.from(`data: ${'x'.repeat(Math.floor(random() * 5000))}${random() < 0.5 ? '\n\n' : ''}`),
        bytes.subarray(at),
      ]);
    case 7: // Splice in part of another recording.
      return Buffer.concat([bytes.subarray(0, at), pick(corpus).subarray(Math.floor(random() * 500))]);
    default: // Random bytes.
      return Buffer.concat([
        bytes.subarray(0, at),
        Buffer.from(Array.from({ length: Math.floor(random() * 64) }, () => Math.floor(random() * 256))),
        bytes.subarray(at),
      ]);
  }
}

function fuzzedStream(random: () => number): Buffer {
  let bytes = corpus[Math.floor(random() * corpus.length)]!;
  const changes = Math.floor(random() * 6);
  for (let i = 0; i < changes; i++) bytes = mutate(bytes, random);
  return bytes;
}

const HEADERS: ReadonlyArray<Record<string, string>> = [
  { 'content-type': 'text/event-stream; charset=utf-8' },
  { 'content-type': 'text/event-stream' },
  { 'content-type': 'application/json' },
  { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' }, // not really gzip
  { 'content-type': 'application/json', 'content-encoding': 'gzip' },
  { 'content-type': 'application/json', 'content-encoding': 'br' },
];

/** Pipes `chunks` to a collecting client exactly as the proxy does (pipe first, tap after). */
async function throughTap(
  chunks: readonly Buffer[],
  headers: Record<string, string>,
  status: number,
  maxEventBytes: number,
): Promise<{ forwarded: Buffer; sample: RequestSample | undefined }> {
  let sample: RequestSample | undefined;
  let now = 0;
  const timer = createRequestTimer('chat', () => now, { started() {}, firstOutput() {}, finished: (s) => (sample = s) });
  timer.identify('m', true);
  const upstream = new PassThrough() as unknown as IncomingMessage & PassThrough;
  upstream.statusCode = status;
  upstream.headers = headers;
  const got: Buffer[] = [];
  const client = new Writable({
    write(chunk: Buffer, _enc, done) {
      got.push(chunk);
      done();
    },
  });
  upstream.pipe(client);
  listenTap(upstream, tapResponse(upstream, timer, { maxEventBytes, maxBodyBytes: 4096, problem() {} }));
  const finished = new Promise<void>((resolve, reject) => {
    client.on('finish', resolve);
    client.on('error', reject);
  });
  for (const c of chunks) {
    now += 0.001;
    upstream.write(c);
  }
  upstream.end();
  await finished;
  timer.responseFinished();
  timer.close(true);
  return { forwarded: Buffer.concat(got), sample };
}

describe('fuzzing the stream tap', () => {
  it('mutates the real recordings too', { skip: realStreamsSkip }, () => assertRealStreamsIn(corpus));

  it(`${CASES} mutated streams at random chunk boundaries: no exception, bytes forwarded unchanged, an outcome for each`, async () => {
    const random = seededRandom(SEED);
    for (let i = 0; i < CASES; i++) {
      const input = fuzzedStream(random);
      const chunks = rechunk(input, random, random() < 0.3 ? 3 : 200);
      const headers = HEADERS[Math.floor(random() * HEADERS.length)]!;
      const status = random() < 0.9 ? 200 : 500;
      const maxEventBytes = random() < 0.5 ? 256 : 1024 * 1024;
      const { forwarded, sample } = await throughTap(chunks, headers, status, maxEventBytes);
      const where = `seed ${SEED}, case ${i}`;
      assert.ok(forwarded.equals(input), `forwarded bytes differ (${where})`);
      assert.ok(sample !== undefined, `no sample (${where})`);
      assert.ok(['success', 'failed'].includes(sample.outcome), `outcome ${sample.outcome} (${where})`);
      for (const n of [sample.promptTokens, sample.completionTokens])
        assert.ok(n === undefined || (Number.isSafeInteger(n) && n >= 0), `token count ${n} (${where})`);
    }
  });

  it('the usage strip never throws, removes only what it reports, and passes everything else unchanged', async () => {
    const random = seededRandom(SEED + 1);
    for (let i = 0; i < CASES / 3; i++) {
      const input = fuzzedStream(random);
      let strippedBytes = 0;
      const strip = createUsageStrip({ maxEventBytes: random() < 0.5 ? 256 : 1024 * 1024, stripped: (n) => (strippedBytes += n) });
      const out: Buffer[] = [];
      for (const c of rechunk(input, random, 100)) {
        const passed = strip.pass(c);
        if (passed !== undefined) out.push(passed);
      }
      const rest = strip.end();
      if (rest !== undefined) out.push(rest);
      const output = Buffer.concat(out);
      const where = `seed ${SEED + 1}, case ${i}`;
      assert.equal(output.length + strippedBytes, input.length, where);
      if (strippedBytes === 0) assert.ok(output.equals(input), where);
    }
  });

  it('through the real proxy on sockets: the client gets the upstream bytes exactly, the proxy keeps serving', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    // The client asks for usage itself: infermeter neither injects nor strips, so bytes are untouched.
    const app = await startProxy(t, upstream.url, { INFERMETER_MAX_EVENT_BYTES: '1024' });
    const random = seededRandom(SEED + 2);
    const runs = 40;
    const finished = nextFinished(app, runs);
    for (let i = 0; i < runs; i++) {
      const input = fuzzedStream(random);
      const pieces = rechunk(input, random, 400).map((data) => ({ data }));
      upstream.respond(() => ({ status: 200, headers: { 'content-type': 'text/event-stream' }, body: pieces }));
      const res = await fetch(`${app.dataUrl}/v1/chat/completions`, {
        method: 'POST',
        body: '{"model":"m","stream":true,"stream_options":{"include_usage":true}}',
      });
      const got = Buffer.from(await res.arrayBuffer());
      assert.ok(got.equals(input), `seed ${SEED + 2}, run ${i}: ${got.length} bytes for ${input.length}`);
    }
    const samples = await finished;
    assert.equal(samples.length, runs);
    // A mutation can put an error event in a stream: that is the one way such a request fails.
    for (const s of samples) assert.ok(s.outcome === 'success' || s.failure === 'stream_error', `${s.outcome} ${s.failure}`);
  });
});
