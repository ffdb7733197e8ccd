import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createRequestTimer, type MeasurementSink } from '../../src/measure/request-timer.ts';
import type { RequestInfo, RequestSample } from '../../src/measure/sample.ts';
import { MAX_TOKEN_COUNT, type Usage } from '../../src/measure/usage.ts';

function harness() {
  let now = 1000;
  const calls: string[] = [];
  let sample: RequestSample | undefined;
  const sink: MeasurementSink = {
    started: (info: RequestInfo) => calls.push(`started ${info.model}`),
    firstOutput: (_info, ttft) => calls.push(`output ${ttft}`),
    finished: (s) => {
      calls.push(`finished ${s.outcome}`);
      sample = s;
    },
  };
  const timer = createRequestTimer('chat', () => now, sink);
  return {
    timer,
    calls,
    at(ms: number) {
      now = 1000 + ms;
    },
    get sample() {
      return sample!;
    },
  };
}

describe('request timer', () => {
  it('measures a streamed request with usage: TTFT, TPOT per token, e2e', () => {
    const h = harness();
    h.timer.identify('m', true);
    h.at(5);
    h.timer.responseHeaders(200, true);
    for (const ms of [200, 250, 300, 350, 400]) {
      h.at(ms);
      h.timer.tokenEvent();
    }
    h.timer.usage({ promptTokens: 7, completionTokens: 9 });
    h.at(420);
    h.timer.responseFinished();
    h.at(500);
    h.timer.close(true);
    const s = h.sample;
    assert.deepEqual(h.calls, ['started m', 'output 0.2', 'finished success']);
    assert.equal(s.ttft, 0.2);
    assert.equal(s.e2e, 0.42, 'e2e ends at the last byte handed to the client');
    // Decode time 200 ms over completion_tokens - 1 = 8 gaps.
    assert.deepEqual(s.tpot, { seconds: 0.025, tokens: 8 });
    assert.deepEqual([s.promptTokens, s.completionTokens, s.usageSource, s.tokenEvents], [7, 9, 'upstream', 5]);
  });

  // Found merging issue 29 (the last read held to leave with the end) with issue 32 (a chunk's
  // time is its write's): the tap, handed the last read after the last write, stamped its token
  // after e2e's end.
  it("gives a chunk handed over after the last write that write's time: its token never after e2e", () => {
    const h = harness();
    h.timer.identify('m', true);
    h.timer.responseHeaders(200, true);
    h.at(100);
    h.timer.responseBody();
    h.timer.tokenEvent();
    h.at(200);
    h.timer.responseFinished(); // just before the last write
    h.at(201);
    h.timer.responseBody(); // the last read, handed to the tap after that write
    h.timer.tokenEvent();
    h.timer.usage({ promptTokens: 1, completionTokens: 2 });
    h.timer.close(true);
    assert.equal(h.sample.e2e, 0.2);
    assert.ok(h.sample.lastToken! <= h.sample.e2e!, `last token ${h.sample.lastToken} <= e2e ${h.sample.e2e}`);
  });

  it('ends TTFB when the head is written to the client where the route says so, else at the upstream head', () => {
    const h = harness();
    h.timer.identify('m', true);
    h.at(5);
    h.timer.responseHeaders(200, true);
    h.at(8);
    h.timer.headSent();
    h.at(9);
    h.timer.headSent(); // the relay's first write, after the head was flushed: the first wins
    h.at(20);
    h.timer.tokenEvent();
    h.timer.close(true);
    assert.equal(h.sample.ttfb, 0.008);
    const plain = harness();
    plain.at(5);
    plain.timer.responseHeaders(200, false);
    plain.timer.close(true);
    assert.equal(plain.sample.ttfb, 0.005);
  });

  it('takes t0 from the arrival when given, else from its creation', () => {
    const sink: MeasurementSink = { started: () => undefined, firstOutput: () => undefined, finished: () => undefined };
    const timer = createRequestTimer('chat', () => 100, sink, undefined, 90);
    timer.identify('m', false);
    timer.responseFinished();
    assert.equal(timer.close(true)!.e2e, 0.01);
  });

  it('has a TPOT only with two token events to measure between and n > 1, whatever the usage says', () => {
    const run = (tokensAt: readonly number[], completionTokens?: number) => {
      const h = harness();
      h.timer.identify('m', true);
      h.timer.responseHeaders(200, true);
      for (const ms of tokensAt) {
        h.at(ms);
        h.timer.tokenEvent();
      }
      if (completionTokens !== undefined) h.timer.usage({ promptTokens: 3, completionTokens });
      h.at(500);
      h.timer.responseFinished();
      h.timer.close(true);
      return h.sample;
    };
    // One event that carried every token (usage 5): there is no decode time to share.
    assert.equal(run([100], 5).tpot, undefined, 'one token event, usage 5');
    assert.equal(run([100], 1).tpot, undefined, 'one token event, usage 1');
    assert.equal(run([100]).tpot, undefined, 'one token event, no usage');
    // Two events, but the usage says one token: n - 1 = 0 gaps.
    assert.equal(run([100, 150], 1).tpot, undefined, 'two token events, usage 1');
    // The smallest TPOT there is: two events, one gap; by the events without usage.
    assert.deepEqual(run([100, 150]).tpot, { seconds: 0.05, tokens: 1 }, 'two token events, no usage');
    assert.deepEqual(run([100, 150], 2).tpot, { seconds: 0.05, tokens: 1 }, 'two token events, usage 2');
    assert.deepEqual(run([100, 150], 6).tpot, { seconds: 0.01, tokens: 5 }, 'two token events, usage 6');
    // The last token is the last token event's time, with or without a TPOT.
    assert.deepEqual([run([100], 5).lastToken, run([100, 150], 1).lastToken], [0.1, 0.15]);
  });

  it('falls back to token events and zero token counts for a stream without usage', () => {
    const h = harness();
    h.timer.identify('m', true);
    h.timer.responseHeaders(200, true);
    for (const ms of [100, 110, 130]) {
      h.at(ms);
      h.timer.tokenEvent();
    }
    h.timer.responseFinished();
    h.timer.close(true);
    assert.deepEqual(h.sample.tpot, { seconds: 0.015, tokens: 2 });
    assert.deepEqual([h.sample.promptTokens, h.sample.completionTokens, h.sample.usageSource], [0, 0, 'fallback']);
  });

  it("takes a stream's counts from the engine's timings when it has no usage, under the same bound", () => {
    const timings = { promptTokens: 9, promptMs: 12.5, predictedTokens: 3, predictedMs: 30 };
    const run = (t: typeof timings & { cachedTokens?: number }, usage?: Usage) => {
      const h = harness();
      h.timer.identify('m', true);
      h.timer.responseHeaders(200, true);
      for (const ms of [100, 110, 130]) {
        h.at(ms);
        h.timer.tokenEvent();
      }
      if (usage !== undefined) h.timer.usage(usage);
      h.timer.engineTimings(t);
      h.timer.responseFinished();
      h.timer.close(true);
      return h.sample;
    };
    // llama-server's usage.prompt_tokens is prompt_n + cache_n.
    const s = run({ ...timings, cachedTokens: 4 });
    assert.deepEqual([s.promptTokens, s.completionTokens, s.cachedPromptTokens, s.usageSource], [13, 3, 4, 'timings']);
    assert.deepEqual(s.tpot, { seconds: 0.015, tokens: 2 });
    assert.deepEqual([run(timings).promptTokens, run(timings).cachedPromptTokens], [9, undefined], 'no cache_n (older servers): prompt_n');
    // Usage, where there is some, wins.
    assert.deepEqual(
      [run(timings, { promptTokens: 20, completionTokens: 3 }).promptTokens, run(timings, { promptTokens: 20, completionTokens: 3 }).usageSource],
      [20, 'upstream'],
    );
    const huge = run({ ...timings, predictedTokens: MAX_TOKEN_COUNT + 1 });
    assert.deepEqual([huge.usageSource, huge.completionTokens, huge.usageRejections], ['fallback', 0, ['too_large']]);
    assert.equal(run({ ...timings, promptTokens: 2.5 }).usageSource, 'fallback', 'not whole numbers: no counts');
  });

  it('keeps the last usage report: reports are cumulative, never summed', () => {
    const h = harness();
    h.timer.identify('m', true);
    h.timer.responseHeaders(200, true);
    h.timer.usage({ promptTokens: 4, completionTokens: 1 });
    h.timer.usage({ promptTokens: 4, completionTokens: 2 });
    h.timer.usage({ promptTokens: 4, completionTokens: 3 });
    h.timer.responseFinished();
    h.timer.close(true);
    assert.deepEqual([h.sample.promptTokens, h.sample.completionTokens], [4, 3]);
  });

  it('gives a non-streamed answer no TTFT and no TPOT, and no token figures without usage', () => {
    const h = harness();
    h.timer.identify('m', false);
    h.timer.responseHeaders(200, false);
    h.at(300);
    h.timer.responseBody();
    h.timer.responseFinished();
    h.timer.close(true);
    assert.deepEqual(h.calls, ['started m', 'output undefined', 'finished success']);
    assert.equal(h.sample.ttft, undefined);
    assert.equal(h.sample.tpot, undefined);
    assert.equal(h.sample.usageSource, 'none');
    assert.equal(h.sample.promptTokens, undefined);
    assert.equal(h.sample.e2e, 0.3);
  });

  it('observes TTFT when the first token comes even if the request fails later', () => {
    const h = harness();
    h.timer.identify('m', true);
    h.timer.responseHeaders(200, true);
    h.at(50);
    h.timer.tokenEvent();
    h.timer.streamError();
    h.timer.responseFinished();
    h.timer.close(true);
    assert.deepEqual(h.calls, ['started m', 'output 0.05', 'finished failed']);
    assert.equal(h.sample.failure, 'stream_error');
    assert.equal(h.sample.e2e, undefined, 'e2e is for successes only');
    assert.deepEqual(
      [h.sample.usageSource, h.sample.completionTokens, h.sample.promptTokens],
      ['events', 1, undefined],
      'a broken stream keeps the tokens it delivered, not the zero fallback',
    );
  });

  it('counts a client that leaves as cancelled, an upstream that breaks as failed', () => {
    const cancelled = harness();
    cancelled.timer.identify('m', true);
    cancelled.timer.responseHeaders(200, true);
    cancelled.timer.tokenEvent();
    cancelled.timer.close(false);
    assert.equal(cancelled.sample.outcome, 'cancelled');
    assert.equal(cancelled.sample.failure, undefined);
    assert.equal(cancelled.sample.cancelPhase, 'decoding');

    const reset = harness();
    reset.timer.identify('m', true);
    reset.timer.responseHeaders(200, true);
    reset.timer.fail('upstream_reset');
    reset.timer.close(false);
    assert.equal(reset.sample.outcome, 'failed');
    assert.equal(reset.sample.failure, 'upstream_reset');
  });

  it('fails any non-2xx answer, and an unreachable upstream with the status the client got', () => {
    const h = harness();
    h.timer.identify('m', false);
    h.timer.responseHeaders(429, false);
    h.timer.responseFinished();
    h.timer.close(true);
    assert.equal(h.sample.failure, 'upstream_status');

    const down = harness();
    down.timer.identify('m', true);
    down.timer.fail('upstream_unreachable', 502);
    down.timer.responseFinished();
    down.timer.close(true);
    assert.deepEqual([down.sample.outcome, down.sample.failure, down.sample.status], ['failed', 'upstream_unreachable', 502]);
  });

  it('reports in order when the response starts before the body told the model', () => {
    const h = harness();
    h.timer.responseHeaders(200, true);
    h.at(10);
    h.timer.tokenEvent();
    h.timer.identify('late', true);
    h.timer.close(true);
    assert.deepEqual(h.calls, ['started late', 'output 0.01', 'finished success']);
  });

  it('labels a request whose body never told the model as unknown', () => {
    const h = harness();
    h.timer.close(false);
    assert.deepEqual(h.calls, ['started unknown', 'finished cancelled']);
    assert.equal(h.sample.cancelPhase, 'before_first_token');
    assert.equal(h.sample.ttfb, undefined);
  });

  it('reports the gap between tokens as they come, shared among the tokens of an event', () => {
    let now = 0;
    const gaps: Array<[number, number]> = [];
    const timer = createRequestTimer('chat', () => now, {
      started() {},
      firstOutput() {},
      finished() {},
      interToken: (_info, seconds, tokens) => gaps.push([Math.round(seconds * 1e6) / 1e6, tokens]),
    });
    timer.identify('m', true);
    now = 40;
    timer.responseHeaders(200, true);
    now = 100;
    timer.tokenEvent(); // first token: no gap
    now = 120;
    timer.tokenEvent(); // 20 ms, one token
    now = 150;
    timer.tokenEvent(3); // cumulative usage starts here: no delta known, one token
    now = 210;
    timer.tokenEvent(6); // 60 ms over 3 tokens
    timer.responseFinished();
    const sample = timer.close(true)!;
    assert.deepEqual(gaps, [
      [0.02, 1],
      [0.03, 1],
      [0.02, 3],
    ]);
    assert.equal(sample.ttfb, 0.04);
  });

  it('keeps the last finish reason the upstream reported, and none when it reported none', () => {
    const h = harness();
    h.timer.identify('m', true);
    h.timer.responseHeaders(200, true);
    h.timer.tokenEvent();
    h.timer.finishReason('stop');
    h.timer.finishReason('length'); // n > 1: the last choice to finish
    h.timer.close(true);
    h.timer.finishReason('stop'); // after close: ignored
    assert.equal(h.sample.finishReason, 'length');
    const quiet = harness();
    quiet.timer.identify('m', true);
    quiet.timer.close(false);
    assert.equal(quiet.sample.finishReason, undefined);
  });

  it('finishes once; later events are ignored', () => {
    const h = harness();
    h.timer.identify('m', true);
    h.timer.close(true);
    assert.equal(h.timer.close(false), undefined);
    h.timer.tokenEvent();
    h.timer.fail('upstream_reset');
    assert.deepEqual(h.calls, ['started m', 'finished success']);
  });
  describe('usage that lies (issue 49)', () => {
    const streamWith = (...reports: Usage[]) => {
      const h = harness();
      h.timer.identify('m', true);
      h.timer.responseHeaders(200, true);
      h.timer.tokenEvent();
      h.timer.tokenEvent();
      for (const u of reports) h.timer.usage(u);
      h.timer.responseFinished();
      h.timer.close(true);
      return h.sample;
    };
    it('cuts a part larger than its whole to it, and says so', () => {
      const s = streamWith({ promptTokens: 4, completionTokens: 3, reasoningTokens: 9, cachedTokens: 10 });
      assert.deepEqual([s.promptTokens, s.completionTokens, s.reasoningTokens, s.cachedPromptTokens], [4, 3, 3, 4]);
      assert.deepEqual(s.usageRejections, ['reasoning_over_completion', 'cached_over_prompt']);
      // Anthropic's cache reads are part of the prompt's total: within it by construction.
      const a = streamWith({ promptTokens: 1, completionTokens: 3, cacheReadTokens: 50, cacheCreationTokens: 7 });
      assert.deepEqual([a.promptTokens, a.cachedPromptTokens, a.usageRejections], [58, 50, undefined]);
      const honest = streamWith({ promptTokens: 4, completionTokens: 3, reasoningTokens: 3, cachedTokens: 4 });
      assert.deepEqual([honest.reasoningTokens, honest.cachedPromptTokens, honest.usageRejections], [3, 4, undefined]);
    });

    it('refuses a report with a count above 2^31 - 1: the request counts as without usage', () => {
      const ok = streamWith({ promptTokens: MAX_TOKEN_COUNT, completionTokens: 2 });
      assert.deepEqual([ok.usageSource, ok.promptTokens, ok.usageRejections], ['upstream', MAX_TOKEN_COUNT, undefined]);
      for (const lie of [MAX_TOKEN_COUNT + 1, 2 ** 53 - 1]) {
        for (const u of [
          { promptTokens: lie, completionTokens: 2 },
          { promptTokens: 2, completionTokens: 2, reasoningTokens: lie },
        ] as Usage[]) {
          // An honest report before the lie, and one after, are not taken either.
          const s = streamWith({ promptTokens: 5, completionTokens: 1 }, u, { promptTokens: 5, completionTokens: 2 });
          assert.deepEqual(
            [s.usageSource, s.promptTokens, s.completionTokens, s.tokenEvents, s.usageRejections],
            ['fallback', 0, 0, 2, ['too_large']],
            JSON.stringify(u),
          );
        }
      }
      const h = harness();
      h.timer.identify('m', false);
      h.timer.responseHeaders(200, false);
      h.timer.responseBody();
      h.timer.usage({ promptTokens: 2 ** 53 - 1, completionTokens: 1 });
      h.timer.close(true);
      assert.deepEqual([h.sample.usageSource, h.sample.promptTokens, h.sample.completionTokens], ['none', undefined, undefined], 'a body without usage');
    });

    it('weighs no inter-token gap by a cumulative count above the bound', () => {
      let now = 0;
      const weights: number[] = [];
      const sink: MeasurementSink = { started() {}, firstOutput() {}, finished() {}, interToken: (_i, _s, tokens) => weights.push(tokens) };
      const timer = createRequestTimer('chat', () => now, sink);
      timer.identify('m', true);
      timer.responseHeaders(200, true);
      for (const c of [1, 2 ** 53 - 1, 3]) {
        now += 10;
        timer.tokenEvent(c);
      }
      assert.deepEqual(weights, [1, 2]);
    });
  });
});
