// Fuzzing the wire on both sides of the proxy, for a bounded time: random malformed request
// lines, targets, header blocks and framings at the data port, and random malformed status
// lines and heads from the upstream. Whatever comes: the process survives (it serves a clean
// request afterwards, and every bystander stream completes), nothing hangs past the timeouts
// (every exchange ends), and no request reaches the upstream that the proxy did not read.
// `WIRE_FUZZ_MS` (default 4000) sets the time, `WIRE_FUZZ_SEED` the seed: `npm run fuzz:wire`
// runs it for minutes.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { rawExchange, startBystander, startRawUpstream } from '../helpers/raw-peers.ts';
import { scrape, startProxy } from '../helpers/proxy-harness.ts';
import { seededRandom } from '../helpers/random.ts';

const DURATION_MS = Number(process.env.WIRE_FUZZ_MS ?? 4000);
const SEED = Number(process.env.WIRE_FUZZ_SEED ?? 20261201);

type Random = () => number;
const pick = <T>(random: Random, xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
const junk = (random: Random, n: number): string => Array.from({ length: n }, () => String.fromCharCode(Math.floor(random() * 256))).join('');

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH', 'CONNECT', 'TRACE', 'P\x00ST', 'post', ''];
const TARGETS = [
  '/v1/chat/completions',
  '/v1/models',
  '/v1/embeddings',
  'http://[::1/v1/chat/completions',
  'http://x/v1/completions',
  '//x/v1/responses',
  '*',
  '',
  '/v1/chat/completions?x=%zz',
  `/${'a'.repeat(9000)}`,
  'http://a:99999/',
  '/\x7f',
  '/v1/../../etc',
  'https://[zz]/v1/responses',
];
const VERSIONS = ['HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/1.1x', 'HTTP/9', ''];
const HEADERS = [
  'Transfer-Encoding: chunked',
  'Transfer-Encoding: gzip',
  'Transfer-Encoding:\r\n chunked',
  'Content-Length: 5',
  'Content-Length: -1',
  'Content-Length: 5\r\nContent-Length: 6',
  'Connection: content-length, upgrade',
  'Connection: Upgrade\r\nUpgrade: websocket',
  'Expect: 100-continue',
  'Content-Encoding: gzip',
  'X-Bad\x01: v',
  'X-Ok: v\x00x',
  ': empty',
  'Host: ',
  `X-Long: ${'b'.repeat(20_000)}`,
  'X-Request-Id: \x7f',
];
const BODIES = [
  '',
  '{"model":"m","stream":true}',
  '{"model":',
  '0\r\n\r\n',
  '5\r\nhello\r\n0\r\n\r\n',
  'zz\r\nhello\r\n',
  'GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n',
];

function fuzzRequest(random: Random): string {
  const line = random() < 0.1 ? junk(random, 30) : `${pick(random, METHODS)} ${pick(random, TARGETS)} ${pick(random, VERSIONS)}`;
  const headers = Array.from({ length: Math.floor(random() * 4) }, () => pick(random, HEADERS));
  const lineEnd = random() < 0.1 ? '\n' : '\r\n';
  const head = [line, 'Host: x', ...headers].join(lineEnd) + lineEnd + (random() < 0.05 ? '' : lineEnd);
  return head + pick(random, BODIES) + (random() < 0.1 ? junk(random, 20) : '');
}

const STATUS_LINES = [
  'HTTP/1.1 200 OK',
  'HTTP/1.1 200 O\x01K',
  'HTTP/1.1 099 X',
  'HTTP/1.1 000 Z',
  'HTTP/1.1 101 Switching',
  'HTTP/1.1 999 Max',
  'HTTP/1.1 2000 Big',
  'HTTP/1.0 404',
  'HTTP/1.1 500',
  'HTTP/2 200',
  'ICY 200 OK',
  'HTTP/1.1 20 short',
];
const RESPONSE_HEADERS = [
  'Content-Type: text/event-stream',
  'Content-Type: application/json',
  'Content-Length: 2',
  'Content-Length: 100000',
  'Transfer-Encoding: chunked',
  'Transfer-Encoding: bogus',
  'Content-Encoding: gzip',
  'Connection: keep-alive',
  'X-Bad: \x01',
  'Set-Cookie: a=b',
  'Upgrade: h2c',
];
const RESPONSE_BODIES = ['{}', 'data: {"choices":[{"delta":{"content":"a"}}]}\n\n', '5\r\nhello\r\n0\r\n\r\n', 'zz\r\n', '', 'data: [DONE]\n\n'];

function fuzzResponse(random: Random): { bytes: string; end: boolean } {
  const headers = Array.from({ length: Math.floor(random() * 4) }, () => pick(random, RESPONSE_HEADERS));
  const head = random() < 0.1 ? junk(random, 40) : [pick(random, STATUS_LINES), ...headers].join('\r\n') + '\r\n\r\n';
  return { bytes: head + pick(random, RESPONSE_BODIES), end: random() < 0.8 };
}

describe('wire fuzz', () => {
  it(`survives random malformed requests and upstream answers for ${DURATION_MS} ms (seed ${SEED})`, async (t) => {
    const random = seededRandom(SEED);
    const upstream = await startRawUpstream(t, ({ socket }) => {
      const answer = fuzzResponse(random);
      if (answer.end) socket.end(answer.bytes);
      else socket.write(answer.bytes); // left open: the proxy's idle timeout must end it
    });
    const app = await startProxy(t, upstream.url, {
      INFERMETER_HEADERS_TIMEOUT_MS: '500',
      INFERMETER_REQUEST_TIMEOUT_MS: '1000',
      INFERMETER_UPSTREAM_IDLE_TIMEOUT_MS: '500',
      INFERMETER_UPSTREAM_CONNECT_TIMEOUT_MS: '500',
      // The bystander lives through the whole run: no total timeout; the idle one ends what stalls.
      INFERMETER_TOTAL_TIMEOUT_MS: '0',
      // A case answered cleanly on a kept-alive connection ends when that connection idles out.
      INFERMETER_KEEP_ALIVE_TIMEOUT_MS: '1000',
    });
    // Every request the proxy read (a pipelined one included), by request line as forwarded.
    const read = new Map<string, number>();
    // http-proxy-3 resolves `..` on its route (the lean inference path does not): compared resolved.
    const resolved = (method: string, path: string): string => {
      const url = new URL(`http://base.invalid${path.startsWith('/') ? '' : '/'}${path}`);
      return `${method} ${url.pathname}${url.search}`;
    };
    const saw = (req: IncomingMessage): void => {
      const line = resolved(req.method ?? '', req.url ?? '');
      if (!line.includes('/bystander')) read.set(line, (read.get(line) ?? 0) + 1);
    };
    app.dataServer!.on('request', saw);
    app.dataServer!.on('upgrade', saw);
    const bystander = await startBystander(app.dataUrl);
    const started = performance.now();
    let cases = 0;
    // Each case ends within the longest timeout (the request's: 1 s) plus the sweep's period.
    const ends: Array<Promise<void>> = [];
    while (performance.now() - started < DURATION_MS) {
      // A few at once: the faults meet in the same turns of the event loop.
      const batch = Array.from({ length: 4 }, () => fuzzRequest(random));
      ends.push(
        ...batch.map(async (request) => {
          const { closed } = await rawExchange(app.dataUrl, request, 8000);
          if (!closed) throw new Error(`no end within 8 s for ${JSON.stringify(request.slice(0, 120))}`);
        }),
      );
      cases += batch.length;
      await Promise.all(ends.splice(0));
    }
    assert.ok(cases >= 20, `${cases} cases ran`);
    upstream.release();
    assert.match(await bystander.done, /data: \[DONE\]\n\n$/, 'the bystander stream completed through it all');
    // What the upstream parsed, request line by request line, the proxy had read as a request.
    for (const head of upstream.heads) {
      const requestLine = head.slice(0, head.indexOf(' HTTP/'));
      if (requestLine.includes('/bystander')) continue;
      const space = requestLine.indexOf(' ');
      const line = resolved(requestLine.slice(0, space), requestLine.slice(space + 1));
      const left = read.get(line) ?? 0;
      assert.ok(left > 0, `the upstream parsed ${JSON.stringify(line.slice(0, 80))}, which the proxy never read as a request`);
      read.set(line, left - 1);
    }
    const res = await fetch(`${app.metricsUrl}`);
    assert.equal(res.status, 200, 'still serving');
    const m = await scrape(app);
    for (const { labels } of m.series('request_received_total')) {
      assert.equal(m.value('num_requests_waiting', labels), 0, `waiting for ${labels.model_name}`);
      assert.equal(m.value('num_requests_running', labels), 0, `running for ${labels.model_name}`);
    }
  });
});
