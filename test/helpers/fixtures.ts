// The recorded streams tests replay: the team's own (fixtures/streams, shaped after each
// engine's documented format, with a manifest of what each must measure to) and the real
// recordings in ../shared/fixtures/real-streams, which are third-party data read in place.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface StreamExpectation {
  readonly events: number;
  readonly tokenEvents: number;
  readonly firstTokenEvent: number | null;
  readonly lastTokenEvent: number | null;
  readonly promptTokens: number | null;
  readonly completionTokens: number | null;
  readonly error: boolean;
  readonly malformed: number;
  /** The engine's own timings the stream reports (llama.cpp), when it reports them. */
  readonly engineTimings?: { readonly promptTokens: number; readonly promptMs: number; readonly predictedTokens: number; readonly predictedMs: number };
  /**
   * The event with the first visible output (text, a tool call), when the stream opens with
   * reasoning; absent: the first token event's (null when none).
   */
  readonly firstVisibleEvent?: number | null;
  /** The usage's details the stream reports (absent: it reports none, and none may be measured). */
  readonly reasoningTokens?: number;
  readonly cachedPromptTokens?: number;
  readonly cacheWriteTokens?: number;
}

export interface StreamFixture {
  readonly name: string;
  readonly api: 'chat' | 'completions' | 'responses' | 'messages';
  readonly bytes: Buffer;
  readonly expect: StreamExpectation;
}

const OWN = new URL('../../fixtures/streams/', import.meta.url);

export function ownStreams(): StreamFixture[] {
  const manifest = JSON.parse(readFileSync(new URL('manifest.json', OWN), 'utf8')) as Array<{
    file: string;
    api: StreamFixture['api'];
    expect: StreamExpectation;
  }>;
  return manifest.map((m) => ({ name: m.file, api: m.api, bytes: readFileSync(new URL(m.file, OWN)), expect: m.expect }));
}

export const REAL_STREAMS_DIR = fileURLToPath(new URL('../../../shared/fixtures/real-streams/', import.meta.url));

export function realStreamsAvailable(): boolean {
  return existsSync(REAL_STREAMS_DIR);
}

/**
 * For `describe(..., { skip })` / `it(..., { skip })`: a reason to skip where the real recordings
 * are missing, never under CI, where a missing folder fails (as a missing prometheus does).
 */
export const realStreamsSkip: string | false =
  realStreamsAvailable() || process.env.CI ? false : `real recordings not found at ${REAL_STREAMS_DIR} (a clone beside ../shared has them)`;

/**
 * The real recordings' bytes for a test's corpus: none where the folder is missing (the test
 * that uses them adds `realStreamsInCorpus` so that the run says so), and under CI an error.
 */
export function realStreamCorpus(keep: (r: (typeof REAL_STREAMS)[number]) => boolean = () => true): Buffer[] {
  if (!realStreamsAvailable()) {
    if (process.env.CI) throw new Error(`CI: the real recordings are missing at ${REAL_STREAMS_DIR}`);
    return [];
  }
  return REAL_STREAMS.filter(keep).map((r) => realStreamBytes(r.file));
}

/** A check a corpus user runs (with `realStreamsSkip`): the real recordings are part of it. */
export function assertRealStreamsIn(corpus: readonly Buffer[], keep: (r: (typeof REAL_STREAMS)[number]) => boolean = () => true): void {
  assert.ok(realStreamsAvailable(), `the real recordings are missing at ${REAL_STREAMS_DIR}`);
  for (const r of REAL_STREAMS.filter(keep)) {
    const bytes = realStreamBytes(r.file);
    assert.ok(
      corpus.some((c) => c.equals(bytes)),
      `${r.file} is in the corpus`,
    );
  }
}

function readReal(file: string): string {
  return readFileSync(REAL_STREAMS_DIR + file, 'utf8');
}

/** Replays a recording as the SSE bytes that went over the wire, per the README's formats. */
export function realStreamBytes(file: string): Buffer {
  if (file.endsWith('.sse')) return Buffer.from(readReal(file), 'utf8');
  if (file.startsWith('vercelai-anthropic-') && file.endsWith('.chunks.txt')) {
    // Anthropic's Messages API: each payload under an `event:` line naming its type; no [DONE].
    const lines = readReal(file)
      .split('\n')
      .filter((l) => l.trim() !== '');
    return Buffer.from(lines.map((l) => `event: ${(JSON.parse(l) as { type: string }).type}\ndata: ${l}\n\n`).join(''), 'utf8');
  }
  if (file.endsWith('.chunks.txt')) {
    const lines = readReal(file)
      .split('\n')
      .filter((l) => l.trim() !== '');
    return Buffer.from(lines.map((l) => `data: ${l}\n\n`).join('') + 'data: [DONE]\n\n', 'utf8');
  }
  if (file.startsWith('tgi-') && file.endsWith('.json')) {
    const chunks = JSON.parse(readReal(file)) as unknown[];
    return Buffer.from(chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('') + 'data: [DONE]\n\n', 'utf8');
  }
  throw new Error(`not a stream recording: ${file}`);
}

export function realBody(file: string): Buffer {
  return Buffer.from(readReal(file), 'utf8');
}

