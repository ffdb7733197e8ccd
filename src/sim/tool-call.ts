// The simulator's answer to a chat completion that offers `tools`: one call of a function, as
// OpenAI answers it, so that the tool-call path (a client's agent loop, infermeter's counting of
// tool-call deltas as output) can be tried without a model. Streamed, the call comes in
// fragments: a first delta with the call's id, type and name and empty arguments, then the
// arguments a few characters at a time (one token each), then finish_reason "tool_calls".
// `tool_choice: "none"` answers in text as without tools; `{"type":"function","function":{"name"}}`
// picks the function; otherwise the first.
import type { ServerResponse } from 'node:http';
import type { Plan } from './plan.ts';

export interface ToolCall {
  readonly id: string;
  readonly name: string;
  /** The arguments as a JSON text, as OpenAI sends them. */
  readonly arguments: string;
}

interface FunctionTool {
  readonly type: 'function';
  readonly function: { readonly name: string; readonly parameters?: Schema };
}
interface Schema {
  readonly type?: string | readonly string[];
  readonly properties?: Readonly<Record<string, Schema>>;
  readonly required?: readonly string[];
  readonly enum?: readonly unknown[];
  readonly items?: Schema;
}

/** Characters of the arguments per streamed fragment (about one token each). */
const FRAGMENT = 4;

const isFunctionTool = (t: unknown): t is FunctionTool =>
  typeof t === 'object' &&
  t !== null &&
  (t as { type?: unknown }).type === 'function' &&
  typeof (t as { function?: { name?: unknown } }).function?.name === 'string';

/** A value that fits a JSON schema, for the arguments: the enum's first, else one of its type. */
function sample(schema: Schema | undefined, depth = 0): unknown {
  if (schema?.enum !== undefined && schema.enum.length > 0) return schema.enum[0];
  const type = Array.isArray(schema?.type) ? schema.type[0] : schema?.type;
  switch (type) {
    case 'string':
      return 'sim';
    case 'integer':
    case 'number':
      return 1;
    case 'boolean':
      return true;
    case 'array':
      return depth < 4 ? [sample(schema?.items, depth + 1)] : [];
    case 'null':
      return null;
    default: {
      const out: Record<string, unknown> = {};
      if (depth < 4) for (const [name, prop] of Object.entries(schema?.properties ?? {})) out[name] = sample(prop, depth + 1);
      return out;
    }
  }
}

/** The call the simulator makes for this request body, or undefined (no tools, or tool_choice "none"). */
export function toolCallOf(body: Readonly<Record<string, unknown>>, id: string): ToolCall | undefined {
  const tools = Array.isArray(body.tools) ? body.tools.filter(isFunctionTool) : [];
  if (tools.length === 0 || body.tool_choice === 'none') return undefined;
  const choice = body.tool_choice as { type?: unknown; function?: { name?: unknown } } | undefined;
  const named =
    typeof choice === 'object' && choice !== null && choice.type === 'function' ? tools.find((t) => t.function.name === choice.function?.name) : undefined;
  const tool = named ?? tools[0]!;
  return {
    id: `call_${id.replace(/[^A-Za-z0-9]/g, '')}`,
    name: tool.function.name,
    arguments: JSON.stringify(sample(tool.function.parameters ?? { type: 'object' })),
  };
}

/**
 * The arguments in streamed fragments within `maxTokens` (the request's max_tokens; the delta
 * with the name is one token too): cut short, the finish is "length".
 */
export function fragments(call: ToolCall, maxTokens: number): { readonly pieces: string[]; readonly finish: 'tool_calls' | 'length' } {
  const max = Math.max(0, maxTokens - 1);
  const pieces: string[] = [];
  for (let i = 0; i < call.arguments.length; i += FRAGMENT) pieces.push(call.arguments.slice(i, i + FRAGMENT));
  return pieces.length <= max ? { pieces, finish: 'tool_calls' } : { pieces: pieces.slice(0, max), finish: 'length' };
}

/** The non-streamed answer's choice. */
export function toolCallChoice(call: ToolCall, max: number): Record<string, unknown> {
  const { pieces, finish } = fragments(call, max);
  return {
    index: 0,
    message: {
      role: 'assistant',
      content: null,
      refusal: null,
      tool_calls: [{ id: call.id, type: 'function', function: { name: call.name, arguments: pieces.join('') } }],
    },
    logprobs: null,
    finish_reason: finish,
  };
}

/** Streams the call as OpenAI does; resolves when the response ended (or the client left). */
export async function streamToolCall(
  res: ServerResponse,
  plan: Plan,
  call: ToolCall,
  includeUsage: boolean,
  engine: { firstToken: () => void },
): Promise<void> {
  const created = Math.floor(Date.now() / 1000);
  let closed = false;
  res.on('close', () => (closed = true));
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const send = (delta: Record<string, unknown>, finish: string | null = null): void => {
    if (!closed)
      res.write(
        `data: ${JSON.stringify({ id: plan.id, object: 'chat.completion.chunk', created, model: plan.model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`,
      );
  };
  const { pieces, finish } = fragments(call, plan.tokens);
  await sleep(plan.ttftMs);
  engine.firstToken();
  send({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] });
  for (const piece of pieces) {
    await sleep(plan.gapMs());
    if (closed) return;
    send({ tool_calls: [{ index: 0, function: { arguments: piece } }] });
  }
  if (closed) return;
  send({}, finish);
  const tokens = pieces.length + 1; // the name's delta and each fragment
  if (includeUsage) {
    const usage = { prompt_tokens: plan.promptTokens, completion_tokens: tokens, total_tokens: plan.promptTokens + tokens };
    res.write(`data: ${JSON.stringify({ id: plan.id, object: 'chat.completion.chunk', created, model: plan.model, choices: [], usage })}\n\n`);
  }
  res.end('data: [DONE]\n\n');
}

function sleep(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}
