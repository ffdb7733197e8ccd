// A simulated OpenAI-compatible model server for the demo, the benchmark and tests: chat
// completions, completions, the Responses API and embeddings, streamed or not, with a time to
// first token, gaps between tokens and usage as a vLLM-like server produces them (usage in a
// final chunk only when the request asks for it with stream_options.include_usage, and as the
// last member of every chunk too with continuous_usage_stats besides, as vLLM writes it), a
// vLLM-style /metrics reporting its own queues, a KV-cache usage that follows the load and the
// engine-only families of vLLM's newer dashboards (waiting by reason, tokens per engine step,
// prompt tokens by source), and a scripted failure: a request with `x-sim-status: 500` (any 4xx
// or 5xx) is answered that status with vLLM's error body. A request may script its own timing
// (`x-sim-ttft-ms`, `x-sim-gap-ms`: milliseconds) and a stream cut after some tokens
// (`x-sim-cut-after: 2`: the connection is destroyed after the second token) or held open
// (`x-sim-hold-after: 2`: nothing after the second token until the client leaves), so that a test
// knows each request's figures by construction.
// Each API answers in OpenAI's shapes (responses-api.ts, embeddings.ts), so that the official
// SDKs and the Vercel AI SDK accept what it sends.
// Over 300 lines: one simulated server, each API's answer streamed from the same request plan.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serveMessages } from './anthropic.ts';
import type { Plan } from './plan.ts';
import { engineMetrics, engineStats, track, type EngineStats } from './sim-engine.ts';
import { embeddingsResponse } from './embeddings.ts';
import { createResponseEvents, responseObject, type ResponseRequest } from './responses-api.ts';
import { fragments, streamToolCall, toolCallChoice, toolCallOf, type ToolCall } from './tool-call.ts';

export interface SimOptions {
  /** Models /v1/models lists; requests for other models get a 404 as vLLM answers. */
  readonly models?: readonly string[];
  /** Milliseconds before the first token; a function to vary it per request. */
  readonly ttftMs?: number | (() => number);
  /** Milliseconds between tokens. */
  readonly interTokenMs?: number | (() => number);
  /** Tokens generated when the request sets no max_tokens. */
  readonly defaultTokens?: number;
  /** Tokens per streamed event (1 = one token per chunk, as most engines stream). */
  readonly tokensPerEvent?: number;
}

export interface SimServer {
  readonly server: http.Server;
  readonly url: string;
  close(): Promise<void>;
}

/** The most tokens one simulated request generates. */
const MAX_SIM_TOKENS = 4096;

const WORDS = ['the', ' model', ' answers', ' with', ' tokens', ' that', ' arrive', ' one', ' by', ' one', ',', ' as', ' a', ' real', ' server', ' would', '.'];

const value = (v: number | (() => number) | undefined, fallback: number): number => Math.max(0, typeof v === 'function' ? v() : (v ?? fallback));