/** What each real recording must measure to: from its README's table, event counts checked by hand. */
export const REAL_STREAMS: ReadonlyArray<{ file: string; api: StreamFixture['api']; expect: StreamExpectation }> = [
  {
    file: 'vercelai-openai-chat-text-usage.chunks.txt',
    api: 'chat',
    expect: {
      events: 304,
      tokenEvents: 300,
      firstTokenEvent: 1,
      lastTokenEvent: 300,
      promptTokens: 16,
      completionTokens: 300,
      error: false,
      malformed: 0,
      reasoningTokens: 0,
      cachedPromptTokens: 0,
    },
  },
  {
    file: 'aigateway-openai-chat-stream-nousage.sse',
    api: 'chat',
    expect: { events: 51, tokenEvents: 48, firstTokenEvent: 1, lastTokenEvent: 48, promptTokens: null, completionTokens: null, error: false, malformed: 0 },
  },
  {
    file: 'aigateway-openai-chat-stream-detailed-usage.sse',
    api: 'chat',
    expect: {
      events: 4,
      tokenEvents: 0,
      firstTokenEvent: null,
      lastTokenEvent: null,
      promptTokens: 12,
      completionTokens: 100,
      error: false,
      malformed: 0,
      firstVisibleEvent: null,
      reasoningTokens: 100,
      cachedPromptTokens: 0,
    },
  },
  {
    file: 'otel-openai-chat-stream-multiple-tools.sse',
    api: 'chat',
    expect: {
      events: 19,
      tokenEvents: 15,
      firstTokenEvent: 1,
      lastTokenEvent: 15,
      promptTokens: 75,
      completionTokens: 51,
      error: false,
      malformed: 0,
      reasoningTokens: 0,
      cachedPromptTokens: 0,
    },
  },
  {
    file: 'vercelai-deepseek-tool-call.chunks.txt',
    api: 'chat',
    expect: {
      events: 53,
      tokenEvents: 50,
      firstTokenEvent: 1,
      firstVisibleEvent: 40,
      lastTokenEvent: 50,
      promptTokens: 339,
      completionTokens: 83,
      error: false,
      malformed: 0,
      reasoningTokens: 39,
      cachedPromptTokens: 320,
    },
  },
  {
    file: 'tgi-chat-stream-usage.json',
    api: 'chat',
    expect: { events: 12, tokenEvents: 10, firstTokenEvent: 0, lastTokenEvent: 9, promptTokens: 40, completionTokens: 10, error: false, malformed: 0 },
  },
  {
    file: 'aigateway-openai-completion-stream-usage.sse',
    api: 'completions',
    expect: { events: 27, tokenEvents: 25, firstTokenEvent: 0, lastTokenEvent: 24, promptTokens: 31, completionTokens: 25, error: false, malformed: 0 },
  },
  {
    file: 'aigateway-openai-completion-stream-nousage.sse',
    api: 'completions',
    expect: { events: 26, tokenEvents: 25, firstTokenEvent: 0, lastTokenEvent: 24, promptTokens: null, completionTokens: null, error: false, malformed: 0 },
  },
  {
    file: 'otel-openai-responses-stream.sse',
    api: 'responses',
    expect: {
      events: 13,
      tokenEvents: 5,
      firstTokenEvent: 4,
      lastTokenEvent: 8,
      promptTokens: 22,
      completionTokens: 6,
      error: false,
      malformed: 0,
      reasoningTokens: 0,
      cachedPromptTokens: 0,
    },
  },
  // Anthropic's Messages API: text deltas are tokens; message_start, block starts and stops, pings,
  // an empty input_json_delta, message_delta and message_stop are not.
  {
    file: 'vercelai-anthropic-text.chunks.txt',
    api: 'messages',
    expect: {
      events: 12,
      tokenEvents: 6,
      firstTokenEvent: 3,
      lastTokenEvent: 8,
      promptTokens: 12,
      completionTokens: 30,
      error: false,
      malformed: 0,
      cachedPromptTokens: 0,
      cacheWriteTokens: 0,
    },
  },
  {
    file: 'vercelai-anthropic-tool-no-args.chunks.txt',
    api: 'messages',
    expect: {
      events: 13,
      tokenEvents: 2,
      firstTokenEvent: 2,
      lastTokenEvent: 3,
      promptTokens: 565,
      completionTokens: 48,
      error: false,
      malformed: 0,
      cachedPromptTokens: 0,
      cacheWriteTokens: 0,
    },
  },
  {
    file: 'vercelai-anthropic-message-delta-input-tokens.chunks.txt',
    api: 'messages',
    expect: { events: 8, tokenEvents: 2, firstTokenEvent: 2, lastTokenEvent: 4, promptTokens: 61, completionTokens: 2, error: false, malformed: 0 },
  },
  // llama.cpp b4747: no role chunk (the first chunk is a token), usage and timings on the finish chunk.
  {
    file: 'llamacpp-b4747-chat-stream-usage-timings.sse',
    api: 'chat',
    expect: {
      events: 10,
      tokenEvents: 8,
      firstTokenEvent: 0,
      lastTokenEvent: 7,
      promptTokens: 59,
      completionTokens: 8,
      error: false,
      malformed: 0,
      engineTimings: { promptTokens: 59, promptMs: 1.701, predictedTokens: 8, predictedMs: 1.305 },
    },
  },
  {
    file: 'llamacpp-b4747-completions-stream.sse',
    api: 'completions',
    expect: {
      events: 10,
      tokenEvents: 8,
      firstTokenEvent: 0,
      lastTokenEvent: 7,
      promptTokens: 15,
      completionTokens: 8,
      error: false,
      malformed: 0,
      engineTimings: { promptTokens: 15, promptMs: 0.504, predictedTokens: 8, predictedMs: 0.734 },
    },
  },
  // HTTP 200, then a line whose SSE field is `error` (no data: line, so not an event here), then [DONE].
  {
    file: 'llamacpp-b4747-chat-stream-context-error.sse',
    api: 'chat',
    expect: { events: 1, tokenEvents: 0, firstTokenEvent: null, lastTokenEvent: null, promptTokens: null, completionTokens: null, error: true, malformed: 0 },
  },
];
