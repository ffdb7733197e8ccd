// The Responses API as OpenAI serves it, for the simulated server: the response object with
// the fields the SDKs read, and the streamed event sequence (response.created, .in_progress,
// .output_item.added, .content_part.added, output_text deltas, their .done events, then
// response.completed, or response.incomplete when max_output_tokens cut the answer), each
// with its sequence_number, item_id, output_index and content_index, shaped after the
// recording ../shared/fixtures/real-streams/otel-openai-responses-stream.sse.

export interface ResponseRequest {
  readonly id: string;
  readonly model: string;
  readonly promptTokens: number;
  /** The request's own fields echoed in the response object, as OpenAI does. */
  readonly body: Readonly<Record<string, unknown>>;
}

export interface ResponseUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

type Event = Record<string, unknown> & { readonly type: string };

/** Whether the answer stopped on the request's max_output_tokens (OpenAI's `incomplete`). */
function cutShort(request: ResponseRequest, outputTokens: number): boolean {
  const limit = request.body.max_output_tokens;
  return typeof limit === 'number' && outputTokens >= limit;
}

function outputText(text: string): Record<string, unknown> {
  return { type: 'output_text', annotations: [], logprobs: [], text };
}

function message(request: ResponseRequest, status: 'in_progress' | 'completed' | 'incomplete', text: string | undefined): Record<string, unknown> {
  return { id: `msg_${request.id}`, type: 'message', status, content: text === undefined ? [] : [outputText(text)], role: 'assistant' };
}

/** The response object: in progress (no output yet), or finished with its text and usage. */
export function responseObject(request: ResponseRequest, finished?: { readonly text: string; readonly usage: ResponseUsage }): Record<string, unknown> {
  const incomplete = finished !== undefined && cutShort(request, finished.usage.outputTokens);
  const status = finished === undefined ? 'in_progress' : incomplete ? 'incomplete' : 'completed';
  const b = request.body;
  return {
    id: `resp_${request.id}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status,
    background: false,
    completed_at: status === 'completed' ? Math.floor(Date.now() / 1000) : null,
    error: null,
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    instructions: typeof b.instructions === 'string' ? b.instructions : null,
    max_output_tokens: typeof b.max_output_tokens === 'number' ? b.max_output_tokens : null,
    max_tool_calls: null,
    model: request.model,
    output: finished === undefined ? [] : [message(request, incomplete ? 'incomplete' : 'completed', finished.text)],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    service_tier: 'default',
    store: false,
    temperature: typeof b.temperature === 'number' ? b.temperature : 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: typeof b.top_p === 'number' ? b.top_p : 1,
    truncation: 'disabled',
    usage:
      finished === undefined
        ? null
        : {
            input_tokens: finished.usage.inputTokens,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: finished.usage.outputTokens,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: finished.usage.inputTokens + finished.usage.outputTokens,
          },
    user: null,
    metadata: {},
  };
}

/** The events of one streamed response, numbered in order as they are made. */
export function createResponseEvents(request: ResponseRequest): {
  start(): Event[];
  delta(piece: string): Event;
  finish(text: string, usage: ResponseUsage): Event[];
} {
  let sequence = 0;
  const itemId = `msg_${request.id}`;
  const event = (type: string, fields: Record<string, unknown>): Event => ({ type, ...fields, sequence_number: sequence++ });
  const at = { item_id: itemId, output_index: 0, content_index: 0 };
  return {
    start: () => [
      event('response.created', { response: responseObject(request) }),
      event('response.in_progress', { response: responseObject(request) }),
      event('response.output_item.added', { item: message(request, 'in_progress', undefined), output_index: 0 }),
      event('response.content_part.added', { ...at, part: outputText('') }),
    ],
    delta: (piece) => event('response.output_text.delta', { ...at, delta: piece, logprobs: [] }),
    finish(text, usage) {
      const response = responseObject(request, { text, usage });
      const status = response.status === 'completed' ? 'completed' : 'incomplete';
      return [
        event('response.output_text.done', { ...at, text, logprobs: [] }),
        event('response.content_part.done', { ...at, part: outputText(text) }),
        event('response.output_item.done', { item: message(request, status, text), output_index: 0 }),
        event(`response.${status}`, { response }),
      ];
    },
  };
}
