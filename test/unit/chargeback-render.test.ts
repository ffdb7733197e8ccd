// The cost families at the label caps hold tenants × models × 5 series (50,000): read as the
// render goes, a part at a time, and the per-model sum over them in slices with the loop given
// back between (an empty part), never in one piece of a render (built whole, the tenant family
// held the loop for 83 to 90 ms at the caps: bench/scrape-pieces.ts with a prices file).
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { Registry } from '@prometheus-io/client';
import { createChargeback } from '../../src/chargeback/chargeback.ts';
import { createPriceBook } from '../../src/chargeback/price-book.ts';
import { parsePricesText } from '../../src/chargeback/prices-file.ts';
import { silentLogger } from '../../src/log.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import type { Family } from '../../src/metrics/exposition/families.ts';
import { assertReadAsRendered } from '../helpers/read-as-rendered.ts';

const PRICES = `currency: USD
version: "v1"
models:
  - match: "*"
    per_million_tokens: { prompt: 0.2, completion: 0.6 }
`;

function chargebackAt(tenants: number, models: number) {
  const read = parsePricesText(PRICES);
  if (!read.ok) throw new Error(read.expected);
  const registry = new Registry();
  const chargeback = createChargeback({
    registry,
    book: createPriceBook({ file: undefined, initial: read.table, log: silentLogger }),
    clock: () => 0,
    tenants: true,
    modelLabel: (m) => m,
    tenantLabel: (t) => t,
  });
  const finish = (tenant: string, model: string) => {
    const sample = { tenant, model, outcome: 'success', promptTokens: 1000, completionTokens: 300 } as unknown as RequestSample;
    chargeback.started(sample);
    chargeback.finished(sample, sample);
  };
  for (let t = 0; t < tenants; t++) for (let m = 0; m < models; m++) finish(`tenant-${t}`, `model-${m}`);
  const family = (name: string) => registry.getSingleMetric(name) as unknown as Family;
  return { family, finish };
}

it('renders the tenant cost family a part at a time, a pair finished after the first part in it', () => {
  const { family, finish } = chargebackAt(100, 20);
  assertReadAsRendered(family('infermeter_tenant_cost_nanos_total'), () => finish('tenant-late', 'model-late'));
});

it('sums the per-model family in slices, an empty part between them, and agrees with the tenant family', () => {
  const { family } = chargebackAt(100, 20); // 2,000 pairs × 4 token kinds
  const models = family('infermeter_cost_nanos_total');
  const parts = Array.from(models.renderParts!());
  // Before its first line, a part at each slice of 2,048 series (the first with the family's head).
  const slices = parts.filter((p) => !p.includes('} ')).length;
  assert.ok(slices >= 3 && parts.filter((p) => p === '').length >= 2, `${slices} parts without a line for 8,000 series`);
  assert.equal(parts.join(''), models.renderText());
  // Per model and kind, the sum of the tenant family's series, to the nano-unit.
  const sums = new Map<string, bigint>();
  for (const line of family('infermeter_tenant_cost_nanos_total').renderText().split('\n')) {
    const m = /model_name="([^"]+)",kind="([^"]+)"\} (\d+)$/.exec(line);
    if (m !== null) sums.set(`${m[1]} ${m[2]}`, (sums.get(`${m[1]} ${m[2]}`) ?? 0n) + BigInt(m[3]!));
  }
  let lines = 0;
  for (const line of models.renderText().split('\n')) {
    const m = /model_name="([^"]+)",kind="([^"]+)"\} (\d+)$/.exec(line);
    if (m === null) continue;
    lines++;
    assert.equal(BigInt(m[3]!), sums.get(`${m[1]} ${m[2]}`), line);
  }
  assert.equal(lines, 20 * 4);
  // The JSON and cluster view: the same values, no pause among them.
  assert.equal(models.get().values.length, 20 * 4);
});
