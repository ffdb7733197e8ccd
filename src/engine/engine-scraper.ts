// Reads the model server's own /metrics on an interval, off the request path, with a timeout
// and a size cap: the engine state for the MindIE families and /metrics-json, and (optionally)
// the whole exposition to relay below infermeter's own. Its health is visible as metrics; the
// log says once when the engine's metrics cannot be read, and once when they can again.
// Over 300 lines: one round's state (the view and its age, the relay, the failing flag) is shared by
// the round, the stale keep and the health families; split, each part would reach into the others.
import type { Registry } from '@prometheus-io/client';
import { prometheus } from '../prometheus-parts.ts';
import type { Logger } from '../log.ts';
import { dropDuplicateSeries, formatExposition, parseExposition, seriesNames, type Family } from './exposition-parser.ts';
import { readEngineState, readMindieJson, type EngineSnapshot } from './engine-state.ts';

export interface EngineView extends EngineSnapshot {
  /** MindIE's /metrics-json figures, when that URL is configured and answered. */
  readonly mindieJson: { remainBlocks?: number; waiting?: number; processing?: number } | undefined;
}

export interface EngineScraperOptions {
  readonly metricsUrl: URL;
  readonly jsonUrl: URL | undefined;
  /** The upstream's /v1/models: names the model of series without a model_name label. */
  readonly modelsUrl: URL;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly relay: { readonly enabled: boolean; readonly intervalMs: number; readonly maxBytes: number };
  /** Names of infermeter's own series: relayed families that would clash are dropped. */
  readonly ownNames: () => ReadonlySet<string>;
  readonly log: Logger;
  /** Milliseconds; monotonic for intervals. */
  readonly now: () => number;
  /** The proxy's in-flight requests per model now (waiting + running): read before and after each scrape. */
  readonly proxyInFlight?: (() => ReadonlyMap<string, number>) | undefined;
  /** Told whether each scrape reached the engine (answered: true; unreachable: false); /ready's news. */
  readonly reached?: ((yes: boolean) => void) | undefined;
}

export interface EngineScraper {
  /**
   * The engine state of the last good scrape; undefined when the last scrape failed, except
   * after timeouts alone within the stale bound (`staleBoundMs`): then the last good one, stale.
   */
  view(): EngineView | undefined;
  /** What to append to /metrics: the relayed exposition of the last good relay round, or ''. */
  relayText(): string;
  /** The names of the families relayText() holds. */
  relayedFamilies(): ReadonlySet<string>;
  /** One round now (the timer calls it; tests await it). */
  scrapeOnce(): Promise<void>;
  start(): void;
  stop(): void;
}

/** Why a scrape failed; label values of infermeter_upstream_metrics_scrape_failures_total. */
type ScrapeFailure = 'unreachable' | 'timeout' | 'status' | 'too_large' | 'unparseable' | 'unknown_engine';
const SCRAPE_FAILURES: readonly ScrapeFailure[] = ['unreachable', 'timeout', 'status', 'too_large', 'unparseable', 'unknown_engine'];

const MAX_SCRAPE_BYTES = 8 * 1024 * 1024;
/** Rounds that may time out in a row while the last good figures are kept, stale. */
const STALE_ROUNDS = 3;

/**
 * How long after its last good scrape an engine whose scrapes time out keeps its figures: three
 * rounds that time out (each its timeout, then the interval). A timeout is a busy engine, not a
 * gone one: a thread-per-connection engine (llama.cpp) leaves the scrape in its listen queue
 * while every HTTP thread serves a client, for seconds at a time. Any other failure drops them.
 */
export const staleBoundMs = (intervalMs: number, timeoutMs: number): number => STALE_ROUNDS * (intervalMs + timeoutMs);
const MODELS_REFRESH_ROUNDS = 12;

class ScrapeError extends Error {
  readonly reason: ScrapeFailure;
  constructor(reason: ScrapeFailure, message: string) {
    super(message);
    this.reason = reason;
  }
}

/** GETs a URL with a timeout and a size cap; ScrapeError on any failure. */
export async function fetchText(url: URL, timeoutMs: number, maxBytes: number): Promise<string> {
  let res: Response;
  try {
    // A connection per scrape, closed after it: a thread-per-connection engine (llama.cpp) would
    // otherwise keep one of its few threads for the idle scrape connection between scrapes.
    res = await fetch(url, {
      signal: AbortSignal.timeout(timeoutMs),
      headers: { accept: 'text/plain;version=0.0.4, application/json;q=0.5', connection: 'close' },
    });
  } catch (error) {
    const timedOut = (error as Error).name === 'TimeoutError';
    throw new ScrapeError(timedOut ? 'timeout' : 'unreachable', timedOut ? `no answer within ${timeoutMs} ms` : String((error as Error).cause ?? error));
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new ScrapeError('status', `HTTP ${res.status}`);
  }
  const reader = res.body?.getReader();
  if (reader === undefined) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > maxBytes) {
        await reader.cancel();
        throw new ScrapeError('too_large', `more than ${maxBytes} bytes`);
      }
      chunks.push(value);
    }
  } catch (error) {
    if (error instanceof ScrapeError) throw error;
    const timedOut = (error as Error).name === 'TimeoutError';
    throw new ScrapeError(timedOut ? 'timeout' : 'unreachable', String(error));
  }
  return Buffer.concat(chunks).toString('utf8');
}

