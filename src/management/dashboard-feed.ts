// What the live dashboard (GET /dashboard) plots: a ring of per-model snapshots, one a second for
// the last 10 minutes, taken off the request path. Each snapshot reads the shared measurement
// state (lifetime counts and tokens, requests in flight), the engine's last scrape (in-flight
// requests where it reports them, KV-cache usage) and the TTFT and TPOT quantiles over the last
// minute, which an observer of the recorder fills as requests report them (metrics.addObserver:
// O(1) per event). Rates are computed when served, from the counts of two snapshots.
//
// Memory is bounded whatever the traffic: a model with activity in the retention holds one ring
// (18 numbers a snapshot) and two quantile windows (metrics/windows/quantile-window.ts), about 130 KB; a model
// idle for the whole retention gives them back. Models are the recorder's, so at most
// INFERMETER_MAX_MODELS plus `unknown` and `other`.
// Over 300 lines: the snapshot ring, the quantile observer and the served rates share one state.
import type { EngineView } from '../engine/engine-scraper.ts';
import type { MeasurementState, ModelState, SampleObserver } from '../metrics/state/recorder.ts';
import { createDashboardTenants, type TenantRow } from '../tenants/dashboard-tenants.ts';
import { costData, type DashboardCost } from './dashboard-cost.ts';
import { createDashboardGoodput, type DashboardGoodputData } from '../goodput/dashboard-goodput.ts';
import type { Goodput } from '../goodput/goodput-families.ts';
import { isClientError } from '../metrics/own/failure-classes.ts';
import { createQuantileWindow, MAX_RELATIVE_ERROR, type QuantileWindow } from '../metrics/windows/quantile-window.ts';

/** What the feed reads of the metrics (a Pick of Metrics). */
interface DashboardSource {
  readonly state: MeasurementState;
  engineView(): EngineView | undefined;
  addObserver(observer: SampleObserver): void;
  /** Goodput (INFERMETER_SLO), when on. */
  readonly goodput?: Goodput | undefined;
}

export interface DashboardFeedOptions {
  readonly metrics: DashboardSource;
  /** Wall-clock milliseconds for the chart's time axis (default Date.now). */
  readonly wallClock?: () => number;
  /** Seconds between snapshots (default 1). */
  readonly intervalSeconds?: number;
  /** Seconds of snapshots kept (default 600). */
  readonly retentionSeconds?: number;
  /** Rates are over this many seconds (default 10). */
  readonly rateWindowSeconds?: number;
  /** Quantiles are over this many seconds (default 60), moving in steps of quantileSlotSeconds (default 5). */
  readonly quantileWindowSeconds?: number;
  readonly quantileSlotSeconds?: number;
  /**
   * Awaited before a snapshot while someone watches (a data request in the last 30 s): with
   * workers, they send their batched events first, as before a scrape.
   */
  readonly beforeSnapshot?: (() => Promise<void>) | undefined;
  /** Hears a snapshot that threw (a bug): the timer goes on. */
  readonly onError?: (error: unknown) => void;
}

/** The series of one model, aligned with DashboardData.t; null where there is no value. */
const SERIES = [
  'requests', // received per second
  'finished', // per second: success + failed + cancelled, so each of those is at most this
  'success', // per second
  'failed', // the service's failures: every failed request but the client errors
  'clientErrors', // answered 4xx by the model server (failure-classes.ts): the client's mistake, apart
  'cancelled',
  'failedShare', // the service's failures / finished over the rate window, 0..1; null when none finished in it
  'clientErrorShare', // client errors / finished, likewise
  'promptTokens', // per second
  'generationTokens',
  'waiting', // in flight, no output yet
  'running', // in flight, output flowing
  'kvCache', // 0..1, the engine's, when its metrics are read and report it
  'ttftP50', // seconds
  'ttftP90',
  'ttftP99',
  'tpotP50', // seconds per output token
  'tpotP90',
  'tpotP99',
] as const;
type SeriesName = (typeof SERIES)[number];

interface ModelData {
  readonly model: string;
  /** Lifetime counts at the newest snapshot. */
  // clientErrors: of the failed, answered 4xx (the client's mistake); streams: those that showed
  // a token, whose TTFT and TPOT the charts plot (none: the charts say why they are empty).
  readonly totals: Record<'received' | 'success' | 'failed' | 'cancelled' | 'promptTokens' | 'generationTokens' | 'clientErrors' | 'streams', number>;
  /** Whose in-flight counts the newest snapshot shows: the engine's where it reports this model by name, else the proxy's. */
  readonly inFlightSource: 'engine' | 'proxy';
  readonly series: Record<SeriesName, Array<number | null>>;
}

