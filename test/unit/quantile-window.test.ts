// The live dashboard's server side: the sliding quantile window (log buckets, bounded relative
// error, exact at the window's extremes) and the per-model snapshot ring (rates from counts,
// quantiles, in-flight and KV cache, `since`, retention, idle models released), on fake clocks.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EngineView } from '../../src/engine/engine-scraper.ts';
import { createDashboardFeed, type DashboardData } from '../../src/management/dashboard-feed.ts';
import { BUCKETS, bucketOf, bucketValue, createQuantileWindow, MAX_RELATIVE_ERROR, MIN_VALUE } from '../../src/metrics/windows/quantile-window.ts';
import type { RequestInfo, RequestSample } from '../../src/measure/sample.ts';
import { createRecorder } from '../../src/metrics/state/recorder.ts';
import { seededRandom } from '../helpers/random.ts';

const MID = 2 ** (1 / 16); // a bucket's geometric midpoint over its lower edge

describe('dashboard quantile window', () => {
  it('buckets values on a log scale, 8 per octave, clamped at both ends', () => {
    assert.equal(BUCKETS, 192);
    assert.equal(bucketOf(MIN_VALUE), 0);
    assert.equal(bucketOf(0), 0);
    assert.equal(bucketOf(1), 14 * 8);
    assert.equal(bucketOf(0.5), 13 * 8);
    assert.equal(bucketOf(0.5 * 2 ** (3 / 8) * 1.0001), 13 * 8 + 3);
    assert.equal(bucketOf(1024), BUCKETS - 1);
    assert.equal(bucketOf(1e9), BUCKETS - 1);
    assert.equal(bucketValue(14 * 8), MID);
    assert.equal(MAX_RELATIVE_ERROR, MID - 1);
    assert.ok(Math.abs(MAX_RELATIVE_ERROR - 0.0443) < 1e-4);
  });

  it('reads nearest-rank quantiles as their bucket midpoint, within the smallest and largest value', () => {
    const w = createQuantileWindow();
    assert.deepEqual(w.quantiles(0, [0.5]), [Number.NaN]);
    for (let k = 10; k >= 1; k--) w.add(1000, 2 ** -k); // 2^-10 .. 2^-1, each at a bucket's lower edge
    assert.equal(w.weight(1000), 10);
    // p50: the 5th smallest (2^-6); p90: the 9th (2^-2); p99: the 10th, 2^-1, whose midpoint is above the largest value.
    assert.deepEqual(w.quantiles(1000, [0.5, 0.9, 0.99]), [2 ** -6 * MID, 2 ** -2 * MID, 0.5]);
    assert.deepEqual(w.quantiles(1000, [0.1, 0, 1]), [2 ** -10 * MID, 2 ** -10, 0.5], 'p0 and p100 are the extremes, exactly');
  });

  it('is exact for a window of equal values, and weights whole numbers (TPOT per token)', () => {
    const w = createQuantileWindow();
    w.add(0, 0.037);
    assert.deepEqual(w.quantiles(0, [0.5, 0.9, 0.99]), [0.037, 0.037, 0.037]);
    const t = createQuantileWindow();
    t.add(0, 2 ** -7, 99);
    t.add(0, 1, 1);
    assert.equal(t.weight(0), 100);
    // 99 of 100 at 2^-7: p50 and p99 fall there; p99.5 is the 100th, clamped to the largest value 1.
    assert.deepEqual(t.quantiles(0, [0.5, 0.99, 0.995]), [2 ** -7 * MID, 2 ** -7 * MID, 1]);
    t.add(0, 5, 0);
    t.add(0, Number.NaN);
    assert.equal(t.weight(0), 100, 'no weight and no number are not counted');
  });

  it('slides in slot steps: a value leaves the window a window after its slot began', () => {
    const w = createQuantileWindow({ windowSeconds: 60, slotSeconds: 5 });
    w.add(0, 0.25);
    w.add(4_999, 0.5);
    w.add(5_000, 1);
    assert.equal(w.weight(59_999), 3);
    assert.deepEqual(w.quantiles(59_999, [0, 1]), [0.25, 1]);
    assert.equal(w.weight(60_000), 1, 'the first slot (0 to 5 s) has left');
    assert.deepEqual(w.quantiles(60_000, [0, 0.5, 1]), [1, 1, 1], 'the smallest value left with it');
    w.add(1_000, 0.125); // a clock that went back past the window: not counted
    assert.equal(w.weight(60_000), 1);
    assert.deepEqual(w.quantiles(10 * 60_000, [0.5]), [Number.NaN], 'a long silence empties it');
    w.add(10 * 60_000, 2);
    assert.deepEqual(w.quantiles(10 * 60_000, [0.5]), [2]);
  });

  it('stays within its stated relative error of the exact nearest-rank quantiles', () => {
    const random = seededRandom(11);
    const w = createQuantileWindow();
    const values: number[] = [];
    for (let i = 0; i < 5000; i++) {
      const v = 0.001 * Math.exp(random() * 9); // 1 ms .. 8 s, log-uniform
      values.push(v);
      w.add(30_000, v);
    }
    values.sort((a, b) => a - b);
    const qs = [0.01, 0.25, 0.5, 0.9, 0.99, 0.999];
    const read = w.quantiles(30_000, qs);
    for (const [i, q] of qs.entries()) {
      const exact = values[Math.max(0, Math.ceil(q * values.length) - 1)]!;
      assert.ok(Math.abs(read[i]! - exact) / exact <= MAX_RELATIVE_ERROR + 1e-12, `q=${q}: ${read[i]} vs ${exact}`);
    }
  });
});

