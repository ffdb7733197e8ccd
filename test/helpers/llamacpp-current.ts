// A streamed chat answer in the shape of the current llama-server (master 0253fb21f,
// tools/server/server-task.cpp, to_json_oaicompat_chat_stream): the usage-only chunk only when
// the request asks for it (stream_options.include_usage), and the `timings` object on the last
// chunk sent, which is that usage-only chunk when asked, else the finish_reason chunk. Members
// in the server's order (ordered_json). Its id and created are fixed: the same request gets
// the same bytes, directly or through infermeter.
import type { Script } from './replay-upstream.ts';

export interface LlamaCounts {
  /** `prompt_n`: prompt tokens evaluated (cached ones excluded). */
  readonly promptN: number;
  /** `cache_n`: prompt tokens served from the slot's cache. */
  readonly cacheN: number;
  /** `predicted_n`: tokens generated, one per content chunk here. */
  readonly predictedN: number;
}

const HEAD =
  '"created":1780000000,"id":"chatcmpl-l1aMaCurrentMaster0253fb2","model":"tiny.gguf","system_fingerprint":"b9187-0253fb21f","object":"chat.completion.chunk"';

function chunk(choices: string, tail = ''): string {
  return `data: {"choices":${choices},${HEAD}${tail}}\n\n`;
}

function timings(c: LlamaCounts): string {
  return (
    `"timings":{"cache_n":${c.cacheN},"prompt_n":${c.promptN},"prompt_ms":12.345,"prompt_per_token_ms":1.3716666666666666,` +
    `"prompt_per_second":729.0400972,"predicted_n":${c.predictedN},"predicted_ms":40.5,"predicted_per_token_ms":13.5,"predicted_per_second":74.07407407407408}`
  );
}

/** The SSE bytes the current llama-server sends for a streamed chat, with usage asked for or not. */
export function currentLlamaStream(c: LlamaCounts, includeUsage: boolean): string {
  let out = chunk('[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}]');
  for (let i = 0; i < c.predictedN; i++) out += chunk(`[{"finish_reason":null,"index":0,"delta":{"content":"t${i}"}}]`);
  const finish = '[{"finish_reason":"length","index":0,"delta":{}}]';
  if (includeUsage) {
    const prompt = c.promptN + c.cacheN;
    out += chunk(finish);
    out += chunk(
      '[]',
      `,"usage":{"completion_tokens":${c.predictedN},"prompt_tokens":${prompt},"total_tokens":${prompt + c.predictedN},"prompt_tokens_details":{"cached_tokens":${c.cacheN}}},${timings(c)}`,
    );
  } else out += chunk(finish, `,${timings(c)}`);
  return `${out}data: [DONE]\n\n`;
}

/** Whether a request body asks for stream usage, as llama-server reads it. */
function asksUsage(body: Buffer): boolean {
  const parsed = JSON.parse(body.toString()) as { stream_options?: { include_usage?: unknown } };
  return parsed.stream_options?.include_usage === true;
}

/** An upstream script answering as the current llama-server does. */
export function currentLlama(c: LlamaCounts): (body: Buffer) => Script {
  return (body) => ({
    status: 200,
    headers: { 'content-type': 'text/event-stream' },
    body: [{ data: currentLlamaStream(c, asksUsage(body)) }],
  });
}
