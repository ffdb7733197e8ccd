// vLLM's request phases (queue, prefill, decode; inference = prefill + decode) of one finished
// request. Where the engine reported its own timings (llama.cpp's `timings`), they give prefill
// and decode, and the queue is what comes before prefill in the time to the first token the
// proxy saw (the engine's HTTP layer and scheduler, the network, infermeter's admission queue).
// Where it did not, the proxy's estimate: the queue is infermeter's own admission queue only,
// prefill runs from forwarding to the first token (the engine's queueing inside it), decode from
// the first token to the last; and a non-streamed answer has no prefill or decode.
import type { RequestSample } from '../../measure/sample.ts';

export interface PhaseSplit {
  /** `engine`: prefill and decode are the engine's own figures; `estimate`: the proxy's. */
  readonly source: 'engine' | 'estimate';
  /** Seconds before prefill began. */
  readonly queue: number;
  readonly prefill: number | undefined;
  readonly decode: number | undefined;
  /** prefill + decode. */
  readonly inference: number | undefined;
}

export function phaseSplit(sample: RequestSample): PhaseSplit {
  const queued = sample.queued ?? 0;
  const { ttft, lastToken, engineTimings } = sample;
  if (engineTimings !== undefined) {
    const prefill = engineTimings.promptMs / 1000;
    const decode = engineTimings.predictedMs / 1000;
    // A stream: its first token came when prefill ended. A whole answer: its head came when
    // decoding ended.
    const before = ttft !== undefined ? ttft - prefill : sample.ttfb !== undefined ? sample.ttfb - prefill - decode : 0;
    return { source: 'engine', queue: Math.max(queued, before), prefill, decode, inference: prefill + decode };
  }
  const decoded = ttft !== undefined && lastToken !== undefined;
  return {
    source: 'estimate',
    queue: queued,
    prefill: ttft === undefined ? undefined : Math.max(0, ttft - queued),
    decode: decoded ? lastToken - ttft : undefined,
    inference: decoded ? Math.max(0, lastToken - queued) : undefined,
  };
}
