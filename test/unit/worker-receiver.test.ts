// The primary's side of the worker bus: what a worker had in flight when it died, waiting for
// its first output or running, is finished as failed (worker_exit), so no gauge keeps it forever.
// Driven through the worker's own bus and request timers over a fake clock; no process dies.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createWorkerBus, createWorkerReceiver, type WorkerMessage } from '../../src/cluster/bus.ts';
import { createRequestTimer } from '../../src/measure/request-timer.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { createMetrics } from '../../src/metrics/metrics.ts';
import { parseExposition } from '../helpers/exposition.ts';

describe('worker receiver', () => {
  it('gives a tenant its place only when the engine accepted a request, over the bus, and keeps in-flight counts right when it gets one mid-request', async () => {
    const clock = { now: 0 };
    const metrics = createMetrics({
      clock: () => clock.now,
      throughputWindowSeconds: 10,
      version: 'test',
      dialects: ['mindie'],
      buckets: {},
      aom: { periodSeconds: 30, labels: {} },
      tenants: { max: 5, aliases: { current: () => new Map(), onChange: () => {} } },
    });
    const finished: RequestSample[] = [];
    metrics.addObserver({ finished: (s) => void finished.push(s) });
    const messages: WorkerMessage[] = [];
    const bus = createWorkerBus(
      (m) => messages.push(m),
      () => 0,
    );
    const receiver = createWorkerReceiver(metrics.sink, metrics.proxy, metrics.modelLabel, metrics.tenantLabel);
    const deliver = () => {
      bus.flush();
      for (const m of messages.splice(0)) if (m.t === 'events') receiver.receive(m.events);
    };
    const start = (tenant: string) => {
      const timer = createRequestTimer('chat', () => clock.now, bus.sink, tenant);
      timer.identify('m', true);
      return timer;
    };
    // Both start before the tenant has a place; the first is accepted and gives it one.
    const first = start('acme');
    const second = start('acme');
    const refused = start('intruder');
    deliver();
    first.responseHeaders(200, true);
    first.responseBody();
    first.tokenEvent();
    refused.responseHeaders(401, false);
    refused.close(true);
    deliver();
    first.responseFinished();
    first.close(true);
    deliver();
    assert.deepEqual(
      finished.map((s) => [s.tenant, s.outcome]),
      [
        ['unauthenticated', 'failed'],
        ['acme', 'success'],
      ],
    );
    // The second, started when acme had no place, is lost with the worker: counted once, as acme's
    // now that it has one or under unauthenticated, never twice and never left in flight.
    assert.equal(receiver.lost(), 1);
    assert.equal(finished.length, 3);
    assert.equal(finished[2]!.failure, 'worker_exit');
    const x = parseExposition(await metrics.render());
    assert.equal(x.value('num_requests_waiting', { model_name: 'm' }), 0);
    assert.equal(x.value('num_requests_running', { model_name: 'm' }), 0);
    void second;
    metrics.close();
  });

  it("finishes a dead worker's waiting and running requests as failed, per model, and only those", async () => {
    const clock = { now: 0 };
    const metrics = createMetrics({
      clock: () => clock.now,
      throughputWindowSeconds: 10,
      version: 'test',
      dialects: ['mindie'],
      buckets: {},
      aom: { periodSeconds: 30, labels: {} },
    });
    const finished: RequestSample[] = [];
    metrics.addObserver({ finished: (s) => void finished.push(s) });
    const messages: WorkerMessage[] = [];
    const bus = createWorkerBus(
      (m) => messages.push(m),
      () => 0,
    );
    const receiver = createWorkerReceiver(metrics.sink, metrics.proxy, metrics.modelLabel);
    const request = (model: string) => {
      const timer = createRequestTimer('chat', () => clock.now, bus.sink);
      timer.identify(model, true);
      timer.responseHeaders(200, true);
      return timer;
    };

    // On model a: one running (its first token came), two waiting; one finished normally.
    // On model b: one waiting.
    clock.now = 10;
    const running = request('a');
    request('a');
    request('a');
    request('b');
    const done = request('a');
    clock.now = 20;
    running.responseBody();
    running.tokenEvent();
    done.responseBody();
    done.tokenEvent();
    done.responseFinished();
    done.close(true);
    bus.flush();
    for (const m of messages) if (m.t === 'events') receiver.receive(m.events);

    let x = parseExposition(await metrics.render());
    const gauges = () =>
      ['a', 'b'].map((model) => [x.value('num_requests_waiting', { model_name: model }), x.value('num_requests_running', { model_name: model })]);
    assert.deepEqual(
      gauges(),
      [
        [2, 1],
        [1, 0],
      ],
      'waiting and running before the worker dies',
    );
    assert.equal(finished.length, 1);

    assert.equal(receiver.lost(), 4, 'two waiting and one running on a, one waiting on b');
    x = parseExposition(await metrics.render());
    assert.deepEqual(
      gauges(),
      [
        [0, 0],
        [0, 0],
      ],
      'nothing left in flight',
    );
    assert.deepEqual([x.value('request_failed_total', { model_name: 'a' }), x.value('request_failed_total', { model_name: 'b' })], [3, 1]);
    const lost = finished.slice(1);
    assert.deepEqual(lost.map((s) => [s.model, s.outcome, s.failure, s.outputSeen]).sort(), [
      ['a', 'failed', 'worker_exit', false],
      ['a', 'failed', 'worker_exit', false],
      ['a', 'failed', 'worker_exit', true],
      ['b', 'failed', 'worker_exit', false],
    ]);
    assert.equal(receiver.lost(), 0, 'counted once');
    metrics.close();
  });

  it("carries a pass-through request (httpRequest) to the vllm dialect's HTTP families", async () => {
    const metrics = createMetrics({
      clock: () => 0,
      throughputWindowSeconds: 10,
      version: 'test',
      dialects: ['mindie', 'vllm'],
      buckets: {},
      aom: { periodSeconds: 30, labels: {} },
    });
    assert.notEqual(metrics.proxy.httpRequest, undefined, 'the vllm dialect listens');
    const messages: WorkerMessage[] = [];
    const bus = createWorkerBus(
      (m) => messages.push(m),
      () => 0,
    );
    const receiver = createWorkerReceiver(metrics.sink, metrics.proxy, metrics.modelLabel);
    bus.events.httpRequest!('vllm', '/v1/models', 'GET', 200, 0.05);
    bus.events.httpRequest!('vllm', '/v1/models', 'GET', 200, 0.7);
    bus.events.httpRequest!('vllm', 'none', 'GET', 404, 0.01);
    bus.flush();
    for (const m of messages) if (m.t === 'events') receiver.receive(m.events);
    const x = parseExposition(await metrics.render());
    assert.equal(x.value('http_requests_total', { handler: '/v1/models', method: 'GET', status: '2xx' }), 2);
    assert.equal(x.value('http_requests_total', { handler: 'none', method: 'GET', status: '4xx' }), 1);
    assert.equal(x.value('http_request_duration_seconds_bucket', { handler: '/v1/models', method: 'GET', le: '0.1' }), 1);
    assert.equal(x.value('http_request_duration_seconds_bucket', { handler: '/v1/models', method: 'GET', le: '1.0' }), 2);
    metrics.close();
    const mindieOnly = createMetrics({
      clock: () => 0,
      throughputWindowSeconds: 10,
      version: 'test',
      dialects: ['mindie'],
      buckets: {},
      aom: { periodSeconds: 30, labels: {} },
    });
    assert.equal(mindieOnly.proxy.httpRequest, undefined, 'no dialect serves HTTP families: no hook');
    mindieOnly.close();
  });
});