// ---------------------------------------------------------------------------------------------

const info = (model: string): RequestInfo => ({ api: 'chat', model, stream: true });

function sample(model: string, fields: Partial<RequestSample>): RequestSample {
  return {
    ...info(model),
    status: 200,
    outcome: 'success',
    failure: undefined,
    cancelPhase: undefined,
    ttfb: 0.1,
    streamed: true,
    outputSeen: true,
    ttft: undefined,
    lastToken: undefined,
    e2e: 1,
    tpot: undefined,
    promptTokens: undefined,
    completionTokens: undefined,
    usageSource: 'upstream',
    tokenEvents: 0,
    finishReason: undefined,
    ...fields,
  } as RequestSample;
}

function harness(options: { retentionSeconds?: number; rateWindowSeconds?: number; quantileWindowSeconds?: number; quantileSlotSeconds?: number } = {}) {
  let now = 0;
  let engine: EngineView | undefined;
  const recorder = createRecorder(() => now, 10);
  const feed = createDashboardFeed({
    metrics: { state: recorder.state, engineView: () => engine, addObserver: recorder.addObserver },
    wallClock: () => 1_700_000_000_000 + now,
    ...options,
  });
  return {
    sink: recorder.sink,
    feed,
    at: (ms: number) => (now = ms),
    engine: (values: Record<string, Record<string, number>>) => {
      engine = {
        engine: 'vllm',
        values: new Map(Object.entries(values).map(([family, byModel]) => [family, new Map(Object.entries(byModel))])),
        remainBlocks: undefined,
        counters: new Map(),
        mindieJson: undefined,
      } as unknown as EngineView;
    },
  };
}

const model = (d: DashboardData, name: string) => {
  const m = d.models.find((x) => x.model === name);
  assert.ok(m, `model ${name} in ${d.models.map((x) => x.model).join(', ')}`);
  return m;
};

