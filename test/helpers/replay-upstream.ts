// A scripted upstream: each request is recorded (method, path, headers, exact body bytes) and
// answered from a script: status, headers, body pieces with delays before each, and how the
// response ends (cleanly, reset mid-body, or left hanging). Tests await its events, not timers.
import http, { type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { listen } from './listen.ts';

export interface Script {
  readonly status?: number;
  /** Written as given: names in their spelling, an array as repeated fields. */
  readonly headers?: Record<string, string | number | string[]>;
  readonly body?: ReadonlyArray<{ readonly afterMs?: number; readonly data: string | Buffer }>;
  /** 'reset' destroys the socket after the body pieces; 'hang' never ends the response. */
  readonly end?: 'end' | 'reset' | 'hang';
}

export interface RecordedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  /** As they came: name, value, name, value… in the sender's spelling and order. */
  readonly rawHeaders: readonly string[];
  readonly body: Buffer;
  /** The port the request came from: one per upstream connection the proxy opened. */
  readonly remotePort: number;
  /** Resolves true when the proxy closed the connection before the response ended. */
  readonly abandoned: Promise<boolean>;
}

export interface ReplayUpstream {
  readonly url: string;
  readonly requests: RecordedRequest[];
  /** Sets how requests are answered (default: 200 with an empty JSON object). */
  respond(script: (req: RecordedRequest) => Script): void;
  /** Resolves when `n` requests have been received in all. */
  received(n: number): Promise<void>;
  close(): Promise<void>;
}

export async function startReplayUpstream(): Promise<ReplayUpstream> {
  let script: (req: RecordedRequest) => Script = () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{}' }] });
  const requests: RecordedRequest[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];

  const server = http.createServer({ noDelay: true }, (req, res) => {
    const chunks: Buffer[] = [];
    let resolveAbandoned!: (value: boolean) => void;
    const abandoned = new Promise<boolean>((resolve) => (resolveAbandoned = resolve));
    res.on('close', () => resolveAbandoned(!res.writableFinished));
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const recorded: RecordedRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks),
        remotePort: req.socket.remotePort ?? 0,
        abandoned,
      };
      requests.push(recorded);
      for (const w of waiters.splice(0)) {
        if (requests.length >= w.n) w.resolve();
        else waiters.push(w);
      }
      void play(res, script(recorded));
    });
  });
  const { url, close } = await listen(undefined, server);

  return {
    url,
    requests,
    respond(fn) {
      script = fn;
    },
    received(n) {
      return requests.length >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }));
    },
    close,
  };
}

async function play(res: ServerResponse, script: Script): Promise<void> {
  res.writeHead(script.status ?? 200, script.headers ?? {});
  res.flushHeaders();
  for (const piece of script.body ?? []) {
    if (piece.afterMs !== undefined && piece.afterMs > 0) await new Promise((r) => setTimeout(r, piece.afterMs));
    if (res.destroyed) return;
    res.write(piece.data);
  }
  if (script.end === 'hang') return;
  if (script.end === 'reset') {
    // Let the written pieces reach the proxy first, then cut the connection mid-body.
    await new Promise((r) => setTimeout(r, 20));
    res.socket?.destroy();
    return;
  }
  res.end();
}

/** Turns SSE bytes into script pieces, one per event, with a delay before each. */
export function sseScript(bytes: Buffer, firstMs: number, gapMs: number): Script {
  const text = bytes.toString('utf8');
  const events = text.split(/(?<=\n\n)/).filter((e) => e !== '');
  return {
    status: 200,
    headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' },
    body: events.map((data, i) => ({ afterMs: i === 0 ? firstMs : gapMs, data })),
  };
}