function higherOf(a: ReadonlyMap<string, number> | undefined, b: ReadonlyMap<string, number> | undefined): ReadonlyMap<string, number> | undefined {
  if (a === undefined || b === undefined) return a ?? b;
  const out = new Map(a);
  for (const [model, n] of b) out.set(model, Math.max(n, out.get(model) ?? 0));
  return out;
}

export function createEngineScraper(options: EngineScraperOptions, registry: Registry): EngineScraper {
  const { Counter, Gauge } = prometheus();
  const { log } = options;
  const up = new Gauge({
    name: 'infermeter_upstream_metrics_up',
    help: "1 when the last scrape of the upstream engine's /metrics succeeded, else 0.",
    registers: [registry],
  });
  const lastSuccess = new Gauge({
    name: 'infermeter_upstream_metrics_last_success_timestamp_seconds',
    help: "Unix time of the last successful scrape of the upstream engine's /metrics.",
    registers: [registry],
  });
  const failures = new Counter({
    name: 'infermeter_upstream_metrics_scrape_failures_total',
    help: "Failed scrapes of the upstream engine's /metrics, by reason.",
    labelNames: ['reason'],
    registers: [registry],
  });
  for (const reason of SCRAPE_FAILURES) failures.inc({ reason }, 0);
  const engineInfo = new Gauge({
    name: 'infermeter_upstream_engine_info',
    help: 'Always 1; the engine label names the engine detected from its /metrics.',
    labelNames: ['engine'],
    registers: [registry],
  });
  const duplicates = new Gauge({
    name: 'infermeter_upstream_metrics_duplicate_series',
    help: "Samples of the engine's last readable /metrics dropped because an earlier sample had the same name and labels (neither read nor relayed).",
    registers: [registry],
  });
  const relaySkipped = options.relay.enabled
    ? new Counter({
        name: 'infermeter_relay_rounds_skipped_total',
        help: 'Relay rounds in which the engine exposition was not relayed, by reason.',
        labelNames: ['reason'],
        registers: [registry],
      })
    : undefined;
  const relayFamilies = options.relay.enabled
    ? new Gauge({
        name: 'infermeter_relay_families',
        help: "Families of the engine exposition in the last relay round: relayed, or dropped because they clash with infermeter's own.",
        labelNames: ['state'],
        registers: [registry],
      })
    : undefined;
  const stale = new Gauge({
    name: 'infermeter_upstream_metrics_stale',
    help: "1 while the engine figures served are an earlier scrape's, kept because the scrapes since timed out (a busy engine), at most 3 rounds; else 0.",
    registers: [registry],
  });
  up.set(0);
  stale.set(0);

  let view: EngineView | undefined;
  /** When the view was read (options.now()). */
  let viewAt = 0;
  const bound = staleBoundMs(options.intervalMs, options.timeoutMs);
  let relay = '';
  let relayed: ReadonlySet<string> = new Set();
  const clearRelay = (): void => {
    relay = '';
    relayed = new Set();
  };
  let lastRelayAt: number | undefined;
  let servedModel: string | undefined;
  let rounds = 0;
  let failing = false;
  let timer: NodeJS.Timeout | undefined;
  let stopped = true;

  async function modelName(): Promise<string> {
    if (servedModel !== undefined && rounds % MODELS_REFRESH_ROUNDS !== 0) return servedModel;
    try {
      const body = JSON.parse(await fetchText(options.modelsUrl, options.timeoutMs, 1024 * 1024)) as { data?: Array<{ id?: unknown }> };
      const id = body.data?.[0]?.id;
      servedModel = typeof id === 'string' && id !== '' ? id : 'unknown';
    } catch {
      servedModel ??= 'unknown';
    }
    return servedModel;
  }

  function updateRelay(text: string, families: readonly Family[]): void {
    if (!options.relay.enabled) return;
    const at = options.now();
    if (lastRelayAt !== undefined && at - lastRelayAt < options.relay.intervalMs) return;
    lastRelayAt = at;
    if (Buffer.byteLength(text) > options.relay.maxBytes) {
      clearRelay();
      relaySkipped!.inc({ reason: 'too_large' });
      return;
    }
    const own = options.ownNames();
    const clashes = (f: Family): boolean => own.has(f.name) || seriesNames(f.name, f.type).some((n) => own.has(n)) || f.samples.some((s) => own.has(s.name));
    // prometheus_client's `<name>_created` companion of a counter or histogram goes with it.
    const companion = (f: Family): boolean => {
      if (!f.name.endsWith('_created')) return false;
      const base = f.name.slice(0, -'_created'.length);
      return own.has(base) || own.has(`${base}_total`);
    };
    const kept = families.filter((f) => !clashes(f) && !companion(f));
    const formatted = formatExposition(kept);
    if (Buffer.byteLength(formatted) > options.relay.maxBytes) {
      clearRelay();
      relaySkipped!.inc({ reason: 'too_large' });
      return;
    }
    relay = formatted;
    relayed = new Set(kept.map((f) => f.name));
    relayFamilies!.set({ state: 'relayed' }, kept.length);
    relayFamilies!.set({ state: 'dropped' }, families.length - kept.length);
  }

  // Rounds never overlap: a later one waits for the one in flight, so views arrive in order.
  let chain: Promise<void> = Promise.resolve();
  const scrapeOnce = (): Promise<void> => (chain = chain.then(round, round));

  async function round(): Promise<void> {
    rounds++;
    try {
      // The engine's figures are of some moment during the read: the higher count of before and
      // after stands for the proxy's then (the engine's others are never overestimated).
      const before = options.proxyInFlight?.();
      const text = await fetchText(options.metricsUrl, options.timeoutMs, MAX_SCRAPE_BYTES);
      const after = options.proxyInFlight?.();
      let families: Family[];
      try {
        const read = dropDuplicateSeries(parseExposition(text));
        families = read.families;
        duplicates.set(read.dropped);
      } catch (error) {
        if (options.relay.enabled) {
          clearRelay();
          relaySkipped!.inc({ reason: 'unparseable' });
        }
        throw new ScrapeError('unparseable', (error as Error).message);
      }
      updateRelay(text, families);
      // Models for series without a model_name label are looked up only when there are some.
      const placeholder = '\u0000';
      let state = readEngineState(families, { servedModel: placeholder, previous: view });
      if (state !== undefined && [...state.values.values()].some((m) => m.has(placeholder))) {
        state = readEngineState(families, { servedModel: await modelName(), previous: view });
      }
      if (state === undefined) throw new ScrapeError('unknown_engine', 'no metric of a known engine');
      const mindieJson = options.jsonUrl === undefined ? undefined : await readJson(options.jsonUrl);
      view = { ...state, mindieJson, proxyAtRead: higherOf(before, after) };
      viewAt = options.now();
      up.set(1);
      stale.set(0);
      options.reached?.(true);
      lastSuccess.set(Date.now() / 1000);
      engineInfo.reset();
      engineInfo.set({ engine: state.engine }, 1);
      if (failing) log.info('upstream metrics readable again', { url: options.metricsUrl.href, engine: state.engine });
      else if (rounds === 1) log.info('reading upstream engine metrics', { url: options.metricsUrl.href, engine: state.engine });
      failing = false;
    } catch (error) {
      const reason: ScrapeFailure = error instanceof ScrapeError ? error.reason : 'unreachable';
      // Any answer is a connection that worked, no connection says the engine is down; a slow
      // answer says neither (a busy engine).
      if (reason !== 'timeout') options.reached?.(reason !== 'unreachable');
      // A source that vanished is dropped, never frozen at its last value; a busy one's last
      // figures are kept, marked stale, for a bounded time.
      const keep = reason === 'timeout' && view !== undefined && options.now() - viewAt <= bound;
      if (!keep) {
        view = undefined;
        engineInfo.reset();
      }
      stale.set(keep ? 1 : 0);
      if (reason !== 'unparseable' && options.relay.enabled) clearRelay();
      up.set(0);
      failures.inc({ reason });
      if (!failing)
        log.warn('cannot read the upstream engine metrics; engine families left out until they can be read', {
          url: options.metricsUrl.href,
          reason,
          detail: (error as Error).message,
        });
      failing = true;
    }
  }

  async function readJson(url: URL): Promise<EngineView['mindieJson']> {
    try {
      return readMindieJson(JSON.parse(await fetchText(url, options.timeoutMs, 1024 * 1024)));
    } catch {
      return undefined;
    }
  }

  const loop = (): void => {
    if (stopped) return;
    void scrapeOnce().finally(() => {
      if (stopped) return;
      timer = setTimeout(loop, options.intervalMs);
      timer.unref();
    });
  };

  return {
    view: () => view,
    relayText: () => relay,
    relayedFamilies: () => relayed,
    scrapeOnce,
    start() {
      if (!stopped) return;
      stopped = false;
      loop();
    },
    stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}
