// A full scrape on fixed traffic, byte for byte: every dialect, tenants, goodput, exemplars, in
// the Prometheus text and in OpenMetrics, against the files in fixtures/exposition/ (written
// with prom-client 15 before the move to @prometheus-io/client, issue 35: the move had to leave
// the exposition as it was). The traffic and the clock are fixed; what varies by run (the
// event-loop delay, the exemplars' wall-clock time) is masked. An intended change of the
// exposition rewrites the files: EXPOSITION_GOLDEN_WRITE=1 node --test <this file>, and the diff
// is reviewed like code.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.ts';
import { silentLogger } from '../../src/log.ts';
import { createRequestTimer } from '../../src/measure/request-timer.ts';
import { createMetrics } from '../../src/metrics/metrics.ts';
import { createSloPolicy } from '../../src/goodput/slo-policy.ts';
import { PROCESS_FAMILY_LINES } from '../helpers/exposition.ts';
import { noContainer } from '../helpers/no-container.ts';

const file = (name: string) => new URL(`../../fixtures/exposition/${name}`, import.meta.url);

function scrapeOnFixedTraffic() {
  let now = 1_000_000;
  const clock = () => now;
  const config = loadConfig({ INFERMETER_SLO: 'ttft:150 tpot:25' }, {});
  const slo = createSloPolicy({ config: config.slo, log: silentLogger, watchIntervalMs: 0 });
  const aliases = new Map<string, string>();
  const metrics = createMetrics({
    clock,
    throughputWindowSeconds: 60,
    version: 'golden',
    dialects: ['mindie', 'aom', 'vllm', 'otel'],
    buckets: {},
    aom: { periodSeconds: 30, labels: { service_id: 'golden' } },
    container: noContainer(clock, { hostCpus: 2 }),
    maxModels: 10,
    tenants: { max: 10, aliases: { current: () => aliases, onChange: () => undefined } },
    slo,
  });
  let id = 0;
  for (const model of ['llama-8b', 'qwen "7b"', 'mistral\\x']) {
    for (const [tenant, tokens, gap, status] of [
      ['acme', 8, 10, 200],
      ['beta', 1, 0, 200],
      ['acme', 4, 40, 200],
      ['beta', 0, 0, 500],
      ['acme', 16, 5, 404],
    ] as const) {
      const timer = createRequestTimer('chat', clock, metrics.sink, tenant, now, `req-${++id}`);
      timer.identify(model, true, { maxTokens: 64, n: 1 });
      now += 3;
      timer.responseHeaders(status, status === 200);
      timer.headSent();
      if (status !== 200) {
        timer.fail('upstream_status', status);
        now += 2;
        timer.close(true);
        continue;
      }
      now += 120;
      for (let t = 0; t < tokens; t++) {
        if (t > 0) now += gap;
        timer.responseBody();
        timer.tokenEvent(undefined, t === 0 && model === 'llama-8b');
      }
      timer.usage({ promptTokens: 11, completionTokens: tokens, reasoningTokens: 1, cachedTokens: 5 });
      timer.finishReason('stop');
      now += 1;
      timer.responseFinished();
      timer.close(true);
    }
  }
  // The proxy's own families (prom-client's counters and gauges), each with a value.
  const p = metrics.proxy;
  p.uninspected('invalid_json');
  p.tapProblem('malformed_event');
  p.proxyError('upstream_reset');
  p.retried('stale_connection');
  p.injectionActive(true);
  p.usageInjected('held');
  p.usageStripped();
  p.accessLogDropped();
  p.rejected('concurrency');
  p.clientError('timeout');
  p.bodyUnheld('retry_copy');
  p.workerRestarted(2);
  return metrics;
}

/**
 * What varies by run: the loop's delay (measured by the process), the process families
 * (process_*, nodejs_*: CPU, memory, GC, ...; served and checked in
 * test/integration/process-metrics.test.ts), the Node version, an exemplar's wall-clock time.
 */
const steady = (text: string) =>
  text
    .replace(/^infermeter_event_loop_delay_seconds.*\n/gm, '')
    .replace(PROCESS_FAMILY_LINES, '')
    .replace(/node_version="[^"]*"/g, 'node_version="<node>"')
    .replace(/( # \{request_id="[^"]*"\} [^ ]+) \d+(\.\d+)?$/gm, '$1 <time>');

async function render(metrics: ReturnType<typeof createMetrics>, openMetrics: boolean): Promise<string> {
  let out = '';
  for await (const piece of metrics.renderPieces(openMetrics)) out += piece;
  return steady(out);
}

describe('a full scrape on fixed traffic', () => {
  for (const [format, name, openMetrics] of [
    ['the Prometheus text', 'full-scrape.prom', false],
    ['OpenMetrics, with exemplars', 'full-scrape.om', true],
  ] as const) {
    it(`is ${format} byte for byte as the recorded one`, async (t) => {
      const metrics = scrapeOnFixedTraffic();
      t.after(() => metrics.close());
      const text = await render(metrics, openMetrics);
      if (process.env.EXPOSITION_GOLDEN_WRITE === '1') writeFileSync(file(name), text);
      const recorded = readFileSync(file(name), 'utf8');
      if (text === recorded) return;
      const a = text.split('\n');
      const b = recorded.split('\n');
      const i = a.findIndex((line, k) => line !== b[k]);
      assert.fail(`line ${i + 1} differs:\n  now:      ${a[i]}\n  recorded: ${b[i]}`);
    });
  }
});