describe('dashboard snapshot ring', () => {
  it('turns counts into rates, and reads in-flight, KV cache and quantiles per snapshot', () => {
    const h = harness({ rateWindowSeconds: 2 });
    h.feed.snapshot(); // #1 at 0 s: no model yet
    let d = h.feed.data();
    assert.deepEqual({ seq: d.seq, full: d.full, t: d.t, models: d.models }, { seq: 1, full: true, t: [1_700_000_000], models: [] });
    assert.deepEqual([d.intervalSeconds, d.retentionSeconds, d.rateWindowSeconds, d.quantileWindowSeconds, d.quantileRelativeError], [1, 600, 2, 60, 0.0443]);

    h.at(200);
    for (let i = 0; i < 3; i++) h.sink.started(info('m'));
    h.sink.firstOutput(info('m'), 0.25);
    h.sink.firstOutput(info('m'), 0.5);
    h.at(700);
    for (let i = 0; i < 2; i++) h.sink.finished(sample('m', { ttft: 0.25, tpot: { seconds: 0.125, tokens: 3 }, promptTokens: 10, completionTokens: 4 }));
    h.at(1000);
    h.feed.snapshot(); // #2: m is new since #1, so its counts before #2 were zero
    d = h.feed.data();
    const m = model(d, 'm');
    assert.deepEqual(d.t, [1_700_000_000, 1_700_000_001]);
    assert.deepEqual(m.totals, { received: 3, success: 2, failed: 0, cancelled: 0, promptTokens: 20, generationTokens: 8, clientErrors: 0, streams: 2 });
    assert.equal(m.inFlightSource, 'proxy');
    const p50 = Number((0.25 * MID).toPrecision(6));
    assert.deepEqual(m.series, {
      requests: [null, 3],
      finished: [null, 2],
      success: [null, 2],
      failed: [null, 0],
      clientErrors: [null, 0],
      cancelled: [null, 0],
      failedShare: [null, 0],
      clientErrorShare: [null, 0],
      promptTokens: [null, 20],
      generationTokens: [null, 8],
      waiting: [null, 1],
      running: [null, 0],
      kvCache: [null, null],
      ttftP50: [null, p50], // 0.25 and 0.5: p50 is 0.25's bucket midpoint
      ttftP90: [null, 0.5], // 0.5's midpoint, clamped to the largest value
      ttftP99: [null, 0.5],
      tpotP50: [null, 0.125], // one value (3 tokens): exact
      tpotP90: [null, 0.125],
      tpotP99: [null, 0.125],
    });

    h.at(1500);
    h.sink.finished(sample('m', { outcome: 'failed', failure: 'upstream_status', status: 500, outputSeen: false, e2e: undefined, streamed: false }));
    h.sink.started(info('n'));
    h.engine({ num_requests_waiting: { m: 7 }, npu_cache_usage_perc: { m: 0.25, other: 0.5 } });
    h.at(2000);
    h.feed.snapshot(); // #3
    d = h.feed.data(2);
    assert.equal(d.full, false);
    assert.deepEqual(d.t, [1_700_000_002]);
    const m3 = model(d, 'm');
    // Over the rate window (2 snapshots back: #1, where m's counts were zero): 3 received, 2 success, 1 failed in 2 s.
    assert.deepEqual([m3.series.requests, m3.series.success, m3.series.failed], [[1.5], [1], [0.5]]);
    assert.deepEqual([m3.series.finished, m3.series.failedShare], [[1.5], [0.333333]], '3 finished, 1 of them failed');
    assert.deepEqual([m3.series.waiting, m3.series.running, m3.series.kvCache], [[7], [0], [0.25]], "the engine's waiting count and KV cache");
    assert.equal(m3.inFlightSource, 'engine');
    const n = model(d, 'n');
    assert.deepEqual([n.series.requests, n.series.waiting], [[1], [1]], 'n came after #2: it starts from zero there');
    assert.deepEqual(h.feed.data().models.find((x) => x.model === 'n')!.series.requests, [null, null, 1]);

    assert.equal(h.feed.data(3).t.length, 0, 'nothing newer than #3');
    assert.equal(h.feed.data(0).full, false, 'since 0: everything kept, incrementally');
    assert.equal(h.feed.data(99).full, true, 'a seq from another run: everything');
  });

  it("keeps the clients' 4xx apart from the service's failures (issue 52)", () => {
    const h = harness({ rateWindowSeconds: 2 });
    h.feed.snapshot();
    h.at(200);
    for (let i = 0; i < 4; i++) h.sink.started(info('m'));
    const failed = { outcome: 'failed', failure: 'upstream_status', outputSeen: false, e2e: undefined, streamed: false } as const;
    h.sink.finished(sample('m', { ...failed, status: 404 }));
    h.sink.finished(sample('m', { ...failed, status: 404 }));
    h.sink.finished(sample('m', { ...failed, status: 429 })); // the server's refusal (failure-classes.ts), not the client's mistake
    h.sink.finished(sample('m', { promptTokens: 1, completionTokens: 1 }));
    h.at(1000);
    h.feed.snapshot();
    const m = model(h.feed.data(), 'm');
    assert.deepEqual(m.totals.failed, 3);
    assert.deepEqual(m.totals.clientErrors, 2);
    assert.deepEqual(
      [m.series.failed, m.series.clientErrors, m.series.failedShare, m.series.clientErrorShare],
      [
        [null, 1],
        [null, 2],
        [null, 0.25],
        [null, 0.5],
      ],
    );
  });

  it('gives rates that cannot disagree (success never above finished) and no failed share where nothing finished', () => {
    const h = harness({ rateWindowSeconds: 2 });
    h.feed.snapshot(); // #1 at 0 s
    h.at(100);
    for (let i = 0; i < 6; i++) h.sink.started(info('m')); // all received in the first second
    for (let k = 1; k <= 8; k++) {
      h.at(k * 1000);
      // Two finish a second from 3 s on: long after they were received.
      if (k >= 3 && k <= 5) for (let i = 0; i < 2; i++) h.sink.finished(sample('m', {}));
      h.feed.snapshot();
    }
    const m = model(h.feed.data(), 'm');
    for (const [i, success] of m.series.success.entries()) {
      const finished = m.series.finished[i];
      if (success === null) continue;
      assert.ok(finished != null && success <= finished, `snapshot ${i}: success ${success}/s <= finished ${finished}/s`);
    }
    // Received/s, the arrival rate, reads 0 while requests finish: the reason the page plots finished.
    assert.deepEqual(m.series.requests.slice(4, 7), [0, 0, 0]);
    assert.deepEqual(m.series.success.slice(4, 7), [2, 2, 1]);
    assert.deepEqual(m.series.finished.slice(4, 7), [2, 2, 1]);
    // Nothing finished in the window (before 3 s, and after 7 s): no share, not 0 %.
    assert.deepEqual(m.series.failedShare, [null, null, null, 0, 0, 0, 0, null, null]);
  });

  it('keeps the retention only, and releases a model idle for the whole of it', () => {
    const h = harness({ retentionSeconds: 4, rateWindowSeconds: 1, quantileWindowSeconds: 2, quantileSlotSeconds: 1 });
    h.sink.started(info('m'));
    h.sink.firstOutput(info('m'), 0.25);
    h.sink.finished(sample('m', { ttft: 0.25, completionTokens: 1 }));
    let second = 0;
    const tick = (): DashboardData => {
      h.at(++second * 1000);
      h.feed.snapshot();
      return h.feed.data();
    };
    let d = tick(); // #1 at 1 s: TTFT sample still in the 2 s window
    assert.deepEqual(model(d, 'm').series.ttftP50, [0.25]);
    d = tick(); // #2 at 2 s: the sample's slot (0 s) has left
    assert.deepEqual(model(d, 'm').series.ttftP50, [0.25, null]);
    d = tick(); // #3
    d = tick(); // #4
    assert.deepEqual(
      d.t,
      [1, 2, 3, 4].map((s) => 1_700_000_000 + s),
    );
    assert.deepEqual(model(d, 'm').series.requests, [null, 0, 0, 0]);
    d = tick(); // #5: the ring keeps 4 (#2..#5), all idle since #1: released
    assert.deepEqual(d.models, []);
    assert.deepEqual(
      d.t,
      [2, 3, 4, 5].map((s) => 1_700_000_000 + s),
    );
    h.sink.started(info('m'));
    d = tick(); // #6: active again, from its last counts (1 received), not from zero
    assert.deepEqual(
      d.t,
      [3, 4, 5, 6].map((s) => 1_700_000_000 + s),
    );
    assert.deepEqual(model(d, 'm').series.requests, [null, null, null, 1]);
    assert.deepEqual(model(d, 'm').series.waiting, [null, null, null, 1]);
    assert.equal(model(d, 'm').totals.received, 2);
  });
});
