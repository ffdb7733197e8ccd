// The models and timings of the simulated server as the demo and `infermeter sim` run it: a
// time to first token of 80 to 320 ms and 15 to 35 ms between tokens, like a small model on a
// busy GPU.
import type { SimOptions } from './model-server.ts';

export const SIM_MODELS: readonly string[] = ['sim-llama-8b', 'sim-qwen-7b'];

export function simTimings(): Pick<SimOptions, 'ttftMs' | 'interTokenMs' | 'defaultTokens'> {
  const jitter = (base: number, spread: number) => () => base + Math.random() * spread;
  return { ttftMs: jitter(80, 240), interTokenMs: jitter(15, 20), defaultTokens: 48 };
}
