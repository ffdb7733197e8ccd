// The scenarios of the real-engine run (bench/llamacpp.ts): each sent to llama-server directly
// and through infermeter, and the three views of every request put side by side: the client's,
// llama.cpp's own `timings`, infermeter's (its access log and /metrics).
import { readFileSync } from 'node:fs';
import { ask, type Answer, type Ask } from './client.ts';

export interface Scenario {
  readonly name: string;
  readonly api: 'chat' | 'completions';
  readonly stream: boolean;
  readonly includeUsage: boolean;
  readonly concurrency: number;
  readonly requests: number;
  readonly maxTokens: number;
  /** The client leaves after this many token-carrying chunks. */
  readonly abortAfter?: number;
  /** Prompt length in characters (longer than a slot's context: llama.cpp's in-stream error). */
  readonly promptChars?: number;
}

export const SCENARIOS: readonly Scenario[] = [
  { name: 'chat, streamed, include_usage, c1', api: 'chat', stream: true, includeUsage: true, concurrency: 1, requests: 12, maxTokens: 32 },
  { name: 'chat, streamed, no include_usage, c1', api: 'chat', stream: true, includeUsage: false, concurrency: 1, requests: 12, maxTokens: 32 },
  { name: 'chat, not streamed, c1', api: 'chat', stream: false, includeUsage: false, concurrency: 1, requests: 12, maxTokens: 32 },
  { name: 'completions, streamed, c1', api: 'completions', stream: true, includeUsage: false, concurrency: 1, requests: 12, maxTokens: 32 },
  { name: 'completions, not streamed, c1', api: 'completions', stream: false, includeUsage: false, concurrency: 1, requests: 12, maxTokens: 32 },
  { name: 'chat, streamed, include_usage, c4', api: 'chat', stream: true, includeUsage: true, concurrency: 4, requests: 24, maxTokens: 32 },
  { name: 'chat, streamed, c8 (4 slots)', api: 'chat', stream: true, includeUsage: false, concurrency: 8, requests: 24, maxTokens: 32 },
  { name: 'chat, not streamed, c8 (4 slots)', api: 'chat', stream: false, includeUsage: false, concurrency: 8, requests: 24, maxTokens: 32 },
  {
    name: 'chat, streamed, client aborts after 4 tokens, c4',
    api: 'chat',
    stream: true,
    includeUsage: false,
    concurrency: 4,
    requests: 12,
    maxTokens: 64,
    abortAfter: 4,
  },
  {
    name: 'chat, streamed, prompt over the context (in-stream error), c1',
    api: 'chat',
    stream: true,
    includeUsage: false,
    concurrency: 1,
    requests: 4,
    maxTokens: 32,
    promptChars: 3000,
  },
];

const WORDS = ['the', 'model', 'server', 'answers', 'every', 'request', 'with', 'tokens', 'measured', 'once', 'by', 'a', 'proxy', 'in', 'front'];

/** A prompt of about `chars` characters, different per request (`key`) so that llama.cpp's prompt cache misses. */
export function prompt(key: string, i: number, chars = 80): string {
  let text = `Request ${key}:`;
  for (let w = i; text.length < chars; w += 7) text += ` ${WORDS[w % WORDS.length]}`;
  return text;
}

/** Sends a scenario's requests, `concurrency` at a time; `onInFlight` hears the count as it changes. */
export async function runScenario(base: string, s: Scenario, idPrefix: string, model: string, onInFlight?: (n: number) => void): Promise<Answer[]> {
  const answers: Answer[] = [];
  let next = 0;
  let inFlight = 0;
  const worker = async (): Promise<void> => {
    while (next < s.requests) {
      const i = next++;
      const a: Ask = {
        api: s.api,
        stream: s.stream,
        includeUsage: s.includeUsage,
        prompt: prompt(`${idPrefix}-${i}`, i, s.promptChars),
        maxTokens: s.maxTokens,
        model,
        abortAfter: s.abortAfter,
        requestId: `${idPrefix}-${i}`,
      };
      onInFlight?.(++inFlight);
      answers[i] = await ask(base, a);
      onInFlight?.(--inFlight);
    }
  };
  await Promise.all(Array.from({ length: s.concurrency }, worker));
  return answers;
}

