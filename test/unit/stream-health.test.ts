// Stream health on a fake clock: the longest silence between the batches relayed to a client
// (the client's refused time left out, a cut stream's silence before its end counted), the
// back-pressure added up, the stall counter at INFERMETER_STALL_SECONDS, per tenant too; across
// the worker bus unchanged. And TTFT by prompt band (INFERMETER_PROMPT_BANDS).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createWorkerBus, createWorkerReceiver, type WorkerMessage } from '../../src/cluster/bus.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createRequestTimer, type MeasurementSink } from '../../src/measure/request-timer.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { StreamHealth } from '../../src/measure/stream-health.ts';
import { createMetrics, type MetricsOptions } from '../../src/metrics/metrics.ts';
import { promptBand } from '../../src/metrics/own/prompt-band-families.ts';
import { parseExposition } from '../helpers/exposition.ts';

const clock = { now: 0 };

function metricsWith(options: Partial<MetricsOptions> = {}) {
  return createMetrics({
    clock: () => clock.now,
    throughputWindowSeconds: 10,
    version: 'test',
    dialects: ['mindie'],
    buckets: {},
    aom: { periodSeconds: 30, labels: {} },
    ...options,
  });
}

/** One streamed request: batches arriving at `batches` (ms), the client refusing writes over `refused` ([from, to] ms). */
function stream(
  sink: MeasurementSink,
  batches: number[],
  refused: Array<[number, number]> = [],
  end: 'success' | 'cancelled' = 'success',
  endAt?: number,
  tenant?: string,
) {
  const timer = createRequestTimer('chat', () => clock.now, sink, tenant, 0);
  // As the exchange keeps it (data-plane/exchange.ts): batches at their arrival, refusals at the clock.
  const health = new StreamHealth();
  timer.identify('m', true);
  clock.now = 1;
  timer.responseHeaders(200, true);
  const events = [
    ...batches.map((at) => ({ at, kind: 'batch' as const })),
    ...refused.flatMap(([a, b]) => [
      { at: a, kind: 'on' as const },
      { at: b, kind: 'off' as const },
    ]),
  ].sort((x, y) => x.at - y.at);
  for (const e of events) {
    if (e.at === Number.POSITIVE_INFINITY) continue; // still refused at the end
    clock.now = e.at;
    if (e.kind === 'batch') {
      health.batch(e.at);
      timer.chunkArrived(e.at);
      timer.responseBody(e.at);
      timer.tokenEvent();
    } else health.backpressure(e.kind === 'on', clock.now);
  }
  timer.usage({ promptTokens: 10, completionTokens: batches.length });
  clock.now = endAt ?? clock.now;
  if (end === 'success') timer.responseFinished();
  return timer.close(end === 'success', health)!;
}