export interface DashboardData {
  /** Number of the newest snapshot: pass it as `since` to get only newer ones. */
  readonly seq: number;
  /** True when the answer holds every snapshot kept (no `since`, or one too old or from another run). */
  readonly full: boolean;
  readonly intervalSeconds: number;
  readonly retentionSeconds: number;
  readonly rateWindowSeconds: number;
  readonly quantileWindowSeconds: number;
  readonly quantileRelativeError: number;
  /** Unix time in seconds of each snapshot returned. */
  readonly t: number[];
  readonly models: ModelData[];
  /** Per-tenant metering's table over the quantile window (now, not per snapshot); empty when off. */
  readonly tenants: TenantRow[];
  /** Goodput's attainment per model and per tenant over the quantile window; absent without an SLO. */
  readonly goodput?: DashboardGoodputData;
  /** Chargeback (INFERMETER_PRICES_FILE): each tenant's cost since the start, `idle` included, in the currency (exact decimals); absent without prices. */
  readonly cost?: DashboardCost;
}

export interface DashboardFeed {
  /** Takes one snapshot now (the timer does every interval; tests call it). */
  snapshot(): void;
  /** Snapshots newer than `since` (all kept ones when undefined), with rates and quantiles. */
  data(since?: number): DashboardData;
  /** Notes that someone is watching: snapshots then wait for beforeSnapshot. */
  watched(): void;
  /** Snapshots every interval (aligned to wall-clock seconds) until stop(). */
  start(): void;
  stop(): void;
}

// Columns of a model's row.
const RECEIVED = 0;
const SUCCESS = 1;
const FAILED = 2;
const CANCELLED = 3;
const PROMPT = 4;
const GENERATION = 5;
const WAITING = 6;
const RUNNING = 7;
const ENGINE_IN_FLIGHT = 8;
const KV = 9;
const TTFT = 10; // p50, p90, p99
const TPOT = 13;
const CLIENT_ERRORS = 16;
const STREAMS = 17;
const COLUMNS = 18;
/** Where each lifetime count of `counts` goes in a row. */
const COUNT_COLUMNS = [RECEIVED, SUCCESS, FAILED, CANCELLED, PROMPT, GENERATION, CLIENT_ERRORS, STREAMS];
const QUANTILES = [0.5, 0.9, 0.99];
const WATCH_MS = 30_000;

interface ModelSeries {
  readonly ttft: QuantileWindow;
  readonly tpot: QuantileWindow;
  /** Allocated when the model is first active; released after a whole retention idle. */
  rows: Float64Array | undefined;
  /** First snapshot with a row. */
  firstSeq: number;
  lastActiveSeq: number;
}

/** Per model, beside the recorder's counts: client errors, and streams that showed a token. */
type Extra = [clientErrors: number, streams: number];
const NONE: Extra = [0, 0];

const counts = (m: ModelState, extra: Extra): number[] => [
  m.received,
  m.success,
  m.failed,
  m.cancelledBeforeFirstToken + m.cancelledDecoding,
  m.promptTokens,
  m.generationTokens,
  ...extra,
];

/** Six significant digits: plenty for a chart, and short JSON. */
const round = (v: number): number | null => (Number.isFinite(v) ? Number(v.toPrecision(6)) : null);

