// infermeter_proxy_overhead_seconds: the proxy's own time per streamed response, from an
// upstream chunk's arrival to its write, the mean over the response's writes; on the relayed
// path and on the stripped one (usage injection), never for a non-streamed answer.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createRequestTimer } from '../../src/measure/request-timer.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';

const token = (t: string) => `data: {"choices":[{"index":0,"delta":{"content":"${t}"}}]}\n\n`;
const USAGE = 'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\n';

describe('infermeter_proxy_overhead_seconds', () => {
  it("is the mean of arrival-to-write over a response's writes (the timer, on a fake clock)", () => {
    let now = 0;
    let sample: RequestSample | undefined;
    const timer = createRequestTimer('chat', () => now, { started() {}, firstOutput() {}, finished: (s) => void (sample = s) });
    timer.identify('m', true);
    timer.responseHeaders(200, true);
    for (const [arrived, written] of [
      [10, 10.2],
      [20, 20.6],
      [30, 30.1],
    ] as const) {
      now = arrived;
      timer.chunkArrived();
      now = arrived + 0.05;
      timer.chunkArrived(); // a second chunk of the same batch: the batch's first arrival counts
      now = written;
      timer.responseBody();
      timer.responseBody(arrived); // the tap's later read of it, at its arrival time: not a write
    }
    timer.responseFinished();
    timer.close(true);
    assert.ok(Math.abs(sample!.proxyOverhead! - (0.2 + 0.6 + 0.1) / 3 / 1000) < 1e-12, String(sample!.proxyOverhead));
  });

  it('is observed once per streamed request, relayed or stripped, and never for a JSON answer', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) => {
      if (!req.body.toString().includes('"stream":true'))
        return { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{"usage":{"prompt_tokens":5,"completion_tokens":2}}' }] };
      // An injected request gets its usage chunk (stripped for the client); one that asked for usage too.
      return {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
        body: [
          { afterMs: 2, data: token('a') },
          { afterMs: 2, data: token('b') },
          { afterMs: 2, data: `${USAGE}data: [DONE]\n\n` },
        ],
      };
    });
    const app = await startProxy(t, upstream.url);
    const bodies = [
      '{"model":"m","stream":true}', // injected: the stripped path
      '{"model":"m","stream":true,"stream_options":{"include_usage":true}}', // relayed as it comes
      '{"model":"m"}', // not streamed
    ];
    const finished = nextFinished(app, bodies.length);
    for (const body of bodies) await (await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body })).arrayBuffer();
    const samples = await finished;
    for (const s of samples.slice(0, 2)) {
      assert.ok(s.proxyOverhead !== undefined && s.proxyOverhead > 0, `streamed: ${s.proxyOverhead}`);
      assert.ok(s.proxyOverhead < s.e2e!, 'a part of its e2e');
    }
    assert.equal(samples[2]!.proxyOverhead, undefined, 'not for a JSON answer');
    const m = await scrape(app);
    assert.equal(m.value('infermeter_proxy_overhead_seconds_count'), 2);
    assert.ok(Math.abs(m.value('infermeter_proxy_overhead_seconds_sum')! - (samples[0]!.proxyOverhead! + samples[1]!.proxyOverhead!)) < 1e-9);
  });
});
