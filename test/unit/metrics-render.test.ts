// /metrics at full cardinality is rendered in pieces that give the event loop back between
// them: the same text as one render, in more than one piece, with other work of the loop run
// before the last piece.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createRequestTimer } from '../../src/measure/request-timer.ts';
import { createMetricsApp } from '../../src/management/metrics-app.ts';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.ts';
import { OPENMETRICS_EOF, toOpenMetrics } from '../../src/metrics/exposition/openmetrics.ts';
import { PROCESS_FAMILY_LINES } from '../helpers/exposition.ts';
import { noContainer } from '../helpers/no-container.ts';

function fullCardinality(models: number) {
  let now = 0;
  const metrics = createMetrics({
    clock: () => now,
    throughputWindowSeconds: 10,
    version: 'test',
    dialects: ['mindie', 'aom', 'vllm', 'otel'],
    buckets: {},
    aom: { periodSeconds: 30, labels: { service_id: 'test' } },
    container: noContainer(() => now, { hostCpus: 2 }),
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
    const steady = (text: string) => text.replace(/^infermeter_event_loop_delay_seconds.*\n/gm, '').replace(PROCESS_FAMILY_LINES, '');
    const joined = steady(pieces.join(''));
    assert.ok(joined === steady(whole), `the pieces (${joined.length} characters) differ from one render (${steady(whole).length})`);
    assert.ok(whole.includes('model_name="model-99"'), 'every model rendered');
  });

  // A piece's size bounds the loop's hold by it (its render and its encoding): 32 KiB characters,
  // crossed by at most the series that crosses it (bench:scrape prints its time, issue 54).
  it('ends a piece after 32 KiB characters and the series that crosses them', async (t) => {
    const metrics = fullCardinality(100);
    t.after(() => metrics.close());
    const sizes: number[] = [];
    for await (const piece of metrics.renderPieces()) sizes.push(piece.length);
    const largest = Math.max(...sizes);
    assert.ok(sizes.length > 10, `${sizes.length} pieces`);
    assert.ok(largest <= 40 * 1024, `the largest piece: ${largest} characters`);
  });

  // A family rendered in parts is turned into OpenMetrics part by part (openMetricsParts): the
  // same text as the whole family's conversion, whatever the parts.
  it('renders OpenMetrics in parts as the whole text converted at once', async (t) => {
    const metrics = fullCardinality(100);
    t.after(() => metrics.close());
    const steady = (text: string) => text.replace(/^infermeter_event_loop_delay_seconds.*\n/gm, '').replace(PROCESS_FAMILY_LINES, '');
    const plain = steady(await metrics.render());
    let om = '';
    let pieces = 0;
    for await (const piece of metrics.renderPieces(true)) {
      om += piece;
      pieces++;
    }
    assert.ok(pieces > 1);
    assert.ok(om.endsWith(OPENMETRICS_EOF));
    const expected = toOpenMetrics(plain) + OPENMETRICS_EOF;
    assert.ok(steady(om) === expected, `OpenMetrics in parts (${om.length} characters) differs from the whole conversion (${expected.length})`);
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
    // Streamed as it is rendered: the length is not known when the head goes.
    assert.equal(a!.headers.get('content-length'), null);
    await (await app.request('/metrics')).text();
    assert.equal(renders, 2, 'a scrape after the render ended renders again');
  });

  it('a scrape that arrives during a round waits for the next one, which renders anew', async (t) => {
    const metrics = fullCardinality(100);
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
    const first = await app.request('/metrics');
    const reader = first.body!.getReader();
    const piece = await reader.read(); // the round is under way
    assert.ok(piece.value !== undefined && piece.value.length > 0);
    const late = Promise.resolve(app.request('/metrics')).then((r) => r.text());
    let rest = Buffer.from(piece.value);
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest = Buffer.concat([rest, r.value]);
    assert.equal(renders, 1, 'the late scrape did not join the round under way');
    const text = await late;
    assert.equal(renders, 2, 'it got a round of its own');
    assert.ok(rest.toString().includes('model_name="model-99"') && text.includes('model_name="model-99"'), 'both whole');
  });

  it('drops a scraper that reads nothing for the stall time; the others of its round get the whole text', async (t) => {
    const metrics = fullCardinality(100);
    t.after(() => metrics.close());
    const whole = await metrics.render();
    const app = createMetricsApp(metrics, true, undefined, undefined, { maxScrapes: 4, stallMs: 50, totalMs: 60_000 });
    const [stalled, reading] = await Promise.all([app.request('/metrics'), app.request('/metrics')]);
    const text = await reading.text();
    const steady = (x: string) => x.replace(/^(infermeter_event_loop_delay_seconds|exposer_).*\n/gm, '').replace(PROCESS_FAMILY_LINES, '');
    assert.ok(steady(text) === steady(whole), 'the reading scraper got the whole exposition');
    await assert.rejects(stalled.text(), /read nothing for too long/, 'the one that read nothing was cut');
  });

  it('answers HEAD without joining a round (its body would never be read)', async (t) => {
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
    const app = createMetricsApp(counting, true, undefined, undefined, { maxScrapes: 1, stallMs: 60_000, totalMs: 60_000 });
    const head = await app.request('/metrics', { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-type'), metrics.contentType);
    const res = await app.request('/metrics');
    assert.equal(res.status, 200, 'the only place was not taken by the HEAD');
    assert.ok((await res.text()).includes('model_name="model-9"'));
    assert.equal(renders, 1);
  });

  it('refuses scrapes past the cap with 503 and Retry-After', async (t) => {
    const metrics = fullCardinality(10);
    t.after(() => metrics.close());
    const app = createMetricsApp(metrics, true, undefined, undefined, { maxScrapes: 2, stallMs: 60_000, totalMs: 60_000 });
    const answers = await Promise.all([app.request('/metrics'), app.request('/metrics'), app.request('/metrics')]);
    assert.deepEqual(
      answers.map((r) => r.status),
      [200, 200, 503],
    );
    assert.equal(answers[2]!.headers.get('retry-after'), '1');
    await Promise.all(answers.map((r) => r.text()));
    const again = await app.request('/metrics');
    assert.equal(again.status, 200, 'a place is free again once they are done');
    // Read, so that its scrape ends now rather than at the 60 s deadline (which held the file's process).
    await again.text();
  });
});