export function createSimHandler(options: SimOptions = {}): (req: IncomingMessage, res: ServerResponse) => void {
  const models = options.models ?? ['sim-llama-8b'];
  const tokensPerEvent = Math.max(1, options.tokensPerEvent ?? 1);
  let counter = 0;
  const stats = new Map<string, EngineStats>(models.map((m) => [m, engineStats()]));

  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (req.method === 'GET' && path === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      res.end(engineMetrics(stats));
      return;
    }
    if (req.method === 'GET' && path.endsWith('/v1/models')) {
      json(res, 200, { object: 'list', data: models.map((id) => ({ id, object: 'model', owned_by: 'infermeter-sim' })) });
      return;
    }
    if (req.method === 'GET' && (path === '/health' || path === '/')) {
      json(res, 200, { status: 'ok' });
      return;
    }
    if (req.method !== 'POST') {
      json(res, 404, { error: { message: `no route ${req.method} ${path}`, type: 'not_found', param: null, code: 404 } });
      return;
    }
    readJson(req).then(
      (body) => {
        if (body === undefined) {
          json(res, 400, { object: 'error', message: 'request body is not valid JSON', type: 'BadRequestError', param: null, code: 400 });
          return;
        }
        const model = typeof body.model === 'string' ? body.model : '';
        if (!models.includes(model)) {
          json(res, 404, { object: 'error', message: `The model \`${model}\` does not exist.`, type: 'NotFoundError', param: null, code: 404 });
          return;
        }
        // A scripted failure: `x-sim-status: 500` (any 4xx or 5xx) answers that status, as vLLM's error body.
        const failWith = Number(req.headers['x-sim-status']);
        if (failWith >= 400 && failWith <= 599) {
          json(res, failWith, {
            object: 'error',
            message: `scripted failure ${failWith}`,
            type: failWith >= 500 ? 'InternalServerError' : 'BadRequestError',
            param: null,
            code: failWith,
          });
          return;
        }
        const id = `sim-${++counter}`;
        const promptTokens = Math.max(1, Math.round(JSON.stringify(body.messages ?? body.prompt ?? body.input ?? '').length / 4));
        const maxTokens = numberOr(body.max_tokens ?? body.max_completion_tokens ?? body.max_output_tokens, options.defaultTokens ?? 64);
        // Bounded as an engine's context bounds it: a request for more is refused, as vLLM refuses it.
        if (maxTokens > MAX_SIM_TOKENS) {
          json(res, 400, {
            object: 'error',
            message: `This model's maximum context length is ${MAX_SIM_TOKENS} tokens. However, you requested ${maxTokens} output tokens.`,
            type: 'BadRequestError',
            param: null,
            code: 400,
          });
          return;
        }
        const scriptedTtft = scripted(req.headers['x-sim-ttft-ms']);
        const scriptedGap = scripted(req.headers['x-sim-gap-ms']);
        const cutAfter = scripted(req.headers['x-sim-cut-after']);
        const holdAfter = scripted(req.headers['x-sim-hold-after']);
        const plan: Plan = {
          id,
          model,
          promptTokens,
          tokens: Math.max(1, Math.floor(maxTokens)),
          ttftMs: scriptedTtft ?? value(options.ttftMs, 120),
          gapMs: scriptedGap === undefined ? () => value(options.interTokenMs, 25) : () => scriptedGap,
          tokensPerEvent,
          body,
          ...(cutAfter === undefined ? {} : { cutAfter }),
          ...(holdAfter === undefined ? {} : { holdAfter }),
        };
        if (path.endsWith('/v1/embeddings')) {
          json(res, 200, embeddingsResponse(body, model, promptTokens));
          return;
        }
        if (path.endsWith('/v1/messages')) {
          serveMessages(res, body, plan, track(stats.get(model)!, plan, res));
          return;
        }
        const api = path.endsWith('/v1/chat/completions')
          ? 'chat'
          : path.endsWith('/v1/completions')
            ? 'completions'
            : path.endsWith('/v1/responses')
              ? 'responses'
              : undefined;
        if (api === undefined) {
          json(res, 404, { error: { message: `no route POST ${path}`, type: 'not_found', param: null, code: 404 } });
          return;
        }
        const streamOptions = body.stream_options as { include_usage?: unknown; continuous_usage_stats?: unknown } | undefined;
        const includeUsage = streamOptions?.include_usage === true;
        // As vLLM: usage on every chunk only with include_usage too.
        const continuous = includeUsage && streamOptions?.continuous_usage_stats === true;
        const s = stats.get(model)!;
        s.prefixQueries += promptTokens;
        s.prefixHits += Math.floor(promptTokens / 2);
        const engine = track(s, plan, res);
        // Tools offered: a function call, as OpenAI answers it (tool-call.ts).
        const call = api === 'chat' ? toolCallOf(body, id) : undefined;
        if (call !== undefined) {
          if (body.stream === true) void streamToolCall(res, plan, call, includeUsage, engine);
          else {
            setTimeout(engine.firstToken, plan.ttftMs).unref();
            setTimeout(() => answerToolCall(res, plan, call), plan.ttftMs + plan.gapMs() * fragments(call, plan.tokens).pieces.length).unref();
          }
          return;
        }
        if (body.stream === true) void stream(res, api, plan, includeUsage, engine, continuous);
        else {
          setTimeout(engine.firstToken, plan.ttftMs).unref();
          setTimeout(() => answer(res, api, plan), plan.ttftMs + plan.gapMs() * (plan.tokens - 1)).unref();
        }
      },
      () => res.destroy(),
    );
  };
}

