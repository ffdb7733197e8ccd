// Tenant places go only to tenants whose requests the engine accepted (issue 30): with
// INFERMETER_TENANT=api-key, 100 requests with random keys the engine answers 401 take no
// place; the real tenants that come after get their own series, not `other`; the refused
// requests are counted under tenant="unauthenticated". Only a 2xx gives a place (issue 49):
// vLLM's key check guards only paths under /v1, while infermeter meters inference routes under
// any prefix, so random keys answered 404 on /x/v1/chat/completions take no place either.
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, it } from 'node:test';
import { keyTenant } from '../../src/tenants/tenant-of.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { seededRandom } from '../helpers/random.ts';
import { listen } from '../helpers/listen.ts';
import { post } from '../helpers/post.ts';

const VALID = ['sk-alpha', 'sk-beta', 'sk-gamma'];

describe('tenant places', () => {
  it('are given only to tenants the engine accepted: 100 refused keys leave every place to the real tenants', async (t) => {
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const key = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
        if (key === undefined || !VALID.includes(key)) {
          res.writeHead(401, { 'content-type': 'application/json' });
          res.end('{"error":{"message":"invalid api key","type":"invalid_request_error","code":"invalid_api_key"}}');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"choices":[{"index":0,"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":2}}');
      });
    });
    const app = await startProxy(t, (await listen(t, server)).url, { INFERMETER_TENANT: 'api-key', INFERMETER_MAX_TENANTS: '3' });
    const send = async (key: string): Promise<number> =>
      (await post(`${app.dataUrl}/v1/chat/completions`, '{"model":"m","messages":[]}', { authorization: `Bearer ${key}` })).status;
    const random = seededRandom(7);
    let finished = nextFinished(app, 100);
    for (let i = 0; i < 100; i++) assert.equal(await send(`sk-${Math.floor(random() * 2 ** 48).toString(16)}`), 401);
    await finished;
    finished = nextFinished(app, 6);
    for (const key of [...VALID, ...VALID]) assert.equal(await send(key), 200);
    await finished;

    const m = await scrape(app);
    for (const key of VALID) {
      assert.equal(m.value('infermeter_tenant_requests_total', { tenant: keyTenant(key), model_name: 'm', outcome: 'success' }), 2, `${key}'s own series`);
      assert.equal(m.value('infermeter_tenant_generation_tokens_total', { tenant: keyTenant(key), model_name: 'm' }), 4);
    }
    assert.equal(
      m.value('infermeter_tenant_requests_total', { tenant: 'unauthenticated', model_name: 'm', outcome: 'failed' }),
      100,
      'the refused keys are counted, under one label',
    );
    assert.equal(
      m.value('infermeter_tenant_requests_total', { tenant: 'other', model_name: 'm', outcome: 'success' }),
      undefined,
      'no real tenant folded into other',
    );
    assert.equal(m.value('infermeter_tenant_label_overflow_total'), 0);
    const tenants = new Set(m.series('infermeter_tenant_requests_total').map((s) => s.labels.tenant));
    assert.deepEqual([...tenants].sort(), [...VALID.map(keyTenant), 'unauthenticated'].sort());
  });

  it('are given only on a 2xx: 102 random keys answered 404 on a path the key check does not guard take none', async (t) => {
    // As vLLM: the key is checked only on paths starting with /v1; any other path is 404.
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (!(req.url ?? '').startsWith('/v1')) {
          res.writeHead(404, { 'content-type': 'application/json' });
          res.end('{"detail":"Not Found"}');
          return;
        }
        const key = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
        if (key === undefined || !VALID.includes(key)) {
          res.writeHead(401, { 'content-type': 'application/json' });
          res.end('{"error":"Unauthorized"}');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"choices":[{"index":0,"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":2}}');
      });
    });
    const app = await startProxy(t, (await listen(t, server)).url, { INFERMETER_TENANT: 'api-key', INFERMETER_MAX_TENANTS: '100' });
    const send = async (path: string, key: string): Promise<number> =>
      (await post(`${app.dataUrl}${path}`, '{"model":"m","messages":[]}', { authorization: `Bearer ${key}` })).status;
    const random = seededRandom(11);
    let finished = nextFinished(app, 102);
    for (let i = 0; i < 102; i++) assert.equal(await send('/x/v1/chat/completions', `sk-${Math.floor(random() * 2 ** 48).toString(16)}`), 404);
    await finished;
    finished = nextFinished(app, 3);
    for (const key of VALID) assert.equal(await send('/v1/chat/completions', key), 200);
    await finished;
    // A tenant with a place keeps its label on a later non-2xx answer.
    finished = nextFinished(app, 1);
    assert.equal(await send('/x/v1/chat/completions', VALID[0]!), 404);
    await finished;

    const m = await scrape(app);
    for (const key of VALID) {
      assert.equal(m.value('infermeter_tenant_requests_total', { tenant: keyTenant(key), model_name: 'm', outcome: 'success' }), 1, `${key}'s own series`);
    }
    assert.equal(m.value('infermeter_tenant_requests_total', { tenant: keyTenant(VALID[0]!), model_name: 'm', outcome: 'failed' }), 1);
    assert.equal(m.value('infermeter_tenant_requests_total', { tenant: 'unauthenticated', model_name: 'm', outcome: 'failed' }), 102);
    assert.equal(m.value('infermeter_tenant_label_overflow_total'), 0);
    const tenants = new Set(m.series('infermeter_tenant_requests_total').map((s) => s.labels.tenant));
    assert.deepEqual([...tenants].sort(), [...VALID.map(keyTenant), 'unauthenticated'].sort());
  });
});