/** infermeter's access-log lines, by request id. */
export interface AccessLine {
  readonly request_id: string;
  readonly status: number;
  readonly outcome: string;
  readonly failure?: string;
  readonly ttft_ms?: number;
  readonly tpot_ms?: number;
  readonly e2e_ms?: number;
  readonly prompt_tokens?: number;
  readonly completion_tokens?: number;
}

function readAccessLog(path: string): Map<string, AccessLine> {
  const lines = new Map<string, AccessLine>();
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return lines;
  }
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const entry = JSON.parse(line) as AccessLine;
    lines.set(entry.request_id, entry);
  }
  return lines;
}

/** Waits (bounded: 100 tries, 50 ms apart) until the access log holds every id. */
export async function accessLines(path: string, ids: readonly string[]): Promise<Map<string, AccessLine>> {
  let lines = readAccessLog(path);
  for (let i = 0; i < 100 && ids.some((id) => !lines.has(id)); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    lines = readAccessLog(path);
  }
  return lines;
}

/** Sums of every series of each name in a Prometheus exposition (labels ignored). */
export function seriesSums(text: string): Map<string, number> {
  const sums = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{.*\})? (\S+)$/.exec(line);
    if (m === null) continue;
    sums.set(m[1]!, (sums.get(m[1]!) ?? 0) + Number(m[2]));
  }
  return sums;
}

const mean = (values: ReadonlyArray<number | undefined>): number | undefined => {
  const v = values.filter((x): x is number => x !== undefined && Number.isFinite(x));
  return v.length === 0 ? undefined : v.reduce((a, b) => a + b, 0) / v.length;
};
const sum = (values: ReadonlyArray<number | undefined>): number => values.reduce<number>((a, b) => a + (b ?? 0), 0);

export interface Row {
  readonly scenario: Scenario;
  readonly direct: readonly Answer[];
  readonly proxied: readonly Answer[];
  readonly log: ReadonlyMap<string, AccessLine>;
  /** Growth of infermeter's /metrics sums over the scenario. */
  readonly metrics: ReadonlyMap<string, number>;
  /** The largest sum over model_name of num_requests_running + num_requests_waiting seen during the run, and the client's in-flight count then. */
  readonly inFlightSeen: { readonly max: number; readonly excess: number } | undefined;
}

const f = (n: number | undefined, digits = 1): string => (n === undefined ? '–' : n.toFixed(digits));

/** The requests table: counts and token sums, from the three views. */
export function requestsTable(rows: readonly Row[]): string {
  const out = [
    "| scenario | requests | direct: complete | via infermeter: complete / 502 / aborted / in-stream error | infermeter outcomes: success / failed (why) / cancelled | prompt tokens: client usage / llama.cpp prompt_n / infermeter | completion tokens: client usage / client text chunks / llama.cpp predicted_n / infermeter | in flight (running + waiting over model_name): max seen / above the client's | re-sent on a fresh upstream connection |",
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    const ok = (a: readonly Answer[]) => a.filter((x) => x.status === 200 && x.complete && !x.streamError).length;
    const lines = r.proxied.map((a) => r.log.get(a.requestId));
    const outcome = (o: string) => lines.filter((l) => l?.outcome === o).length;
    const why = new Map<string, number>();
    for (const l of lines) if (l?.outcome === 'failed') why.set(l.failure ?? '?', (why.get(l.failure ?? '?') ?? 0) + 1);
    const failed = why.size === 0 ? '0' : `${outcome('failed')} (${[...why].map(([k, n]) => `${k} ${n}`).join(', ')})`;
    out.push(
      `| ${r.scenario.name} | ${r.scenario.requests} | ${ok(r.direct)} | ${ok(r.proxied)} / ${r.proxied.filter((a) => a.status === 502).length} / ${r.proxied.filter((a) => a.aborted).length} / ${r.proxied.filter((a) => a.streamError).length} | ${outcome('success')} / ${failed} / ${outcome('cancelled')} | ${sum(r.proxied.map((a) => a.promptTokens))} / ${sum(r.proxied.map((a) => a.timings?.promptTokens))} / ${sum(lines.map((l) => l?.prompt_tokens))} | ${sum(r.proxied.map((a) => a.completionTokens))} / ${sum(r.proxied.map((a) => a.tokenChunks))} / ${sum(r.proxied.map((a) => a.timings?.predictedTokens))} / ${sum(lines.map((l) => l?.completion_tokens))} | ${r.inFlightSeen === undefined ? '–' : `${r.inFlightSeen.max} / ${r.inFlightSeen.excess}`} | ${r.metrics.get('infermeter_upstream_retries_total') ?? '–'} |`,
    );
  }
  return out.join('\n');
}

