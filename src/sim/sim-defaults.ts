// The models and timings of the simulated server as the demo and `infermeter sim` run it: a
// time to first token of 80 to 320 ms and 15 to 35 ms between tokens, like a small model on a
// busy GPU.
import type { SimOptions } from './model-server.ts';

export const SIM_MODELS: readonly string[] = ['sim-llama-8b', 'sim-qwen-7b'];

export function simTimings(): Pick<SimOptions, 'ttftMs' | 'interTokenMs' | 'defaultTokens'> {
  const jitter = (base: number, spread: number) => () => base + Math.random() * spread;
  return { ttftMs: jitter(80, 240), interTokenMs: jitter(15, 20), defaultTokens: 48 };
}

/**
 * The SLO the demo holds its requests to (INFERMETER_SLO), met with margin by these timings: a
 * TTFT of at most 320 ms, and for a non-streamed answer, whose TTFT is its whole answer by vLLM's
 * rules, at most 320 + 78 x 35 = 3050 ms (the demo asks for 16 to 79 tokens); a TPOT of at most
 * 35 ms. So a healthy demo shows a healthy SLO met (test/unit/demo-slo.test.ts).
 */
export const DEMO_SLO = 'ttft:4000 tpot:50';
