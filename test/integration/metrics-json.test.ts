// GET /metrics-json on the management port, in the exact shape of MindIE's spec: averages of
// the last N requests' TTFT and TBT, from the proxy's own samples; the window forgets.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nextFinished, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';

const token = (t: string) => `data: {"choices":[{"index":0,"delta":{"content":"${t}"}}]}\n\n`;

describe('/metrics-json', () => {
  it('answers in the spec shape with the averages of exactly the last N requests', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    let i = 0;
    // Request k: first token after 10 + 15k ms, then 2 more tokens 5 + 2k ms apart.
    upstream.respond(() => {
      const k = i++;
      return {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
        body: [
          { afterMs: 10 + 15 * k, data: token('a') },
          { afterMs: 5 + 2 * k, data: token('b') },
          { afterMs: 5 + 2 * k, data: token('c') + 'data: [DONE]\n\n' },
        ],
      };
    });
    const app = await startProxy(t, upstream.url, { INFERMETER_JSON_WINDOW: '3', INFERMETER_JSON_JOB: 'llm' });
    const finished = nextFinished(app, 5);
    for (let k = 0; k < 5; k++) await (await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","stream":true}' })).text();
    const samples = await finished;

    const res = await fetch(`${app.managementUrl}/metrics-json`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    const body = (await res.json()) as { resultType: string; result: Array<{ metric: Array<Record<string, string>>; value: string }> };
    const instance = new URL(app.managementUrl).host;
    assert.equal(body.resultType, 'vector');
    assert.deepEqual(
      body.result.map((r) => r.metric),
      ['TTFT', 'TBT', 'waitingInferRequestNum', 'processingInferRequestNum'].map((name) => [{ __name__: name, job: 'llm', instance }]),
      'no remainBlocks entry without an engine that reports it',
    );
    for (const r of body.result) assert.equal(typeof r.value, 'string');
    const value = (name: string) => Number(body.result.find((r) => r.metric[0]!.__name__ === name)!.value);
    // The window holds the last 3 requests: the mean of their own samples, in milliseconds.
    const last = samples.slice(-3);
    const ttft = last.reduce((s, x) => s + x.ttft! * 1000, 0) / 3;
    const tbt = last.reduce((s, x) => s + x.tpot!.seconds * 1000, 0) / 3;
    assert.ok(Math.abs(value('TTFT') - ttft) < 1e-9, `TTFT ${value('TTFT')} vs ${ttft}`);
    assert.ok(Math.abs(value('TBT') - tbt) < 1e-9, `TBT ${value('TBT')} vs ${tbt}`);
    // ... which is not the mean over all five, nor over the first three: the window forgot the
    // two oldest. No bound on how fast this machine is: each TTFT is at least its scripted
    // 10 + 15k ms (a timer fires at most 1 ms early), and a window that kept the wrong requests
    // would give one of the other means exactly (the times are nanosecond-fine, so the means of
    // different requests do not coincide).
    for (const [k, x] of samples.entries()) assert.ok(x.ttft! * 1000 >= 10 + 15 * k - 1, `request ${k}: TTFT ${x.ttft! * 1000} ms, scripted ${10 + 15 * k} ms`);
    const mean = (xs: typeof samples) => xs.reduce((s, x) => s + x.ttft! * 1000, 0) / xs.length;
    const [all, first3] = [mean(samples), mean(samples.slice(0, 3))];
    assert.ok(
      Math.abs(value('TTFT') - all) > 1e-6 && Math.abs(value('TTFT') - first3) > 1e-6,
      `TTFT ${value('TTFT')}: the mean of the last 3 (${ttft}), not of all 5 (${all}) nor the first 3 (${first3})`,
    );
    assert.equal(value('waitingInferRequestNum'), 0);
    assert.equal(value('processingInferRequestNum'), 0);
  });

  it("reports the proxy's in-flight requests when no engine reports them", async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) =>
      req.body.toString().includes('"first"')
        ? { status: 200, headers: { 'content-type': 'text/event-stream' }, body: [{ data: token('x') }], end: 'hang' }
        : { status: 200, headers: { 'content-type': 'text/event-stream' }, body: [], end: 'hang' },
    );
    const app = await startProxy(t, upstream.url);
    const controllers = [new AbortController(), new AbortController()];
    const running = await fetch(`${app.dataUrl}/v1/chat/completions`, {
      method: 'POST',
      body: '{"model":"first","stream":true}',
      signal: controllers[0]!.signal,
    });
    await running.body!.getReader().read(); // its first token arrived: processing
    await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"second","stream":true}', signal: controllers[1]!.signal });
    await upstream.received(2);
    const body = (await (await fetch(`${app.managementUrl}/metrics-json`)).json()) as { result: Array<{ metric: Array<{ __name__: string }>; value: string }> };
    const value = (name: string) => body.result.find((r) => r.metric[0]!.__name__ === name)!.value;
    assert.equal(value('processingInferRequestNum'), '1');
    assert.equal(value('waitingInferRequestNum'), '1');
    for (const c of controllers) c.abort();
  });
});
