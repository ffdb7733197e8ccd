// The demo's SLO (npm run demo) is met with margin by its simulated server's timings, so a
// healthy demo looks healthy on the dashboard: the slowest request the demo can send, streamed
// or not, with a quarter more time on every figure, is still good by vLLM's goodput rules.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { judge } from '../../src/goodput/goodput-verdict.ts';
import { DEMO_SLO, simTimings } from '../../src/sim/sim-defaults.ts';

const MAX_TOKENS = 16 + 63; // the demo's max_tokens: 16 + (n * 13) % 64

describe("the demo's SLO", () => {
  it("is met, with a quarter to spare, by the simulated server's slowest answers, streamed or not", () => {
    // The timings' bounds, as drawn.
    const timings = simTimings();
    const draws = (f: unknown) => Array.from({ length: 2000 }, () => (f as () => number)());
    const ttfts = draws(timings.ttftMs);
    const gaps = draws(timings.interTokenMs);
    assert.ok(Math.min(...ttfts) >= 80 && Math.max(...ttfts) <= 320);
    assert.ok(Math.min(...gaps) >= 15 && Math.max(...gaps) <= 35);
    const { classes, allowance } = loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:1', INFERMETER_SLO: DEMO_SLO }, {}).slo;
    const targets = classes[0]!.targets!;
    const margin = 1.25;
    const ttft = 0.32 * margin;
    const e2e = (0.32 + (MAX_TOKENS - 1) * 0.035) * margin;
    const base = {
      api: 'chat',
      model: 'sim-llama-8b',
      tenant: undefined,
      status: 200,
      outcome: 'success',
      failure: undefined,
      cancelPhase: undefined,
      ttfb: 0.01,
      outputSeen: true,
      usageSource: 'upstream',
      promptTokens: 12,
      completionTokens: MAX_TOKENS,
      tokenEvents: MAX_TOKENS,
      finishReason: 'length',
      e2e,
      duration: e2e,
    } as const;
    const streamed: RequestSample = {
      ...base,
      stream: true,
      streamed: true,
      ttft,
      lastToken: e2e,
      tpot: { seconds: (e2e - ttft) / (MAX_TOKENS - 1), tokens: MAX_TOKENS - 1 },
    };
    const whole: RequestSample = { ...base, stream: false, streamed: false, ttft: undefined, lastToken: undefined, tpot: undefined };
    assert.equal(judge(streamed, targets, allowance).verdict, 'good', `streamed: TTFT ${ttft} s, e2e ${e2e} s`);
    assert.equal(judge(whole, targets, allowance).verdict, 'good', `non-streamed: its TTFT is its whole answer, ${e2e} s`);
  });
});
