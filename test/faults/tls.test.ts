// HTTPS on every plane and to the upstream, with real certificates and sockets.
import assert from 'node:assert/strict';
import { request as httpsRequest, createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { makeCerts, type TestCerts } from '../helpers/certs.ts';
import { startProxy } from '../helpers/proxy-harness.ts';

let certs: TestCerts;
before(() => {
  certs = makeCerts();
});
after(() => certs.remove());

function get(url: string, ca: Buffer, headers: Record<string, string> = {}, method = 'GET', body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { method, ca, headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('TLS', () => {
  it('serves HTTPS on the data, management and metrics ports, and reaches an HTTPS upstream through its CA', async (t) => {
    // An HTTPS upstream whose certificate only the given CA vouches for.
    const upstream = createHttpsServer({ key: certs.key, cert: certs.cert }, (req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: {"choices":[{"delta":{"content":"secure"}}]}\n\ndata: [DONE]\n\n');
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => upstream.close(() => resolve())));
    const upstreamUrl = `https://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const app = await startProxy(t, upstreamUrl, {
      INFERMETER_TLS_CERT: certs.certFile,
      INFERMETER_TLS_KEY: certs.encryptedKeyFile,
      INFERMETER_TLS_KEY_PASSPHRASE_FILE: certs.passphraseFile,
      INFERMETER_MANAGEMENT_TLS_CERT: certs.certFile,
      INFERMETER_MANAGEMENT_TLS_KEY: certs.keyFile,
      INFERMETER_UPSTREAM_CA_FILE: certs.caFile,
    });
    assert.match(app.dataUrl, /^https:/);
    assert.match(app.managementUrl, /^https:/);
    assert.match(app.metricsUrl!, /^https:/, 'the metrics port takes the management port\'s certificate');
    const res = await get(`${app.dataUrl}/v1/chat/completions`, certs.ca, { 'content-type': 'application/json' }, 'POST', '{"model":"m","stream":true,"stream_options":{"include_usage":true}}');
    assert.equal(res.status, 200);
    assert.equal(res.body, 'data: {"choices":[{"delta":{"content":"secure"}}]}\n\ndata: [DONE]\n\n');
    assert.equal((await get(`${app.managementUrl}/health`, certs.ca)).status, 200);
    const metrics = await get(app.metricsUrl!, certs.ca);
    assert.match(metrics.body, /request_success_total\{model_name="m"\} 1/);
    // Plain HTTP to a TLS port is not answered as HTTP.
    await assert.rejects(fetch(`${app.dataUrl.replace('https:', 'http:')}/v1/models`));
  });

  it('fails an upstream whose certificate it cannot verify, with a 502', async (t) => {
    const upstream = createHttpsServer({ key: certs.key, cert: certs.cert }, (_req, res) => res.end('{}'));
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => upstream.close(() => resolve())));
    const app = await startProxy(t, `https://127.0.0.1:${(upstream.address() as AddressInfo).port}`);
    const res = await fetch(`${app.dataUrl}/v1/completions`, { method: 'POST', body: '{"model":"m"}' });
    assert.equal(res.status, 502);
  });

  it('stops the start when a certificate cannot be read or does not go with its key', () => {
    const base = { INFERMETER_UPSTREAM: 'http://127.0.0.1:1' };
    assert.throws(
      () => loadConfig({ ...base, INFERMETER_TLS_CERT: '/nonexistent/cert.pem', INFERMETER_TLS_KEY: certs.keyFile }),
      (e: unknown) => e instanceof ConfigError && /INFERMETER_TLS_CERT: expected a readable PEM file \(ENOENT\)/.test(e.message),
    );
    assert.throws(
      () => loadConfig({ ...base, INFERMETER_MANAGEMENT_TLS_CERT: certs.caFile, INFERMETER_MANAGEMENT_TLS_KEY: certs.keyFile }),
      /INFERMETER_MANAGEMENT_TLS_CERT: expected a PEM certificate that goes with INFERMETER_MANAGEMENT_TLS_KEY/,
    );
    assert.throws(() => loadConfig({ ...base, INFERMETER_TLS_CERT: certs.certFile, INFERMETER_TLS_KEY: certs.encryptedKeyFile }), /INFERMETER_TLS_CERT/, 'an encrypted key without its passphrase');
    assert.throws(() => loadConfig({ ...base, INFERMETER_TLS_CERT: certs.certFile }), /INFERMETER_TLS_KEY: expected a PEM file: the certificate and the key go together/);
  });

  it('honours MindIE\'s httpsEnabled and TLS keys, relative to the config file', () => {
    const file = JSON.stringify({ ServerConfig: { httpsEnabled: true, tlsCert: 'server.pem', tlsPk: 'server.key', managementTlsCert: 'server.pem', managementTlsPk: 'server-encrypted.key', managementTlsPkPwd: 'pass.txt' } });
    const config = loadConfig({ INFERMETER_CONFIG: `${certs.dir}/config.json` }, { readFile: () => file });
    assert.ok(config.security.dataTls?.cert.equals(certs.cert));
    assert.equal(config.security.managementTls?.passphrase, 'correct horse battery staple');
    assert.throws(() => loadConfig({ INFERMETER_CONFIG: `${certs.dir}/config.json` }, { readFile: () => JSON.stringify({ ServerConfig: { httpsEnabled: true } }) }), /a certificate for HTTPS \(ServerConfig.httpsEnabled is true/);
  });
});
