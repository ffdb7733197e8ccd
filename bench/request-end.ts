// npm run bench:request-end: what one request costs the recording, driven straight through a
// request timer into the metrics (no sockets): its start, each token, and its end (the finished
// sample through the recorder and every dialect's observer), per dialect set. A request's end in
// a wave (32 streams ending together) costs 32 times the end figure of the loop's time. Then the
// Prometheus client's own part: an increment of one of the proxy's counters (its classes), and
// a whole /metrics render of 100 models with every dialect.
import { createRequestTimer } from '../src/measure/request-timer.ts';
import { createMetrics } from '../src/metrics/metrics.ts';
import { noContainer } from '../test/helpers/no-container.ts';

let now = 0;
const clock = () => now;
const us = (ns: bigint, n: number) => (Number(ns) / n / 1000).toFixed(3);

/** The metrics of one infermeter with these dialects, on the bench's clock, no container sources. */
const metricsOf = (dialects: Parameters<typeof createMetrics>[0]['dialects']) =>
  createMetrics({
    clock,
    throughputWindowSeconds: 10,
    version: 'bench',
    dialects,
    buckets: {},
    aom: { periodSeconds: 30, labels: { service_id: 'bench' } },
    container: noContainer(clock, { hostCpus: 2 }),
    maxModels: 100,
  });

console.log('| dialects | start µs | per token µs | end µs |\n|---|---|---|---|');
for (const dialects of [['mindie'], ['mindie', 'aom'], ['mindie', 'aom', 'vllm', 'otel']] as const) {
  const metrics = metricsOf(dialects);
  const run = (n: number, tokens: number) => {
    let start = 0n;
    let token = 0n;
    let end = 0n;
    for (let i = 0; i < n; i++) {
      const t0 = process.hrtime.bigint();
      const timer = createRequestTimer('chat', clock, metrics.sink);
      timer.identify(`model-${i % 4}`, true);
      timer.responseHeaders(200, true);
      const t1 = process.hrtime.bigint();
      for (let t = 0; t < tokens; t++) {
        now += 5;
        timer.responseBody();
        timer.tokenEvent();
      }
      const t2 = process.hrtime.bigint();
      timer.usage({ promptTokens: 10, completionTokens: tokens });
      timer.finishReason('stop');
      timer.responseFinished();
      timer.close(true);
      const t3 = process.hrtime.bigint();
      start += t1 - t0;
      token += t2 - t1;
      end += t3 - t2;
    }
    return `| ${dialects.join(',')} | ${us(start, n)} | ${us(token, n * tokens)} | ${us(end, n)} |`;
  };
  run(20_000, 16); // warm
  console.log(run(20_000, 128));
}

{
  const metrics = metricsOf(['mindie', 'aom', 'vllm', 'otel']);
  for (let m = 0; m < 100; m++) {
    const timer = createRequestTimer('chat', clock, metrics.sink);
    timer.identify(`model-${m}`, true);
    timer.responseHeaders(200, true);
    for (let t = 0; t < 4; t++) {
      now += 5;
      timer.tokenEvent();
    }
    timer.usage({ promptTokens: 10, completionTokens: 4 });
    timer.responseFinished();
    timer.close(true);
  }
  const n = 1_000_000;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) metrics.proxy.usageInjected('held');
  const inc = Number(process.hrtime.bigint() - t0) / n;
  for (let i = 0; i < 5; i++) await metrics.render();
  const r0 = performance.now();
  for (let i = 0; i < 30; i++) await metrics.render();
  console.log(
    `\nA proxy counter's increment (the Prometheus client's Counter): ${inc.toFixed(1)} ns. A /metrics render, 100 models, every dialect: ${((performance.now() - r0) / 30).toFixed(2)} ms.`,
  );
  metrics.close();
}