/** Starts the simulated server on host:port (port 0 picks a free one). */
export async function startSimServer(options: SimOptions = {}, host = '127.0.0.1', port = 0): Promise<SimServer> {
  const server = http.createServer({ noDelay: true, keepAliveTimeout: 60_000 }, createSimHandler(options));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    server,
    url: `http://${host}:${address.port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const responseRequest = (plan: Plan): ResponseRequest => ({ id: plan.id, model: plan.model, promptTokens: plan.promptTokens, body: plan.body });

type Api = 'chat' | 'completions' | 'responses';

async function stream(res: ServerResponse, api: Api, plan: Plan, includeUsage: boolean, engine: { firstToken: () => void }, continuous = false): Promise<void> {
  const created = Math.floor(Date.now() / 1000);
  let closed = false;
  res.on('close', () => (closed = true));
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const send = (data: unknown, event?: string): void => {
    if (!closed) res.write(`${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`);
  };
  let sent = 0;
  // vLLM's continuous usage stats: the counts so far as each chunk's last member.
  const chunk = (delta: Record<string, unknown>, finish: string | null = null): Record<string, unknown> =>
    continuous && events === undefined
      ? { ...plainChunk(delta, finish), usage: { prompt_tokens: plan.promptTokens, total_tokens: plan.promptTokens + sent, completion_tokens: sent } }
      : plainChunk(delta, finish);
  const plainChunk = (delta: Record<string, unknown>, finish: string | null): Record<string, unknown> =>
    api === 'chat'
      ? { id: plan.id, object: 'chat.completion.chunk', created, model: plan.model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] }
      : {
          id: plan.id,
          object: 'text_completion',
          created,
          model: plan.model,
          choices: [{ index: 0, text: delta.content ?? '', logprobs: null, finish_reason: finish }],
        };

  const events = api === 'responses' ? createResponseEvents(responseRequest(plan)) : undefined;
  if (api === 'chat') send(chunk({ role: 'assistant', content: '' }));
  for (const e of events?.start() ?? []) send(e, e.type);
  await sleep(plan.ttftMs);
  engine.firstToken();
  let text = '';
  while (sent < plan.tokens && !closed) {
    if (sent > 0) await sleep(plan.gapMs() * plan.tokensPerEvent);
    const n = Math.min(plan.tokensPerEvent, plan.tokens - sent);
    let piece = '';
    for (let i = 0; i < n; i++) piece += WORDS[(sent + i) % WORDS.length];
    sent += n;
    text += piece;
    if (events !== undefined) send(events.delta(piece), 'response.output_text.delta');
    else send(chunk({ content: piece }));
    // A scripted cut: the connection breaks off mid-stream, as an engine that crashed.
    if (plan.cutAfter !== undefined && sent >= plan.cutAfter) {
      res.socket?.destroy();
      return;
    }
    // A scripted hold: nothing more, the stream open, until the client leaves (a cancel after exactly these tokens).
    if (plan.holdAfter !== undefined && sent >= plan.holdAfter) return;
  }
  if (closed) return;
  const usage = { prompt_tokens: plan.promptTokens, completion_tokens: sent, total_tokens: plan.promptTokens + sent };
  if (events !== undefined) {
    for (const e of events.finish(text, { inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens })) send(e, e.type);
    res.end();
    return;
  }
  send(chunk({}, 'length'));
  if (includeUsage) send({ id: plan.id, object: api === 'chat' ? 'chat.completion.chunk' : 'text_completion', created, model: plan.model, choices: [], usage });
  res.end('data: [DONE]\n\n');
}

function answer(res: ServerResponse, api: Api, plan: Plan): void {
  let text = '';
  for (let i = 0; i < plan.tokens; i++) text += WORDS[i % WORDS.length];
  const usage = { prompt_tokens: plan.promptTokens, completion_tokens: plan.tokens, total_tokens: plan.promptTokens + plan.tokens };
  const created = Math.floor(Date.now() / 1000);
  if (api === 'chat') {
    json(res, 200, {
      id: plan.id,
      object: 'chat.completion',
      created,
      model: plan.model,
      choices: [{ index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: 'length' }],
      usage,
    });
  } else if (api === 'completions') {
    json(res, 200, {
      id: plan.id,
      object: 'text_completion',
      created,
      model: plan.model,
      choices: [{ index: 0, text, logprobs: null, finish_reason: 'length' }],
      usage,
    });
  } else {
    json(res, 200, responseObject(responseRequest(plan), { text, usage: { inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens } }));
  }
}

function answerToolCall(res: ServerResponse, plan: Plan, call: ToolCall): void {
  const tokens = fragments(call, plan.tokens).pieces.length + 1;
  const usage = { prompt_tokens: plan.promptTokens, completion_tokens: tokens, total_tokens: plan.promptTokens + tokens };
  json(res, 200, {
    id: plan.id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: plan.model,
    choices: [toolCallChoice(call, plan.tokens)],
    usage,
  });
}

function json(res: ServerResponse, status: number, body: unknown): void {
  if (res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readJson(req: IncomingMessage): Promise<Record<string, unknown> | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', reject);
    req.on('end', () => {
      try {
        const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        resolve(typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined);
      } catch {
        resolve(undefined);
      }
    });
  });
}

/** A scripted figure from a request header: a number >= 0, else undefined. */
function scripted(header: string | string[] | undefined): number | undefined {
  const n = typeof header === 'string' && header.trim() !== '' ? Number(header) : Number.NaN;
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

function numberOr(v: unknown, fallback: number): number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : fallback;
}

function sleep(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}
