// Runs recorded bytes through the response tap and a request timer without sockets: a
// PassThrough stands in for the upstream response, a fake clock reads whatever the test says.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { createRequestTimer, type MeasurementSink } from '../../src/measure/request-timer.ts';
import type { InferenceApi, RequestSample } from '../../src/measure/sample.ts';
import { type ResponseTap, tapResponse, type TapProblem } from '../../src/stream-tap/response-tap.ts';

export interface TapRun {
  readonly sample: RequestSample;
  readonly problems: TapProblem[];
  /** Clock value at the first token (undefined when none came). */
  readonly firstTokenAt: number | undefined;
  /** What the timer told of the first visible output: seconds from arrival (undefined when none came). */
  readonly timeToFirstOutput: number | undefined;
  /** For a stream that opened with reasoning: seconds from its first token to its first visible output. */
  readonly reasoningPhase: number | undefined;
}

export interface TapInput {
  readonly api: InferenceApi;
  readonly chunks: readonly Buffer[];
  readonly status?: number;
  readonly headers?: IncomingHttpHeaders;
  /** The clock's value while chunk i is fed (default: i). */
  readonly clockAt?: (chunkIndex: number) => number;
  readonly maxEventBytes?: number;
  readonly maxBodyBytes?: number;
}

/** Hands a response's body to the tap as the relay does, chunk by chunk, then its end and close. */
export function listenTap(
  res: { on(event: 'data', listener: (chunk: Buffer) => void): unknown; on(event: 'end' | 'close', listener: () => void): unknown },
  tap: ResponseTap,
): void {
  res.on('data', tap.chunk);
  res.on('end', tap.end);
  res.on('close', tap.close);
}

export function runTap(input: TapInput): TapRun {
  let now = 0;
  let firstTokenAt: number | undefined;
  let timeToFirstOutput: number | undefined;
  let reasoningPhase: number | undefined;
  let visibleTold = 0;
  let finished: RequestSample | undefined;
  const sink: MeasurementSink = {
    started() {},
    firstOutput(_info, ttft) {
      // The timer started at 0; the tap reads a chunk after it was sent on, with its arrival time.
      if (ttft !== undefined) firstTokenAt = Math.round(ttft * 1000);
    },
    firstVisibleOutput(_info, seconds, phase) {
      visibleTold++;
      timeToFirstOutput = seconds;
      reasoningPhase = phase;
    },
    finished(sample) {
      finished = sample;
    },
  };
  const timer = createRequestTimer(input.api, () => now, sink);
  timer.identify('fixture-model', true);
  const res = new PassThrough() as unknown as IncomingMessage & PassThrough;
  res.statusCode = input.status ?? 200;
  res.headers = input.headers ?? { 'content-type': 'text/event-stream; charset=utf-8' };
  const problems: TapProblem[] = [];
  const tap = tapResponse(res, timer, {
    maxEventBytes: input.maxEventBytes ?? 1024 * 1024,
    maxBodyBytes: input.maxBodyBytes ?? 1024 * 1024,
    problem: (kind) => problems.push(kind),
  });
  listenTap(res, tap);
  // Drive the stream synchronously: emit exactly the events a socket-backed response would.
  input.chunks.forEach((chunk, i) => {
    now = input.clockAt?.(i) ?? i;
    res.emit('data', chunk);
  });
  res.emit('end');
  timer.responseFinished();
  timer.close(true);
  if (finished === undefined) throw new Error('timer did not finish');
  if (visibleTold > 1) throw new Error(`the first visible output was told ${visibleTold} times`);
  return { sample: finished, problems, firstTokenAt, timeToFirstOutput, reasoningPhase };
}

/**
 * Splits an SSE body into its blocks (each with its blank-line terminator), marking which
 * blocks dispatch an event (those with a data: line; a leading byte-order mark skipped). A reference splitter for well-formed
 * fixtures, written independently of the parser under test.
 */
export function sseBlocks(bytes: Buffer): Array<{ bytes: Buffer; end: number; isEvent: boolean }> {
  const text = bytes.toString('latin1'); // byte offsets = string offsets
  const blocks: Array<{ bytes: Buffer; end: number; isEvent: boolean }> = [];
  const line = /([^\r\n]*)(\r\n|\r|\n)/y;
  let start = 0;
  let isEvent = false;
  let m: RegExpExecArray | null;
  while ((m = line.exec(text)) !== null) {
    // A byte-order mark at the stream's start is not part of its first line.
    const content = m.index === 0 ? m[1]!.replace(/^\xEF\xBB\xBF/, '') : m[1]!;
    if (content === '') {
      blocks.push({ bytes: Buffer.from(text.slice(start, line.lastIndex), 'latin1'), end: line.lastIndex, isEvent });
      start = line.lastIndex;
      isEvent = false;
    } else if (content.startsWith('data:')) isEvent = true;
  }
  if (start < text.length) blocks.push({ bytes: Buffer.from(text.slice(start), 'latin1'), end: text.length, isEvent });
  return blocks;
}
