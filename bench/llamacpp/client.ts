// One OpenAI-style request to llama.cpp's llama-server (directly or through infermeter), timed
// as the client sees it: TTFT at the first chunk that carries text, TPOT over the tokens after
// the first, e2e at the response's end; the answer's usage and llama.cpp's own `timings` read
// from the last chunk (or the body). By default no keep-alive: each request opens its own
// connection, as the client of the run did; the connections table passes a kept-alive
// agent too.
import http from 'node:http';
import { readEngineTimings, type EngineTimings } from '../../src/measure/engine-timings.ts';

export interface Ask {
  readonly api: 'chat' | 'completions';
  readonly stream: boolean;
  /** Sets stream_options.include_usage (llama.cpp b4747 sends usage either way). */
  readonly includeUsage: boolean;
  readonly prompt: string;
  readonly maxTokens: number;
  readonly model: string;
  /** Leave after this many token-carrying chunks (a client abort). */
  readonly abortAfter?: number | undefined;
  readonly requestId: string;
}

export interface Answer {
  readonly requestId: string;
  /** HTTP status; 0 when the connection failed before one came. */
  readonly status: number;
  /** The client left on purpose (abortAfter). */
  readonly aborted: boolean;
  /** A line whose SSE field is `error` (b4747), or a data event with an `error` object (the current master), came: llama.cpp's in-stream error. */
  readonly streamError: boolean;
  /** The response ended cleanly (not cut, not aborted). */
  readonly complete: boolean;
  readonly ttftMs: number | undefined;
  /** (last token - first token) / (completion tokens - 1). */
  readonly tpotMs: number | undefined;
  readonly e2eMs: number | undefined;
  readonly tokenChunks: number;
  readonly promptTokens: number | undefined;
  readonly completionTokens: number | undefined;
  readonly timings: EngineTimings | undefined;
  readonly body: string;
  /** The client's connection: its local port, whether it was reused, and for a new one the ms its connect took. */
  readonly connection: { port: number | undefined; reused: boolean; connectMs: number | undefined };
}

const agent = new http.Agent({ keepAlive: false });

function pathAndBody(ask: Ask): { path: string; body: string } {
  const common = {
    model: ask.model,
    max_tokens: ask.maxTokens,
    stream: ask.stream,
    ...(ask.stream && ask.includeUsage ? { stream_options: { include_usage: true } } : {}),
  };
  if (ask.api === 'chat') return { path: '/v1/chat/completions', body: JSON.stringify({ ...common, messages: [{ role: 'user', content: ask.prompt }] }) };
  return { path: '/v1/completions', body: JSON.stringify({ ...common, prompt: ask.prompt }) };
}

function hasText(payload: Record<string, unknown>): boolean {
  const choices = payload.choices;
  if (!Array.isArray(choices)) return false;
  return choices.some(
    (c: { text?: unknown; delta?: { content?: unknown } }) =>
      (typeof c.text === 'string' && c.text !== '') || (typeof c.delta?.content === 'string' && c.delta.content !== ''),
  );
}

/** Sends one request to `base` (http://host:port) and resolves with what the client saw; never rejects. */
export function ask(base: string, a: Ask, timeoutMs = 120_000, via: http.Agent = agent): Promise<Answer> {
  const { path, body } = pathAndBody(a);
  const url = new URL(path, base);
  return new Promise((resolve) => {
    const t0 = performance.now();
    let status = 0;
    let first: number | undefined;
    let last: number | undefined;
    let chunks = 0;
    let usage: { prompt_tokens?: number; completion_tokens?: number } | undefined;
    let timings: EngineTimings | undefined;
    let streamError = false;
    let aborted = false;
    let text = '';
    let pending = '';
    let settled = false;
    let connectMs: number | undefined;
    let port: number | undefined;
    const finish = (complete: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const end = performance.now();
      if (!a.stream && status === 200) {
        try {
          const p = JSON.parse(text) as Record<string, unknown>;
          usage = p.usage as typeof usage;
          timings = readEngineTimings(p.timings);
        } catch {
          // not JSON: figures stay unknown
        }
      }
      const n = usage?.completion_tokens ?? chunks;
      resolve({
        requestId: a.requestId,
        status,
        aborted,
        streamError,
        complete: complete && !aborted,
        ttftMs: first === undefined ? undefined : first - t0,
        tpotMs: first !== undefined && last !== undefined && n > 1 && chunks > 1 ? (last - first) / (n - 1) : undefined,
        e2eMs: complete && !aborted ? end - t0 : undefined,
        tokenChunks: chunks,
        promptTokens: usage?.prompt_tokens,
        completionTokens: usage?.completion_tokens,
        timings,
        body: text.length > 4096 ? text.slice(0, 4096) : text,
        connection: { port, reused: req.reusedSocket, connectMs },
      });
    };
    const req = http.request(
      url,
      { method: 'POST', agent: via, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-request-id': a.requestId } },
      (res) => {
        status = res.statusCode ?? 0;
        res.setEncoding('utf8');
        res.on('data', (piece: string) => {
          const at = performance.now();
          if (!a.stream || !(res.headers['content-type'] ?? '').includes('text/event-stream')) {
            text += piece;
            return;
          }
          text += piece;
          pending += piece;
          let cut: number;
          while ((cut = pending.indexOf('\n\n')) !== -1) {
            const event = pending.slice(0, cut);
            pending = pending.slice(cut + 2);
            for (const line of event.split('\n')) {
              if (line.startsWith('error:')) streamError = true;
              if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
              let payload: Record<string, unknown>;
              try {
                payload = JSON.parse(line.slice(6)) as Record<string, unknown>;
              } catch {
                continue;
              }
              // The current llama-server's in-stream error: a data event with an error object, no [DONE].
              if (typeof payload.error === 'object' && payload.error !== null) streamError = true;
              if (hasText(payload)) {
                chunks++;
                first ??= at;
                last = at;
              }
              if (typeof payload.usage === 'object' && payload.usage !== null) usage = payload.usage as typeof usage;
              timings = readEngineTimings(payload.timings) ?? timings;
            }
          }
          if (a.abortAfter !== undefined && chunks >= a.abortAfter && !aborted) {
            aborted = true;
            req.destroy();
            finish(false);
          }
        });
        res.on('end', () => finish(true));
        res.on('error', () => finish(false));
        res.on('close', () => finish(res.complete));
      },
    );
    req.once('socket', (socket) => {
      port = socket.localPort;
      if (!req.reusedSocket)
        socket.once('connect', () => {
          connectMs = performance.now() - t0;
          port = socket.localPort;
        });
    });
    const timer = setTimeout(() => req.destroy(new Error('timeout')), timeoutMs);
    req.on('error', () => finish(false));
    req.end(body);
  });
}