describe('stream health', () => {
  it("is each stream's longest silence, less the time its client refused writes", () => {
    const sink: MeasurementSink = { started() {}, firstOutput() {}, finished() {} };
    assert.equal(stream(sink, [100, 200, 2300, 2400]).longestGap, 2.1);
    // Refused from 200 to 2200: of the 2.1 s before the next batch, 0.1 s was the stream's.
    const slow = stream(sink, [100, 200, 2300, 2400], [[200, 2200]]);
    assert.equal(slow.longestGap, 0.1);
    assert.equal(slow.backpressure, 2);
    // TTFT ends at the first token's arrival: what the client refused later does not move it.
    assert.equal(slow.ttft, 0.1);
    // A stream the client left after 5 s of silence: that silence counts.
    assert.equal(stream(sink, [100, 200], [], 'cancelled', 5200).longestGap, 5);
    // Refused until 10 s, then silent until the client left at 12 s: 2 s of the stream's own.
    const late = stream(sink, [100, 200], [[200, 10_000]], 'cancelled', 12_000);
    assert.equal(late.backpressure, 9.8);
    assert.equal(late.longestGap, 2);
    // A client that left while refusing writes: refused until it left, and not the stream's silence.
    const gone = stream(sink, [100, 200], [[200, Number.POSITIVE_INFINITY]], 'cancelled', 12_000);
    assert.equal(gone.backpressure, 11.8);
    assert.equal(gone.longestGap, 0.1);
    // No batch relayed, or not a stream: no gap; back-pressure 0.
    const timer = createRequestTimer('chat', () => clock.now, sink, undefined, 0);
    timer.identify('m', false);
    timer.responseHeaders(200, false);
    const health = new StreamHealth();
    health.batch(10);
    timer.chunkArrived(10);
    timer.responseBody(10);
    const json = timer.close(true, health)!;
    assert.equal(json.longestGap, undefined);
    assert.equal(json.backpressure, 0);
  });

  it('counts a stall at INFERMETER_STALL_SECONDS, per model and per tenant, and crosses the worker bus unchanged', async () => {
    const config = loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:1', INFERMETER_STALL_SECONDS: '2' }, {});
    assert.equal(config.stallSeconds, 2);
    assert.equal(loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:1' }, {}).stallSeconds, 30);
    assert.throws(() => loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:1', INFERMETER_STALL_SECONDS: '0' }, {}), /INFERMETER_STALL_SECONDS/);
    const metrics = metricsWith({ stallSeconds: config.stallSeconds, tenants: { max: 5, aliases: { current: () => new Map(), onChange: () => {} } } });
    const received: RequestSample[] = [];
    metrics.addObserver({ finished: (s) => void received.push(s) });
    // A worker's timers, their events cloned as the IPC channel clones them.
    const messages: WorkerMessage[] = [];
    const bus = createWorkerBus(
      (m) => messages.push(structuredClone(m)),
      () => 0,
    );
    const receiver = createWorkerReceiver(metrics.sink, metrics.proxy, metrics.modelLabel, metrics.tenantLabel);
    const sent = [
      stream(bus.sink, [100, 2100], [], 'success', undefined, 'acme'), // a silence of exactly 2 s: a stall
      stream(bus.sink, [100, 1000, 2000], [[1000, 1900]], 'success', undefined, 'acme'), // refused 0.9 s: no stall
      stream(bus.sink, [100], [], 'cancelled', 3100, 'beta'), // left after 3 s of silence: a stall
    ];
    bus.flush();
    for (const m of messages) if (m.t === 'events') receiver.receive(m.events);
    assert.deepEqual(
      received.map((s) => [s.longestGap, s.backpressure]),
      sent.map((s) => [s.longestGap, s.backpressure]),
    );
    const x = parseExposition(await metrics.render());
    assert.equal(x.value('infermeter_stream_stalls_total', { model_name: 'm' }), 2);
    assert.equal(x.value('infermeter_stream_longest_gap_seconds_count', { model_name: 'm' }), 3);
    assert.equal(x.value('infermeter_stream_longest_gap_seconds_bucket', { model_name: 'm', le: '1' }), 1);
    assert.equal(x.value('infermeter_client_backpressure_seconds_count', { model_name: 'm' }), 3);
    assert.ok(Math.abs(x.value('infermeter_client_backpressure_seconds_sum', { model_name: 'm' })! - 0.9) < 1e-9);
    assert.equal(x.value('infermeter_tenant_stream_stalls_total', { tenant: 'acme', model_name: 'm' }), 1);
    assert.equal(x.value('infermeter_tenant_stream_stalls_total', { tenant: 'beta', model_name: 'm' }), 1);
    assert.ok(Math.abs(x.value('infermeter_tenant_client_backpressure_seconds_total', { tenant: 'acme', model_name: 'm' })! - 0.9) < 1e-9);
    metrics.close();
  });
});

describe('TTFT by prompt band (INFERMETER_PROMPT_BANDS)', () => {
  it('bands the prompt tokens at 1k, 8k and 32k (k = 1024)', () => {
    assert.deepEqual([undefined, 0, 1023, 1024, 8191, 8192, 32767, 32768, 65536].map(promptBand), [
      'unknown',
      '<1k',
      '<1k',
      '1k-8k',
      '1k-8k',
      '8k-32k',
      '8k-32k',
      '>32k',
      '>32k',
    ]);
  });

  it("observes each stream's TTFT at its end under its usage's band, unknown without usage; off by default", async () => {
    assert.equal(loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:1' }, {}).promptBands, false);
    assert.equal(loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:1', INFERMETER_PROMPT_BANDS: 'on' }, {}).promptBands, true);
    const off = metricsWith();
    assert.doesNotMatch(await off.render(), /prompt_band/);
    off.close();
    const metrics = metricsWith({ promptBands: true });
    const run = (ttftMs: number, promptTokens: number | undefined) => {
      const timer = createRequestTimer('chat', () => clock.now, metrics.sink, undefined, 0);
      timer.identify('m', true);
      timer.responseHeaders(200, true);
      timer.responseBody(ttftMs);
      timer.tokenEvent();
      if (promptTokens !== undefined) timer.usage({ promptTokens, completionTokens: 1 });
      timer.responseFinished();
      timer.close(true);
    };
    run(200, 500);
    run(3000, 40_000);
    run(4000, 60_000);
    run(300, undefined); // a stream without usage: the spec's 0 is no size
    const x = parseExposition(await metrics.render());
    const count = (band: string) => x.value('infermeter_time_to_first_token_by_prompt_band_seconds_count', { model_name: 'm', prompt_band: band });
    assert.deepEqual(['<1k', '1k-8k', '8k-32k', '>32k', 'unknown'].map(count), [1, undefined, undefined, 2, 1]);
    assert.equal(x.value('infermeter_time_to_first_token_by_prompt_band_seconds_sum', { model_name: 'm', prompt_band: '>32k' }), 7);
    metrics.close();
  });
});
