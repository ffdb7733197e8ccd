// The simulator's Anthropic Messages API (`POST /v1/messages`), as Anthropic's API answers it
// (and vLLM, SGLang and llama.cpp beside their OpenAI routes), so that the official
// @anthropic-ai/sdk works against it. Streamed: message_start (its id, model and first usage), a
// ping, one content block per kind (a thinking block when the request enables thinking, with its
// signature; then text), each content_block_start, content_block_delta... content_block_stop,
// message_delta (stop_reason and the final usage), message_stop. Not streamed: the same
// message as one JSON body. Usage as Anthropic reports it: input_tokens without the tokens read
// from its prompt cache, which a request that marks a block with `cache_control` reads for half
// its prompt (cache_read_input_tokens). Errors in Anthropic's shape.
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Plan } from './plan.ts';

const WORDS = [
  'Hello',
  '!',
  ' The',
  ' model',
  ' answers',
  ' in',
  ' the',
  ' shape',
  ' of',
  ' Anthropic',
  "'s",
  ' Messages',
  ' API',
  ',',
  ' token',
  ' by',
  ' token',
  '.',
];
const THOUGHTS = ['Let', ' me', ' think', ' this', ' through', '.'];

const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/** An id in Anthropic's form: a prefix, then 24 base-58 characters (`msg_01...`, `req_01...`). */
function anthropicId(prefix: string): string {
  let id = `${prefix}_01`;
  for (const byte of randomBytes(22)) id += ALPHABET[byte % ALPHABET.length];
  return id;
}

interface Usage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  output_tokens: number;
}

/** Answers one Messages API request; `engine.firstToken` marks it running in the engine's stats. */
export function serveMessages(res: ServerResponse, body: Record<string, unknown>, plan: Plan, engine: { firstToken: () => void }): void {
  const maxTokens = body.max_tokens;
  if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1) {
    messagesError(res, 400, 'invalid_request_error', 'max_tokens: Field required, an integer of at least 1');
    return;
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    messagesError(res, 400, 'invalid_request_error', 'messages: at least one message is required');
    return;
  }
  const thinking = body.thinking as { type?: unknown } | undefined;
  const thinkingTokens = thinking?.type === 'enabled' && plan.tokens > 1 ? Math.max(1, Math.floor(plan.tokens / 4)) : 0;
  // A prompt that marks a block for caching is read half from the cache, as a repeated prefix is.
  const cacheRead = JSON.stringify(body).includes('"cache_control"') ? Math.floor(plan.promptTokens / 2) : 0;
  const usage: Usage = { input_tokens: plan.promptTokens - cacheRead, cache_creation_input_tokens: 0, cache_read_input_tokens: cacheRead, output_tokens: 0 };
  const message = { id: anthropicId('msg'), model: plan.model, requestId: anthropicId('req'), usage, thinkingTokens };
  if (body.stream === true) void stream(res, plan, message, engine);
  else {
    setTimeout(engine.firstToken, plan.ttftMs).unref();
    setTimeout(() => answer(res, plan, message), plan.ttftMs + plan.gapMs() * (plan.tokens - 1)).unref();
  }
}

interface MessageState {
  readonly id: string;
  readonly model: string;
  readonly requestId: string;
  readonly usage: Usage;
  readonly thinkingTokens: number;
}

/** The text of output tokens [from, to): thinking first, then the answer. */
function piece(from: number, to: number, thinkingTokens: number): string {
  let text = '';
  for (let i = from; i < to; i++) text += i < thinkingTokens ? THOUGHTS[i % THOUGHTS.length] : WORDS[(i - thinkingTokens) % WORDS.length];
  return text;
}

/** A signature for a thinking block, as Anthropic sends one (opaque base64). */
const signature = (): string => randomBytes(48).toString('base64');

function answer(res: ServerResponse, plan: Plan, m: MessageState): void {
  const content: unknown[] = [];
  if (m.thinkingTokens > 0) content.push({ type: 'thinking', thinking: piece(0, m.thinkingTokens, m.thinkingTokens), signature: signature() });
  content.push({ type: 'text', text: piece(m.thinkingTokens, plan.tokens, m.thinkingTokens) });
  const usage = { ...m.usage, output_tokens: plan.tokens, service_tier: 'standard' };
  send(res, 200, m.requestId, { id: m.id, type: 'message', role: 'assistant', model: m.model, content, stop_reason: 'max_tokens', stop_sequence: null, usage });
}

async function stream(res: ServerResponse, plan: Plan, m: MessageState, engine: { firstToken: () => void }): Promise<void> {
  let closed = false;
  res.on('close', () => (closed = true));
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'request-id': m.requestId });
  const event = (data: { type: string } & Record<string, unknown>): void => {
    if (!closed) res.write(`event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  // Anthropic's first usage counts one output token already; vLLM's says 0.
  const message = {
    id: m.id,
    type: 'message',
    role: 'assistant',
    model: m.model,
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: { ...m.usage, output_tokens: 1, service_tier: 'standard' },
  };
  event({ type: 'message_start', message });
  event({ type: 'ping' });
  await sleep(plan.ttftMs);
  engine.firstToken();
  let sent = 0;
  let index = -1;
  let block: 'thinking' | 'text' | undefined;
  while (sent < plan.tokens && !closed) {
    if (sent > 0) await sleep(plan.gapMs() * plan.tokensPerEvent);
    const kind = sent < m.thinkingTokens ? 'thinking' : 'text';
    // A block ends where the next kind begins: the thinking block with its signature.
    const end = Math.min(sent + plan.tokensPerEvent, plan.tokens, kind === 'thinking' ? m.thinkingTokens : plan.tokens);
    if (block !== kind) {
      if (block === 'thinking') {
        event({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: signature() } });
        event({ type: 'content_block_stop', index });
      }
      block = kind;
      index++;
      event({
        type: 'content_block_start',
        index,
        content_block: kind === 'thinking' ? { type: 'thinking', thinking: '', signature: '' } : { type: 'text', text: '' },
      });
    }
    const text = piece(sent, end, m.thinkingTokens);
    event({ type: 'content_block_delta', index, delta: kind === 'thinking' ? { type: 'thinking_delta', thinking: text } : { type: 'text_delta', text } });
    sent = end;
  }
  if (closed) return;
  event({ type: 'content_block_stop', index });
  event({ type: 'message_delta', delta: { stop_reason: 'max_tokens', stop_sequence: null }, usage: { ...m.usage, output_tokens: sent } });
  event({ type: 'message_stop' });
  res.end();
}

/** An error in the Messages API's shape. */
function messagesError(res: ServerResponse, status: number, type: string, message: string): void {
  send(res, status, anthropicId('req'), { type: 'error', error: { type, message } });
}

function send(res: ServerResponse, status: number, requestId: string, body: unknown): void {
  if (res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'request-id': requestId });
  res.end(text);
}

function sleep(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}
