// model_name comes from clients: the number of distinct values is capped, later ones fold into
// "other" (counted), the upstream's listed models always get their own, and values are made safe.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLabelGuard, sanitizeLabel } from '../../src/metrics/label-guard.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';

describe('bounded labels', () => {
  it('keeps at most INFERMETER_MAX_MODELS distinct models; the rest count under "other"', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) =>
      req.url === '/v1/models'
        ? { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{"data":[{"id":"served-model"}]}' }] }
        : { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{}' }] },
    );
    const app = await startProxy(t, upstream.url, { INFERMETER_MAX_MODELS: '5' });
    const send = async (model: string) => (await fetch(`${app.dataUrl}/v1/completions`, { method: 'POST', body: JSON.stringify({ model }) })).arrayBuffer();
    let finished = nextFinished(app, 12);
    for (let i = 0; i < 12; i++) await send(`attacker-${i}`);
    await finished;
    // The cap made infermeter ask the upstream which models it serves.
    await app.metrics.modelsListed();
    assert.equal(upstream.requests.filter((r) => r.url === '/v1/models').length, 1, 'asked once');
    finished = nextFinished(app, 2);
    await send('served-model');
    await send('attacker-99');
    await finished;
    const m = await scrape(app);
    const models = m.series('request_received_total').map((s) => s.labels.model_name).sort();
    assert.deepEqual(models, ['attacker-0', 'attacker-1', 'attacker-2', 'attacker-3', 'attacker-4', 'other', 'served-model']);
    assert.equal(m.value('request_received_total', { model_name: 'other' }), 8);
    assert.equal(m.value('infermeter_model_label_overflow_total'), 8);
    assert.equal(m.value('infermeter_model_labels'), 8, '5 kept, the listed one, unknown and other');
  });

  it('makes values safe: control characters replaced, length capped', () => {
    assert.equal(sanitizeLabel('a\nb\u0000c\u007f'), 'a_b_c_');
    assert.equal(sanitizeLabel('x'.repeat(500)).length, 128);
    assert.equal(sanitizeLabel(`${'x'.repeat(127)}\u{1F680}`).length, 127, 'no half surrogate pair');
    const guard = createLabelGuard(1, () => {});
    assert.equal(guard.model('a'), 'a');
    assert.equal(guard.model('b'), 'other');
    assert.equal(guard.model('a'), 'a', 'the same answer every time');
    assert.equal(guard.model('unknown'), 'unknown', 'reserved values are always kept');
  });
});
