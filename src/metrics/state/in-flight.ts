// Requests in flight per model_name, as num_requests_running / num_requests_waiting report them
// (MindIE's and vLLM's names alike, and /metrics-json): one rule for every dialect and engine,
// so that the sum over model_name never counts a request twice and waiting is never below what
// the proxy itself sees.
//
// The proxy counts each request under the `model` its client sent; the engine counts it under its
// own name for the model (a single-model engine such as llama.cpp, TGI or vLLM with one served
// model accepts any `model` string). Each proxy name is attributed to one engine model: the only
// one when the engine reports one, else the one of the same name; a name the engine does not
// report (with several models) is nobody's and keeps the proxy's own figures. Per engine model:
// - running: the engine's figure (the proxy's, of the names attributed to it, where the engine
//   reports none);
// - waiting: the engine's figure, but never below what the proxy sees waiting: its in-flight
//   requests without a first token, less those the engine runs beyond the ones the proxy sees
//   running (they are in prefill: running for the engine, no token yet for the proxy). An
//   engine's queue may miss requests still held in its HTTP layer (llama.cpp's deferred count
//   does), and its figure is up to a scrape interval old.
// - together never above what can be in flight now: the proxy's own in-flight requests plus the
//   engine's others (its figures beyond the proxy's in-flight count when they were read:
//   clients that reach it directly). An engine figure is up to a scrape interval old (more
//   when kept stale): without this cap, requests that ended at the proxy since stayed in it
//   (in front of llama.cpp master at concurrency 8, 4 to 5 above the client's own count as a
//   burst ended).
// The proxy names attributed to an engine model of another name show 0: that model's series
// counts their requests.
import type { EngineSnapshot } from '../../engine/engine-state.ts';

export interface ProxyInFlight {
  readonly model: string;
  readonly waiting: number;
  readonly running: number;
}

export interface EngineInFlight {
  readonly running?: ReadonlyMap<string, number> | undefined;
  readonly waiting?: ReadonlyMap<string, number> | undefined;
  /** The proxy's in-flight requests per model (waiting + running) when these figures were read; absent: no cap. */
  readonly proxyAtRead?: ReadonlyMap<string, number> | undefined;
}

export interface InFlight {
  readonly running: Map<string, number>;
  readonly waiting: Map<string, number>;
}

export function attributeInFlight(proxy: Iterable<ProxyInFlight>, engine: EngineInFlight | undefined): InFlight {
  const running = new Map<string, number>();
  const waiting = new Map<string, number>();
  const engineModels = new Set<string>([...(engine?.running?.keys() ?? []), ...(engine?.waiting?.keys() ?? [])]);
  const only = engineModels.size === 1 ? engineModels.values().next().value : undefined;
  // What the proxy sees, per engine model: the sums over the names attributed to it.
  const seen = new Map<string, { waiting: number; running: number; atRead: number }>();
  for (const model of engineModels) seen.set(model, { waiting: 0, running: 0, atRead: 0 });
  const attributed = (model: string): string | undefined => only ?? (engineModels.has(model) ? model : undefined);
  const atRead = engine?.proxyAtRead;
  if (atRead !== undefined)
    for (const [model, n] of atRead) {
      const to = attributed(model);
      if (to !== undefined) seen.get(to)!.atRead += n;
    }
  for (const p of proxy) {
    const to = attributed(p.model);
    if (to === undefined) {
      running.set(p.model, p.running);
      waiting.set(p.model, p.waiting);
      continue;
    }
    const s = seen.get(to)!;
    s.waiting += p.waiting;
    s.running += p.running;
    running.set(p.model, 0);
    waiting.set(p.model, 0);
  }
  for (const [model, s] of seen) {
    const engineRunning = engine?.running?.get(model);
    const engineWaiting = engine?.waiting?.get(model);
    // The engine's others (beyond the proxy's requests when it was read), and the proxy's own now.
    const cap = atRead === undefined ? Number.POSITIVE_INFINITY : s.running + s.waiting + Math.max(0, (engineRunning ?? 0) + (engineWaiting ?? 0) - s.atRead);
    const r = Math.min(engineRunning ?? s.running, cap);
    // Running in the engine but without a token at the proxy: in prefill, so not waiting.
    const prefilling = Math.max(0, r - s.running);
    running.set(model, r);
    // Never below the proxy's own floor: the cap leaves room for it (cap - r >= s.waiting - prefilling).
    waiting.set(model, Math.min(Math.max(engineWaiting ?? 0, s.waiting - prefilling), cap - r));
  }
  return { running, waiting };
}

/** attributeInFlight over the recorder's models and the engine's last snapshot. */
export function inFlightNow(models: Iterable<ProxyInFlight>, engine: EngineSnapshot | undefined): InFlight {
  const values = engine?.values;
  return attributeInFlight(
    models,
    values === undefined
      ? undefined
      : { running: values.get('num_requests_running'), waiting: values.get('num_requests_waiting'), proxyAtRead: engine?.proxyAtRead },
  );
}

/** The sums over model_name. */
export function inFlightTotals(inFlight: InFlight): { running: number; waiting: number } {
  let running = 0;
  let waiting = 0;
  for (const v of inFlight.running.values()) running += v;
  for (const v of inFlight.waiting.values()) waiting += v;
  return { running, waiting };
}