export function createDashboardFeed(options: DashboardFeedOptions): DashboardFeed {
  const { metrics } = options;
  const { state } = metrics;
  const wall = options.wallClock ?? Date.now;
  const intervalSeconds = options.intervalSeconds ?? 1;
  const retentionSeconds = options.retentionSeconds ?? 600;
  const size = Math.max(2, Math.round(retentionSeconds / intervalSeconds));
  const rateWindowSeconds = options.rateWindowSeconds ?? 10;
  const rateTicks = Math.max(1, Math.round(rateWindowSeconds / intervalSeconds));
  const quantileWindowSeconds = options.quantileWindowSeconds ?? 60;
  const windowOptions = { windowSeconds: quantileWindowSeconds, slotSeconds: options.quantileSlotSeconds ?? 5 };
  const tenants = createDashboardTenants(metrics, state.clock, windowOptions);
  const goodput = metrics.goodput === undefined ? undefined : createDashboardGoodput(metrics.goodput, state.clock, windowOptions);

  const wallTimes = new Float64Array(size);
  const monoTimes = new Float64Array(size);
  let seq = 0; // snapshots taken; the newest is number seq, at seq % size
  const series = new Map<string, ModelSeries>();
  /** Each model's counts at the last snapshot that saw it, so that a model becoming active again starts from them. */
  const lastCounts = new Map<string, number[]>();
  /** Keyed by the recorder's model labels: bounded as they are. */
  const extras = new Map<string, Extra>();

  const seriesOf = (model: string): ModelSeries => {
    let s = series.get(model);
    if (s === undefined) {
      s = { ttft: createQuantileWindow(windowOptions), tpot: createQuantileWindow(windowOptions), rows: undefined, firstSeq: 0, lastActiveSeq: 0 };
      series.set(model, s);
    }
    return s;
  };

  metrics.addObserver({
    firstOutput(info, ttft) {
      if (ttft !== undefined) seriesOf(info.model).ttft.add(state.clock(), ttft);
    },
    finished(sample) {
      if (sample.tpot !== undefined) seriesOf(sample.model).tpot.add(state.clock(), sample.tpot.seconds, sample.tpot.tokens);
      const clientError = sample.outcome === 'failed' && isClientError(sample.status);
      if (!clientError && sample.ttft === undefined) return;
      let extra = extras.get(sample.model);
      if (extra === undefined) extras.set(sample.model, (extra = [0, 0]));
      if (clientError) extra[0]++;
      if (sample.ttft !== undefined) extra[1]++;
    },
  });

  const oldestSeq = (): number => Math.max(1, seq - size + 1);

  function snapshot(): void {
    seq++;
    const at = seq % size;
    wallTimes[at] = wall();
    const now = state.clock();
    monoTimes[at] = now;
    const engine = metrics.engineView();
    const engineWaiting = engine?.values.get('num_requests_waiting');
    const engineRunning = engine?.values.get('num_requests_running');
    const kv = engine?.values.get('npu_cache_usage_perc');
    for (const m of state.models.values()) {
      const now6 = counts(m, extras.get(m.model) ?? NONE);
      const before = lastCounts.get(m.model);
      lastCounts.set(m.model, now6);
      let s = series.get(m.model);
      const changed = before === undefined || now6.some((v, i) => v !== before[i]);
      const inFlight = m.waiting + m.running > 0;
      const sampled = s !== undefined && (s.ttft.weight(now) > 0 || s.tpot.weight(now) > 0);
      const active = changed || inFlight || sampled;
      if (s?.rows === undefined) {
        if (!active) continue;
        s ??= seriesOf(m.model);
        s.rows = new Float64Array(size * COLUMNS).fill(Number.NaN);
        s.firstSeq = seq;
        // The counts before this snapshot (zero for a model new since the last one), so that the
        // first interval's requests are in the rates.
        if (seq > 1) {
          const prev = ((seq - 1) % size) * COLUMNS;
          COUNT_COLUMNS.forEach((column, i) => {
            s!.rows![prev + column] = before?.[i] ?? 0;
          });
          s.firstSeq = seq - 1;
        }
      }
      if (active) s.lastActiveSeq = seq;
      const row = at * COLUMNS;
      const rows = s.rows;
      for (let i = 0; i < COUNT_COLUMNS.length; i++) rows[row + COUNT_COLUMNS[i]!] = now6[i]!;
      const w = engineWaiting?.get(m.model);
      const r = engineRunning?.get(m.model);
      rows[row + WAITING] = w ?? m.waiting;
      rows[row + RUNNING] = r ?? m.running;
      rows[row + ENGINE_IN_FLIGHT] = w !== undefined || r !== undefined ? 1 : 0;
      rows[row + KV] = kv?.get(m.model) ?? Number.NaN;
      s.ttft.quantiles(now, QUANTILES).forEach((v, i) => {
        rows[row + TTFT + i] = v;
      });
      s.tpot.quantiles(now, QUANTILES).forEach((v, i) => {
        rows[row + TPOT + i] = v;
      });
      if (s.firstSeq < oldestSeq()) s.firstSeq = oldestSeq();
      // Idle for the whole retention: nothing left to plot.
      if (seq - s.lastActiveSeq >= size) series.delete(m.model);
    }
  }

  function data(since?: number): DashboardData {
    const oldest = oldestSeq();
    const full = since === undefined || !Number.isInteger(since) || since < oldest - 1 || since > seq;
    const from = full ? oldest : since + 1;
    const t: number[] = [];
    for (let k = from; k <= seq; k++) t.push(Math.round(wallTimes[k % size]!) / 1000);
    const models: ModelData[] = [];
    for (const [model, s] of [...series].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const rows = s.rows;
      if (rows === undefined) continue;
      const first = Math.max(s.firstSeq, oldest);
      const out = Object.fromEntries(SERIES.map((name) => [name, [] as Array<number | null>])) as Record<SeriesName, Array<number | null>>;
      const value = (k: number, column: number): number => rows[(k % size) * COLUMNS + column]!;
      for (let k = from; k <= seq; k++) {
        if (k < first) {
          for (const name of SERIES) out[name].push(null);
          continue;
        }
        // Rates: the increase of each count over the last rateWindowSeconds (less while the series is younger).
        const j = Math.max(first, k - rateTicks);
        const seconds = (monoTimes[k % size]! - monoTimes[j % size]!) / 1000;
        const rate = (column: number): number | null => (j === k || !(seconds > 0) ? null : round((value(k, column) - value(j, column)) / seconds));
        out.requests.push(rate(RECEIVED));
        // Finished and its parts come from the same counts over the same window, so they cannot
        // disagree (a received rate can: requests arrive before the window and finish in it).
        const done = (x: number): number => value(x, SUCCESS) + value(x, FAILED) + value(x, CANCELLED);
        const finishedInWindow = done(k) - done(j);
        out.finished.push(j === k || !(seconds > 0) ? null : round(finishedInWindow / seconds));
        // The service's failures and the clients' 4xx apart: a client's mistake is no alarm.
        const clientErrors = value(k, CLIENT_ERRORS) - value(j, CLIENT_ERRORS);
        const share = (n: number): number | null => (j === k || !(finishedInWindow > 0) ? null : round(n / finishedInWindow));
        out.failedShare.push(share(value(k, FAILED) - value(j, FAILED) - clientErrors));
        out.clientErrorShare.push(share(clientErrors));
        out.success.push(rate(SUCCESS));
        const failed = rate(FAILED);
        const clientRate = rate(CLIENT_ERRORS);
        out.failed.push(failed === null || clientRate === null ? null : round(failed - clientRate));
        out.clientErrors.push(clientRate);
        out.cancelled.push(rate(CANCELLED));
        out.promptTokens.push(rate(PROMPT));
        out.generationTokens.push(rate(GENERATION));
        out.waiting.push(round(value(k, WAITING)));
        out.running.push(round(value(k, RUNNING)));
        out.kvCache.push(round(value(k, KV)));
        out.ttftP50.push(round(value(k, TTFT)));
        out.ttftP90.push(round(value(k, TTFT + 1)));
        out.ttftP99.push(round(value(k, TTFT + 2)));
        out.tpotP50.push(round(value(k, TPOT)));
        out.tpotP90.push(round(value(k, TPOT + 1)));
        out.tpotP99.push(round(value(k, TPOT + 2)));
      }
      const newest = (column: number): number => (seq >= first ? value(seq, column) : 0);
      models.push({
        model,
        totals: {
          received: newest(RECEIVED),
          success: newest(SUCCESS),
          failed: newest(FAILED),
          cancelled: newest(CANCELLED),
          promptTokens: newest(PROMPT),
          generationTokens: newest(GENERATION),
          clientErrors: newest(CLIENT_ERRORS),
          streams: newest(STREAMS),
        },
        inFlightSource: seq >= first && value(seq, ENGINE_IN_FLIGHT) === 1 ? 'engine' : 'proxy',
        series: out,
      });
    }
    return {
      seq,
      full,
      intervalSeconds,
      retentionSeconds: size * intervalSeconds,
      rateWindowSeconds: rateTicks * intervalSeconds,
      quantileWindowSeconds,
      quantileRelativeError: Number(MAX_RELATIVE_ERROR.toPrecision(3)),
      t,
      models,
      tenants: tenants.rows(state.clock()),
      ...(goodput === undefined ? {} : { goodput: goodput.data(state.clock()) }),
      ...costData(options.metrics),
    };
  }

  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let watchedUntil = Number.NEGATIVE_INFINITY;
  const intervalMs = intervalSeconds * 1000;
  const schedule = (): void => {
    timer = setTimeout(
      () =>
        void tick().catch((error: unknown) => {
          options.onError?.(error);
          if (running) schedule();
        }),
      intervalMs - (wall() % intervalMs),
    );
    timer.unref();
  };
  async function tick(): Promise<void> {
    if (options.beforeSnapshot !== undefined && state.clock() < watchedUntil) {
      try {
        await options.beforeSnapshot();
      } catch {
        // a flush that fails leaves the batched events to the next snapshot
      }
    }
    if (!running) return;
    snapshot();
    schedule();
  }

  return {
    snapshot,
    data,
    watched: () => (watchedUntil = state.clock() + WATCH_MS),
    start() {
      if (running) return;
      running = true;
      schedule();
    },
    stop() {
      running = false;
      clearTimeout(timer);
    },
  };
}
