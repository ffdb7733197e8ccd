// Every dialect's histograms render the bucket boundaries its specification gives, compared with
// the literals of test/helpers/spec-buckets.ts (each with its source), never with src's own
// table; and a value on a boundary counts in that boundary's bucket (le is "less or equal").
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { createRequestTimer } from '../../src/measure/request-timer.ts';
import { createMetrics } from '../../src/metrics/metrics.ts';
import { parseExposition, type Exposition } from '../helpers/exposition.ts';
import { AOM_BUCKETS, INFERMETER_BUCKETS, les, MINDIE_BUCKETS, OTEL_BUCKETS, pythonLes, VLLM_BUCKETS } from '../helpers/spec-buckets.ts';

/** One streamed request: first token at ttftMs, `tokens` token events gapMs apart, usage, the end. */
async function oneRequest(ttftMs: number, gapMs: number, tokens: number): Promise<Exposition> {
  const clock = { now: 0 };
  const metrics = createMetrics({
    clock: () => clock.now,
    throughputWindowSeconds: 10,
    version: 'test',
    dialects: ['mindie', 'vllm', 'otel', 'aom'],
    buckets: {},
    aom: { periodSeconds: 30, labels: {} },
  });
  const timer = createRequestTimer('chat', () => clock.now, metrics.sink);
  timer.identify('m', true, { maxTokens: 64, n: 1 });
  timer.responseHeaders(200, true);
  for (let i = 0; i < tokens; i++) {
    clock.now = ttftMs + i * gapMs;
    timer.responseBody();
    timer.tokenEvent();
  }
  timer.usage({ promptTokens: 10, completionTokens: tokens });
  timer.responseFinished();
  timer.close(true);
  const x = parseExposition(await metrics.render());
  metrics.close();
  return x;
}

const bucketLes = (x: Exposition, family: string, match: Record<string, string> = {}): string[] =>
  x
    .series(`${family}_bucket`)
    .filter((s) => s.labels.model_name === 'm' || s.labels.gen_ai_request_model === 'm')
    .filter((s) => Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .map((s) => s.labels.le!);

describe('histogram buckets as the specifications give them', () => {
  it('MindIE, vLLM and the OpenTelemetry conventions, every boundary', async () => {
    const x = await oneRequest(100, 20, 5);
    for (const [family, bounds] of Object.entries(MINDIE_BUCKETS)) assert.deepEqual(bucketLes(x, family), les(bounds), `MindIE ${family}`);
    for (const [family, bounds] of Object.entries(VLLM_BUCKETS))
      assert.deepEqual(bucketLes(x, family), pythonLes(bounds), `vLLM ${family}, written as vLLM writes them`);
    for (const [family, bounds] of Object.entries(OTEL_BUCKETS)) {
      const match: Record<string, string> = family === 'gen_ai_client_token_usage' ? { gen_ai_token_type: 'input' } : {};
      assert.deepEqual(bucketLes(x, family, match), les(bounds), `OTel ${family}`);
    }
  });

  it("infermeter's own choices (AOM, inter-token latency, TTFB) as docs/metrics.md documents them", async () => {
    const x = await oneRequest(100, 20, 5);
    const all = (family: string) => x.series(`${family}_bucket`).map((s) => s.labels.le!);
    for (const [family, bounds] of Object.entries({ ...AOM_BUCKETS, ...INFERMETER_BUCKETS })) assert.deepEqual(all(family), les(bounds), family);
    const docs = readFileSync(new URL('../../docs/metrics.md', import.meta.url), 'utf8');
    const row = (family: string) => docs.split('\n').find((l) => l.startsWith(`| \`${family}\` |`)) ?? '';
    for (const family of [
      'infer_service_request_cost',
      'infer_service_first_token_cost',
      'infer_service_per_token_cost',
      'inter_token_latency_seconds',
    ] as const) {
      const bounds = { ...AOM_BUCKETS, ...INFERMETER_BUCKETS }[family];
      assert.ok(row(family).includes(bounds.join(', ')), `docs/metrics.md lists ${family}'s buckets ${bounds.join(', ')}: ${row(family)}`);
    }
    assert.match(row('time_to_first_byte_seconds'), /TTFT's buckets/);
    assert.deepEqual(INFERMETER_BUCKETS.time_to_first_byte_seconds, MINDIE_BUCKETS.time_to_first_token_seconds);
  });

  it("counts a value that sits on a boundary in that boundary's bucket, on every MindIE TTFT boundary", async () => {
    // The fake clock is in whole milliseconds: every TTFT boundary of 1 ms and more is hit
    // exactly (0.001 s is 1 ms); a boundary moved by any amount changes some count below.
    for (const bound of MINDIE_BUCKETS.time_to_first_token_seconds) {
      const x = await oneRequest(bound * 1000, 10, 2);
      const counts = Object.fromEntries(
        x
          .series('time_to_first_token_seconds_bucket')
          .filter((s) => s.labels.model_name === 'm')
          .map((s) => [s.labels.le, s.value]),
      );
      const expected = Object.fromEntries(les(MINDIE_BUCKETS.time_to_first_token_seconds).map((le) => [le, le === '+Inf' || Number(le) >= bound ? 1 : 0]));
      assert.deepEqual(counts, expected, `a TTFT of exactly ${bound} s`);
    }
  });
});
