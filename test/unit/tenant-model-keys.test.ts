// State kept per (tenant, model) pair must not be shared by two pairs whose names run together:
// tenant "ab" with model "c" and tenant "a" with model "bc" (and the same with a separator
// character inside a name) are four different pairs. The oracle is the exposition of each
// pair's traffic alone: with every pair's traffic in one process, each pair's series (every
// family, every dialect, goodput and the usage details included) read exactly as they did alone.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.ts';
import { silentLogger } from '../../src/log.ts';
import { createRequestTimer } from '../../src/measure/request-timer.ts';
import { createMetrics } from '../../src/metrics/metrics.ts';
import { createSloPolicy } from '../../src/goodput/slo-policy.ts';
import { noContainer } from '../helpers/no-container.ts';

type Pair = { readonly tenant: string; readonly model: string; readonly ttftMs: number; readonly tokens: number; readonly requests: number };

const PAIRS: readonly Pair[] = [
  { tenant: 'ab', model: 'c', ttftMs: 10, tokens: 3, requests: 2 },
  { tenant: 'a', model: 'bc', ttftMs: 500, tokens: 6, requests: 3 },
  { tenant: 'x/', model: 'y', ttftMs: 20, tokens: 2, requests: 1 },
  { tenant: 'x', model: '/y', ttftMs: 300, tokens: 9, requests: 4 },
];

/** The text exposition after the traffic of `included` (the clock moves the same way whichever are). */
async function exposition(included: readonly Pair[]): Promise<string> {
  let now = 1_000_000;
  const clock = () => now;
  const config = loadConfig({ INFERMETER_SLO: 'ttft:150 tpot:25' }, {});
  const slo = createSloPolicy({ config: config.slo, log: silentLogger, watchIntervalMs: 0 });
  const metrics = createMetrics({
    clock,
    throughputWindowSeconds: 60,
    version: 'keys',
    dialects: ['mindie', 'aom', 'vllm', 'otel'],
    buckets: {},
    aom: { periodSeconds: 30, labels: { service_id: 'keys' } },
    container: noContainer(clock, { hostCpus: 2 }),
    maxModels: 10,
    tenants: { max: 10, aliases: { current: () => new Map(), onChange: () => undefined } },
    slo,
  });
  try {
    for (let round = 0; round < 4; round++) {
      for (const pair of PAIRS) {
        const go = included.includes(pair) && round < pair.requests;
        const timer = go ? createRequestTimer('chat', clock, metrics.sink, pair.tenant, now, `r-${round}`) : undefined;
        timer?.identify(pair.model, true, { maxTokens: 64, n: 1 });
        now += 2;
        timer?.responseHeaders(200, true);
        timer?.headSent();
        now += pair.ttftMs;
        for (let t = 0; t < pair.tokens; t++) {
          if (t > 0) now += 5;
          timer?.responseBody();
          timer?.tokenEvent();
        }
        timer?.usage({ promptTokens: 7 + pair.tokens, completionTokens: pair.tokens, reasoningTokens: 1, cachedTokens: 2 });
        timer?.finishReason('stop');
        now += 1;
        timer?.responseFinished();
        timer?.close(true);
      }
    }
    return await metrics.render();
  } finally {
    metrics.close();
  }
}

/** The exposition's lines that name `pair` (its tenant and its model among the labels), by series, with their values. */
function linesOf(text: string, pair: Pair): Map<string, string> {
  const quoted = (v: string) => `="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
  const lines = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !line.includes(quoted(pair.tenant)) || !line.includes(quoted(pair.model))) continue;
    const cut = line.lastIndexOf(' ');
    lines.set(line.slice(0, cut), line.slice(cut + 1));
  }
  return lines;
}

describe('per (tenant, model) state', () => {
  it('keeps pairs whose names run together apart: each pair reads alone as it reads beside the others', async () => {
    const together = await exposition(PAIRS);
    for (const pair of PAIRS) {
      const alone = linesOf(await exposition([pair]), pair);
      assert.ok(alone.size >= 10, `${JSON.stringify(pair)}: ${alone.size} series name the pair alone`);
      const beside = linesOf(together, pair);
      assert.deepEqual(Object.fromEntries(beside), Object.fromEntries(alone), `${pair.tenant} / ${pair.model}: its series beside the other pairs`);
    }
  });

  it('keeps their SLO classes apart: the class cache answers each pair with its own class, and a request without a tenant with the tenant-free class', () => {
    // A class for each pair of names that run together; asked in an order where each colliding
    // key would be cached first by the other pair.
    const classes = [
      { name: 'ab-c', tenant: 'ab', model: 'c', slo: 'ttft:100' },
      { name: 'a-bc', tenant: 'a', model: 'bc', slo: 'ttft:200' },
      { name: 'x-slash', tenant: 'x', model: '/y', slo: 'ttft:300' },
      { name: 'dash', tenant: '-', model: 'z', slo: 'ttft:400' },
    ];
    const config = loadConfig({ INFERMETER_SLO_FILE: '/s.json', INFERMETER_SLO: 'ttft:1000' }, { readFile: () => JSON.stringify({ classes }) });
    const policy = createSloPolicy({ config: config.slo, log: silentLogger, watchIntervalMs: 0 });
    try {
      const asked: Array<[string, string | undefined, string]> = [
        ['c', 'ab', 'ab-c'],
        ['bc', 'a', 'a-bc'],
        ['y', 'x/', 'default'],
        ['/y', 'x', 'x-slash'],
        ['z', '-', 'dash'],
        ['z', undefined, 'default'],
      ];
      for (let round = 0; round < 2; round++) {
        for (const [model, tenant, expected] of round === 0 ? asked : [...asked].reverse()) {
          assert.equal(policy.classOf(model, tenant)?.name, expected, `tenant ${tenant} / model ${model}, round ${round}`);
        }
      }
    } finally {
      policy.close();
    }
  });
});
