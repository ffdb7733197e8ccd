// /metrics at full cardinality is rendered in pieces that give the event loop back between
// them: the same text as one render, in more than one piece, with other work of the loop run
// before the last piece.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createRequestTimer } from '../../src/measure/request-timer.ts';
import { createMetricsApp } from '../../src/management/metrics-app.ts';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.ts';

function fullCardinality(models: number) {
  let now = 0;
  const metrics = createMetrics({
    clock: () => now,
    throughputWindowSeconds: 10,
    version: 'test',
    dialects: ['mindie', 'aom', 'vllm', 'otel'],
    buckets: {},
    aom: { periodSeconds: 30, labels: { service_id: 'test' } },
    container: { paths: { cgroupRoot: '/nonexistent', procRoot: '/nonexistent' }, hostCpus: 2, hostMemoryBytes: 1, gpu: false, npu: false, run: async () => undefined, now: () => now },
    maxModels: models,
  });
  for (let m = 0; m < models; m++) {
    for (const api of ['chat', 'completions'] as const) {
      const timer = createRequestTimer(api, () => now, metrics.sink);
      timer.identify(`model-${m}`, true);
      timer.responseHeaders(200, true);
      for (let t = 0; t < 4; t++) {
        now += 5;
        timer.tokenEvent();
      }
      timer.usage({ promptTokens: 10, completionTokens: 4 });
      timer.finishReason('stop');
      timer.responseFinished();
      timer.close(true);
    }
  }
  return metrics;
}

describe('/metrics render in pieces', () => {
  it('gives the loop back between pieces, and the pieces make the whole text', async (t) => {
    const metrics = fullCardinality(100);
    t.after(() => metrics.close());
    const whole = await metrics.render();
    let immediateRan = false;
    setImmediate(() => (immediateRan = true));
    const pieces: string[] = [];
    let ranBeforeLast = false;
    for await (const piece of metrics.renderPieces()) {
      ranBeforeLast = immediateRan;
      pieces.push(piece);
    }
    assert.ok(pieces.length > 1, `${pieces.length} piece(s) for ${whole.length} characters`);
    assert.ok(ranBeforeLast, 'an immediate queued before the render ran before its last piece');
    // The same text but the event-loop delay, which has grown between the two renders.
    const steady = (text: string) => text.replace(/^infermeter_event_loop_delay_seconds.*\n/gm, '');
    const joined = steady(pieces.join(''));
    assert.ok(joined === steady(whole), `the pieces (${joined.length} characters) differ from one render (${steady(whole).length})`);
    assert.ok(whole.includes('model_name="model-99"'), 'every model rendered');
  });

  it('serves scrapes that come during a render from that render, and a later scrape anew', async (t) => {
    const metrics = fullCardinality(10);
    t.after(() => metrics.close());
    let renders = 0;
    const counting: Metrics = {
      ...metrics,
      renderPieces() {
        renders++;
        return metrics.renderPieces();
      },
    };
    const app = createMetricsApp(counting, true);
    const [a, b, c] = await Promise.all([app.request('/metrics'), app.request('/metrics'), app.request('/metrics')]);
    const texts = await Promise.all([a!.text(), b!.text(), c!.text()]);
    assert.equal(renders, 1, 'three scrapes at once, one render');
    assert.ok(texts[0]!.includes('model_name="model-9"') && texts.every((x) => x === texts[0]), 'the same exposition for each');
    assert.equal(a!.headers.get('content-length'), String(Buffer.byteLength(texts[0]!)));
    await (await app.request('/metrics')).text();
    assert.equal(renders, 2, 'a scrape after the render ended renders again');
  });
});
