// Who can reach what: the metrics interfaces only on their own ports, never on the data plane;
// no listening on every address unless allowed; a bearer token for the management and metrics
// ports; no secret in a log line or a label.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/log.ts';
import { nextFinished, startProxy } from '../helpers/proxy-harness.ts';
import { startReplayUpstream } from '../helpers/replay-upstream.ts';

const TOKEN = 'scrape-token-0123456789abcdef';

describe('access control', () => {
  it('serves /metrics, /metrics-json and /health only on the management and metrics ports; the data plane forwards them', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) => ({ status: 200, headers: { 'content-type': 'text/plain' }, body: [{ data: `upstream ${req.url}` }] }));
    const app = await startProxy(t, upstream.url);
    for (const path of ['/metrics', '/metrics-json', '/health', '/ready']) {
      const res = await fetch(`${app.dataUrl}${path}`);
      assert.equal(await res.text(), `upstream ${path}`, `${path} on the data plane is the upstream's`);
    }
    assert.equal((await fetch(`${app.managementUrl}/metrics`)).status, 404, '/metrics only on the metrics port');
    assert.equal((await fetch(`${app.managementUrl}/metrics-json`)).status, 200);
  });

  it('refuses to listen on every address unless allowed', () => {
    assert.throws(
      () => loadConfig({ INFERMETER_HOST: '0.0.0.0' }),
      (e: unknown) => e instanceof ConfigError && /INFERMETER_HOST: expected a specific address/.test(e.message),
    );
    assert.throws(
      () => loadConfig({ INFERMETER_HOST: '127.0.0.1', INFERMETER_MANAGEMENT_HOST: '::' }),
      /INFERMETER_MANAGEMENT_HOST: expected a specific address/,
    );
    assert.equal(loadConfig({ INFERMETER_HOST: '0.0.0.0', INFERMETER_ALLOW_ALL_ZERO_IP: '1' }).host, '0.0.0.0');
    assert.equal(
      loadConfig({ INFERMETER_HOST: '0.0.0.0', INFERMETER_CONFIG: 'c.json' }, { readFile: () => '{"ServerConfig":{"allowAllZeroIpListening":true}}' }).host,
      '0.0.0.0',
    );
  });

  it('requires the bearer token on the management and metrics ports, but for the probes', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    const app = await startProxy(t, upstream.url, { INFERMETER_METRICS_TOKEN: TOKEN });
    for (const url of [app.metricsUrl!, `${app.managementUrl}/metrics-json`]) {
      for (const authorization of [
        undefined,
        'Bearer wrong-token-000000000000',
        `Basic ${TOKEN}`,
        `Bearer ${TOKEN}x`,
        `Bearer${TOKEN}`,
        `Bearer ${TOKEN} ${TOKEN}`,
        `Bearer\t${TOKEN}`,
        `Bearer ${TOKEN.slice(0, -1)}`,
        'Bearer ',
        `x Bearer ${TOKEN}`,
      ]) {
        const res = await fetch(url, authorization === undefined ? {} : { headers: { authorization } });
        assert.equal(res.status, 401, `${url} with ${authorization}`);
        assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="infermeter"');
        assert.doesNotMatch(await res.text(), /request_received_total|resultType/, 'no data');
      }
      // RFC 9110: the scheme is case-insensitive, and one or more spaces follow it.
      for (const authorization of [`Bearer ${TOKEN}`, `bearer ${TOKEN}`, `BEARER ${TOKEN}`, `bEaReR ${TOKEN}`, `Bearer   ${TOKEN}`]) {
        const ok = await fetch(url, { headers: { authorization } });
        assert.equal(ok.status, 200, `${url} with ${authorization}`);
      }
    }
    assert.equal((await fetch(`${app.managementUrl}/health`)).status, 200, 'probes need no token');
    assert.equal((await fetch(`${app.managementUrl}/ready`)).status, 200);
    assert.throws(
      () => loadConfig({ INFERMETER_METRICS_TOKEN: 'short' }),
      (e: unknown) =>
        e instanceof ConfigError &&
        /INFERMETER_METRICS_TOKEN: expected a token of 16 to 4096 printable characters, no spaces, got "5 characters"/.test(e.message),
    );
  });

  it('never writes a secret to a log line or a label', async (t) => {
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond((req) =>
      req.url.includes('fail')
        ? { status: 500, body: [{ data: 'x' }], end: 'reset' }
        : { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{}' }] },
    );
    const lines: string[] = [];
    const app = await startProxy(t, upstream.url, { INFERMETER_METRICS_TOKEN: TOKEN }, { log: createLogger('debug', (l) => lines.push(l)) });
    const finished = nextFinished(app, 2);
    const secret = 'sk-live-SECRET0123456789';
    const headers = { authorization: `Bearer ${secret}`, 'api-key': secret, 'x-api-key': secret, cookie: `session=${secret}` };
    await (
      await fetch(`${app.dataUrl}/v1/chat/completions?key=${secret}`, { method: 'POST', headers, body: JSON.stringify({ model: 'm', user: secret }) })
    ).arrayBuffer();
    await fetch(`${app.dataUrl}/v1/completions?fail=1&key=${secret}`, { method: 'POST', headers, body: '{"model":"m"}' })
      .then((r) => r.arrayBuffer())
      .catch(() => undefined);
    await (await fetch(`${app.dataUrl}/fail?key=${secret}`, { headers })).arrayBuffer().catch(() => undefined);
    await finished;
    const metrics = await (await fetch(app.metricsUrl!, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    assert.ok(lines.length > 0, 'something was logged');
    assert.doesNotMatch(lines.join('\n'), /SECRET|scrape-token/);
    assert.doesNotMatch(metrics, /SECRET|scrape-token/);
  });
});
