// Failures told apart by whose fault they are (infermeter_request_failures_total{class}), per
// model, while MindIE's request_failed_total keeps counting every failure.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { failureClass } from '../../src/metrics/own/failure-classes.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';
import { freePort } from '../helpers/listen.ts';

const json = (status: number, body: string) => ({ status, headers: { 'content-type': 'application/json' }, body: [{ data: body }] });

describe('failure classes', () => {
  it("a 4xx is the client's, everything else the server's", () => {
    assert.equal(failureClass({ failure: 'upstream_status', status: 404 }), 'client_error');
    assert.equal(failureClass({ failure: 'upstream_status', status: 400 }), 'client_error');
    // 408 and 429 are the service's capacity (as the goodput verdict has them): one rule for both.
    assert.equal(failureClass({ failure: 'upstream_status', status: 429 }), 'server_error');
    assert.equal(failureClass({ failure: 'upstream_status', status: 408 }), 'server_error');
    assert.equal(failureClass({ failure: 'upstream_status', status: 500 }), 'server_error');
    assert.equal(failureClass({ failure: 'upstream_status', status: 302 }), 'server_error');
    assert.equal(failureClass({ failure: 'upstream_unreachable', status: 502 }), 'server_error');
    assert.equal(failureClass({ failure: 'upstream_timeout', status: 504 }), 'server_error');
    assert.equal(failureClass({ failure: 'stream_error', status: 200 }), 'server_error');
  });

  it('counts client errors and server failures per model, request_failed_total both', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) => {
      const body = req.body.toString();
      if (body.includes('"no-such-model"'))
        return json(404, '{"error":{"message":"The model `no-such-model` does not exist.","type":"NotFoundError","code":404}}');
      if (body.includes('"malformed"')) return json(400, '{"error":{"message":"bad request","code":400}}');
      if (body.includes('"broken"')) return json(500, '{"error":{"message":"engine died"}}');
      if (body.includes('"erroring"'))
        return {
          status: 200,
          headers: { 'content-type': 'text/event-stream' },
          body: [{ data: 'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"error":{"message":"out of memory"}}\n\n' }],
        };
      return json(200, '{"usage":{"prompt_tokens":1,"completion_tokens":1}}');
    });
    const app = await startProxy(t, upstream.url);
    const plan = [
      ['no-such-model', 3],
      ['malformed', 1],
      ['broken', 2],
      ['erroring', 1],
      ['m', 2],
    ] as const;
    const finished = nextFinished(app, 9);
    for (const [model, n] of plan) {
      for (let i = 0; i < n; i++) {
        const stream = model === 'erroring';
        await (await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model, stream, messages: [] }) })).arrayBuffer();
      }
    }
    await finished;
    const m = await scrape(app);
    const failures = (model: string, cls: string, reason: string) => m.value('infermeter_request_failures_total', { model_name: model, class: cls, reason });
    assert.equal(failures('no-such-model', 'client_error', 'upstream_status'), 3);
    assert.equal(failures('no-such-model', 'server_error', 'upstream_status'), 0);
    assert.equal(failures('malformed', 'client_error', 'upstream_status'), 1);
    assert.equal(failures('broken', 'server_error', 'upstream_status'), 2);
    assert.equal(failures('broken', 'client_error', 'upstream_status'), 0);
    assert.equal(failures('erroring', 'server_error', 'stream_error'), 1);
    assert.equal(failures('m', 'server_error', 'upstream_unreachable'), 0, 'a healthy model has its series from 0');
    // The spec's family counts every failure, whoever's fault.
    assert.equal(m.value('request_failed_total', { model_name: 'no-such-model' }), 3);
    assert.equal(m.value('request_failed_total', { model_name: 'broken' }), 2);
    assert.equal(m.value('request_failed_total', { model_name: 'erroring' }), 1);
  });

  it("counts an unreachable upstream as the server's", async (t) => {
    const port = await freePort();
    const app = await startProxy(t, `http://127.0.0.1:${port}`); // nothing listens there now
    const finished = nextFinished(app, 1);
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: '{"model":"m","messages":[]}' });
    await res.arrayBuffer();
    assert.equal(res.status, 502);
    await finished;
    const m = await scrape(app);
    assert.equal(m.value('infermeter_request_failures_total', { model_name: 'm', class: 'server_error', reason: 'upstream_unreachable' }), 1);
    assert.equal(m.value('infermeter_request_failures_total', { model_name: 'm', class: 'client_error', reason: 'upstream_status' }), 0);
  });
});
