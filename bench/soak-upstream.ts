// The soak test's model server (npm run soak, bench/soak.ts): one port that answers each
// request the way its x-soak-kind header asks, so that one client can drive a mix of normal,
// aborted and faulty streams through infermeter. Normal answers come from the simulated model
// server (src/sim/model-server.ts); the faults are written here:
//   normal    a streamed completion from the simulator: small gaps, usage when asked, [DONE]
//   json      a non-streamed completion from the simulator, with usage
//   abort     a slow stream from the simulator (the client aborts it after the first bytes)
//   reset     SSE headers and two events, then the socket is destroyed mid-body
//   malformed SSE with non-JSON data lines, a line without a field, invalid UTF-8, then [DONE]
//   error     500 with an OpenAI-style JSON error body
// GET /v1/models lists only a few of the models the simulator accepts (so that infermeter's
// model label cap folds the others into "other"); GET /metrics is a simulator's vLLM-style
// exposition, which infermeter scrapes, for a model no client asks for ("soak-engine"): the
// engine's running and waiting figures replace infermeter's own for the models it reports, and
// the soak checks infermeter's own in-flight counts.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createSimHandler } from '../src/sim/model-server.ts';

export const SOAK_KINDS = ['normal', 'json', 'abort', 'reset', 'malformed', 'error'] as const;
export type SoakKind = (typeof SOAK_KINDS)[number];

/** What the upstream does for each kind, for the report. */
export const KIND_DESCRIPTIONS: Readonly<Record<SoakKind, string>> = {
  normal: 'SSE stream, 8-32 tokens, 5 ms to the first, 1-4 ms gaps, usage chunk when asked, [DONE]',
  json: 'non-streamed JSON completion with usage after 5-20 ms',
  abort: 'slow SSE stream (200 tokens, 20 ms gaps); the client aborts 0-100 ms after its first bytes',
  reset: 'SSE headers and 2 events, then the socket is destroyed mid-body',
  malformed: 'SSE: a good event, non-JSON data lines, a line without a field, invalid UTF-8 bytes, [DONE]',
  error: '500 with a JSON error body',
};

export interface SoakUpstreamOptions {
  /** Every model the simulator accepts. */
  readonly models: readonly string[];
  /** The models GET /v1/models lists (a subset). */
  readonly listed: readonly string[];
}

export interface SoakUpstream {
  readonly url: string;
  /** Requests answered per kind (GETs not included). */
  readonly served: Record<SoakKind, number>;
  close(): Promise<void>;
}

const event = (content: string) =>
  `data: {"id":"soak","object":"chat.completion.chunk","created":1764500000,"model":"soak","choices":[{"index":0,"delta":{"content":"${content}"},"logprobs":null,"finish_reason":null}]}\n\n`;

/** The exact bytes of the malformed stream; the client checks that it got them byte for byte. */
export const MALFORMED_BODY: Buffer = Buffer.concat([
  Buffer.from(event('a')),
  Buffer.from('data: this is not JSON at all\n\n'),
  Buffer.from('data: {"choices":[{"delta":{"content":\n\n'),
  Buffer.from('a line that is not an SSE field\n\n'),
  Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"'),
  Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xe2, 0x82]),
  Buffer.from('"}}]}\n\n'),
  Buffer.from(event('b')),
  Buffer.from('data: [DONE]\n\n'),
]);

const ERROR_BODY = JSON.stringify({ error: { message: 'the soak upstream failed on purpose', type: 'InternalServerError', param: null, code: 500 } });

const rand = (min: number, max: number) => min + Math.random() * (max - min);

export async function startSoakUpstream(options: SoakUpstreamOptions): Promise<SoakUpstream> {
  const fast = createSimHandler({ models: options.models, ttftMs: 5, interTokenMs: () => rand(1, 4), defaultTokens: 16 });
  const slow = createSimHandler({ models: options.models, ttftMs: () => rand(0, 30), interTokenMs: 20, defaultTokens: 200 });
  const engine = createSimHandler({ models: ['soak-engine'] });
  const served = Object.fromEntries(SOAK_KINDS.map((k) => [k, 0])) as Record<SoakKind, number>;
  const listed = JSON.stringify({ object: 'list', data: options.listed.map((id) => ({ id, object: 'model', owned_by: 'soak' })) });
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, f: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      f();
    }, ms);
    timers.add(t);
  };

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (req.method === 'GET' && path.endsWith('/v1/models')) {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(listed) });
      res.end(listed);
      return;
    }
    if (req.method === 'GET' && path === '/metrics') {
      engine(req, res);
      return;
    }
    const kind = req.headers['x-soak-kind'];
    if (req.method !== 'POST' || kind === 'normal' || kind === 'json' || kind === undefined) {
      if (req.method === 'POST' && (kind === 'normal' || kind === 'json')) served[kind]++;
      fast(req, res);
      return;
    }
    if (kind === 'abort') {
      served.abort++;
      slow(req, res);
      return;
    }
    // The faults: read the request, then misbehave.
    req.resume();
    req.on('end', () => {
      if (kind === 'reset') {
        served.reset++;
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.write(
          `data: {"id":"soak","object":"chat.completion.chunk","created":1764500000,"model":"soak","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n`,
        );
        later(rand(1, 5), () => {
          if (res.destroyed) return;
          res.write(event('x'));
          later(rand(1, 5), () => req.socket.destroy());
        });
      } else if (kind === 'malformed') {
        served.malformed++;
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        // In three writes with small gaps, so that the events arrive in separate chunks.
        const third = Math.floor(MALFORMED_BODY.length / 3);
        res.write(MALFORMED_BODY.subarray(0, third));
        later(2, () => {
          if (res.destroyed) return;
          res.write(MALFORMED_BODY.subarray(third, 2 * third));
          later(2, () => {
            if (!res.destroyed) res.end(MALFORMED_BODY.subarray(2 * third));
          });
        });
      } else if (kind === 'error') {
        served.error++;
        res.writeHead(500, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(ERROR_BODY) });
        res.end(ERROR_BODY);
      } else {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `unknown x-soak-kind ${String(kind)}`, type: 'BadRequestError', param: null, code: 400 } }));
      }
    });
  };

  const server = http.createServer({ noDelay: true, keepAliveTimeout: 60_000 }, handler);
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served,
    close: () =>
      new Promise((resolve) => {
        for (const t of timers) clearTimeout(t);
        timers.clear();
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