/**
 * The times table: means over the requests that succeeded through infermeter, the three views of
 * the same requests (the direct runs only count successes: on a shared machine their times are
 * minutes apart from these and not comparable).
 */
export function timesTable(rows: readonly Row[]): string {
  const out = [
    '| scenario | TTFT ms: client / llama.cpp prompt_ms / infermeter | TPOT ms: client / llama.cpp predicted_ms÷(n−1) (÷n) / infermeter | e2e ms: client / llama.cpp prompt_ms + predicted_ms / infermeter | vLLM phases ms (infermeter): queue / prefill / decode |',
    '|---|---|---|---|---|',
  ];
  for (const r of rows) {
    const good = r.proxied.filter((a) => a.status === 200 && a.complete && !a.streamError && r.log.get(a.requestId)?.outcome === 'success');
    const line = (a: Answer) => r.log.get(a.requestId);
    const perN1 = (a: Answer) =>
      a.timings !== undefined && a.timings.predictedTokens > 1 ? a.timings.predictedMs / (a.timings.predictedTokens - 1) : undefined;
    const perN = (a: Answer) => (a.timings !== undefined && a.timings.predictedTokens > 0 ? a.timings.predictedMs / a.timings.predictedTokens : undefined);
    const phase = (name: string) => {
      const count = r.metrics.get(`${name}_count`);
      return count === undefined || count === 0 ? undefined : ((r.metrics.get(`${name}_sum`) ?? 0) / count) * 1000;
    };
    if (good.length === 0) {
      out.push(
        `| ${r.scenario.name} | – | – | – | ${f(phase('vllm:request_queue_time_seconds'))} / ${f(phase('vllm:request_prefill_time_seconds'))} / ${f(phase('vllm:request_decode_time_seconds'))} |`,
      );
      continue;
    }
    out.push(
      `| ${r.scenario.name} | ${f(mean(good.map((a) => a.ttftMs)))} / ${f(mean(good.map((a) => a.timings?.promptMs)))} / ${f(mean(good.map((a) => line(a)?.ttft_ms)))} | ${f(mean(good.map((a) => a.tpotMs)), 2)} / ${f(mean(good.map(perN1)), 2)} (${f(mean(good.map(perN)), 2)}) / ${f(mean(good.map((a) => line(a)?.tpot_ms)), 2)} | ${f(mean(good.map((a) => a.e2eMs)))} / ${f(mean(good.map((a) => (a.timings === undefined ? undefined : a.timings.promptMs + a.timings.predictedMs))))} / ${f(mean(good.map((a) => line(a)?.e2e_ms)))} | ${f(phase('vllm:request_queue_time_seconds'))} / ${f(phase('vllm:request_prefill_time_seconds'))} / ${f(phase('vllm:request_decode_time_seconds'))} |`,
    );
  }
  return out.join('\n');
}
