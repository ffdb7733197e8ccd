// The checks every recorded stream goes through, own fixtures and real recordings alike.
import assert from 'node:assert/strict';
import type { InferenceApi } from '../../src/measure/sample.ts';
import type { StreamExpectation } from '../helpers/fixtures.ts';
import { rechunk, seededRandom } from '../helpers/random.ts';
import { runTap, sseBlocks, type TapRun } from '../helpers/tap-harness.ts';

/**
 * The finish reason a recording states, read from its bytes alone (an oracle independent of the
 * classifiers): the last non-empty `"finish_reason":"..."` (`"stop_reason":"..."` in a Messages
 * API stream), or "stop" for a Responses API stream that completed; null when it cannot tell
 * (another Responses API ending).
 */
function finishReasonIn(bytes: Buffer): string | undefined | null {
  const text = bytes.toString('utf8');
  if (/"type"\s*:\s*"response\./.test(text)) return /"type"\s*:\s*"response\.completed"/.test(text) ? 'stop' : null;
  const key = /"type"\s*:\s*"message_start"/.test(text) ? 'stop_reason' : 'finish_reason';
  const all = [...text.matchAll(new RegExp(`"${key}"\\s*:\\s*"([^"]+)"`, 'g'))];
  return all.length === 0 ? undefined : all[all.length - 1]![1];
}

function checkTotals(run: TapRun, expect: StreamExpectation, context: string, bytes: Buffer): void {
  const { sample, problems, timeToFirstOutput, reasoningPhase } = run;
  const finishReason = finishReasonIn(bytes);
  if (finishReason !== null) assert.equal(sample.finishReason, finishReason, `${context}: finish reason`);
  assert.equal(sample.tokenEvents, expect.tokenEvents, `${context}: token-carrying events`);
  assert.equal(sample.ttft !== undefined, expect.firstTokenEvent !== null, `${context}: TTFT observed`);
  const firstVisible = expect.firstVisibleEvent === undefined ? expect.firstTokenEvent : expect.firstVisibleEvent;
  assert.equal(timeToFirstOutput !== undefined, firstVisible !== null, `${context}: time to first output observed`);
  // The reasoning phase: for a stream that opens with reasoning, from its first token to its first visible output.
  assert.equal(reasoningPhase !== undefined, firstVisible !== null && firstVisible !== expect.firstTokenEvent, `${context}: reasoning phase`);
  if (reasoningPhase !== undefined)
    assert.ok(Math.abs(reasoningPhase - (timeToFirstOutput! - sample.ttft!)) < 1e-9, `${context}: reasoning phase = time to first output - TTFT`);
  if (expect.promptTokens === null && expect.completionTokens === null) {
    assert.notEqual(sample.usageSource, 'upstream', `${context}: no usage expected`);
  } else {
    assert.equal(sample.usageSource, 'upstream', `${context}: usage source`);
    assert.equal(sample.promptTokens ?? null, expect.promptTokens, `${context}: prompt tokens`);
    assert.equal(sample.completionTokens ?? null, expect.completionTokens, `${context}: completion tokens`);
  }
  assert.equal(sample.outcome, expect.error ? 'failed' : 'success', `${context}: outcome`);
  if (expect.error) assert.equal(sample.failure, 'stream_error', `${context}: failure reason`);
  assert.deepEqual(sample.engineTimings, expect.engineTimings, `${context}: the engine's timings`);
  // The usage's details: exactly what the recording's usage states, nothing where it states none.
  assert.equal(sample.reasoningTokens, expect.reasoningTokens, `${context}: reasoning tokens`);
  assert.equal(sample.cachedPromptTokens, expect.cachedPromptTokens, `${context}: cached prompt tokens`);
  assert.equal(sample.cacheWriteTokens, expect.cacheWriteTokens, `${context}: cache write tokens`);
  assert.equal(problems.filter((p) => p === 'malformed_event').length, expect.malformed, `${context}: malformed events`);
  assert.deepEqual(
    problems.filter((p) => p !== 'malformed_event'),
    [],
    `${context}: other tap problems`,
  );
}

/** One event per chunk, the clock reading the event's index: checks which events are tokens. */
export function checkEventByEvent(api: InferenceApi, bytes: Buffer, expect: StreamExpectation, name: string): void {
  const blocks = sseBlocks(bytes);
  assert.equal(blocks.filter((b) => b.isEvent).length, expect.events, `${name}: events in the recording`);
  const eventIndex: number[] = [];
  let seen = -1;
  for (const b of blocks) eventIndex.push(b.isEvent ? ++seen : seen);
  const run = runTap({ api, chunks: blocks.map((b) => b.bytes), clockAt: (i) => eventIndex[i]! });
  checkTotals(run, expect, name, bytes);
  assert.equal(run.firstTokenAt ?? null, expect.firstTokenEvent, `${name}: first token event`);
  // The clock reads the event's index: the first visible output's event, after TTFT's by the reasoning events' span.
  const firstVisible = expect.firstVisibleEvent === undefined ? expect.firstTokenEvent : expect.firstVisibleEvent;
  assert.equal(run.timeToFirstOutput === undefined ? null : Math.round(run.timeToFirstOutput * 1000), firstVisible, `${name}: first visible output event`);
  const { sample } = run;
  // The clock reads the event's index (in ms): the last token's event, whether or not a TPOT
  // follows from it.
  assert.equal(sample.lastToken === undefined ? null : Math.round(sample.lastToken * 1000), expect.lastTokenEvent, `${name}: last token event`);
  // TPOT = (last - first) / (n - 1), n the usage's completion tokens (else the token events):
  // there is one exactly when more than one token event came and n > 1.
  const n = expect.completionTokens ?? expect.tokenEvents;
  assert.equal(
    sample.tpot !== undefined,
    expect.tokenEvents > 1 && n > 1,
    `${name}: TPOT ${JSON.stringify(sample.tpot)} for ${expect.tokenEvents} token events, n = ${n}`,
  );
  if (sample.tpot !== undefined) {
    assert.equal(sample.tpot.tokens, n - 1, `${name}: TPOT tokens`);
    // Recover the last token's event from TPOT: the same event.
    const last = expect.firstTokenEvent! + sample.tpot.seconds * 1000 * sample.tpot.tokens;
    assert.ok(Math.abs(last - expect.lastTokenEvent!) < 1e-6, `${name}: last token event ${last} from TPOT`);
  }
}

/** Random chunk boundaries, multibyte characters split: every figure must be the same. */
export function checkRechunked(api: InferenceApi, bytes: Buffer, expect: StreamExpectation, name: string, seeds = 30): void {
  const blocks = sseBlocks(bytes);
  const eventEnds = blocks.filter((b) => b.isEvent).map((b) => b.end);
  for (let seed = 1; seed <= seeds; seed++) {
    const random = seededRandom(seed);
    const maxLen = seed % 3 === 0 ? 7 : seed % 3 === 1 ? 64 : 512;
    const chunks = rechunk(bytes, random, maxLen);
    const ends: number[] = [];
    let offset = 0;
    for (const c of chunks) ends.push((offset += c.length));
    const context = `${name} (seed ${seed}, chunks up to ${maxLen} bytes)`;
    const run = runTap({ api, chunks, clockAt: (i) => ends[i]! });
    checkTotals(run, expect, context, bytes);
    if (expect.firstTokenEvent !== null) {
      // The first token is seen once its event's bytes are all in, and not a chunk later.
      const end = eventEnds[expect.firstTokenEvent]!;
      const at = run.firstTokenAt!;
      const previousEnd = expect.firstTokenEvent === 0 ? 0 : eventEnds[expect.firstTokenEvent - 1]!;
      assert.ok(at > previousEnd && at >= end - 4 && at < end + maxLen, `${context}: first token at byte ${at}, event ends at ${end}`);
    }
    const firstVisible = expect.firstVisibleEvent === undefined ? expect.firstTokenEvent : expect.firstVisibleEvent;
    if (firstVisible !== null) {
      // Likewise the first visible output: once its event is all in, and not a chunk later.
      const end = eventEnds[firstVisible]!;
      const at = Math.round(run.timeToFirstOutput! * 1000);
      const previousEnd = firstVisible === 0 ? 0 : eventEnds[firstVisible - 1]!;
      assert.ok(at > previousEnd && at >= end - 4 && at < end + maxLen, `${context}: first visible output at byte ${at}, event ends at ${end}`);
    }
  }
}
