// HTTPS on every plane and to the upstream, with real certificates and sockets.
import assert from 'node:assert/strict';
import { request as httpsRequest, createServer as createHttpsServer } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { readFileSync } from 'node:fs';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { certificateValidity } from '../../src/config/security.ts';
import { createLogger } from '../../src/log.ts';
import { makeCerts, type TestCerts } from '../helpers/certs.ts';
import { startProxy } from '../helpers/proxy-harness.ts';
import { listen } from '../helpers/listen.ts';

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
    const upstream = createHttpsServer({ key: certs.key, cert: certs.cert }, (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: {"choices":[{"delta":{"content":"secure"}}]}\n\ndata: [DONE]\n\n');
    });
    const upstreamUrl = (await listen(t, upstream)).url;
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
    assert.match(app.metricsUrl!, /^https:/, "the metrics port takes the management port's certificate");
    const res = await get(
      `${app.dataUrl}/v1/chat/completions`,
      certs.ca,
      { 'content-type': 'application/json' },
      'POST',
      '{"model":"m","stream":true,"stream_options":{"include_usage":true}}',
    );
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
    const app = await startProxy(t, (await listen(t, upstream)).url);
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
    assert.throws(
      () => loadConfig({ ...base, INFERMETER_TLS_CERT: certs.certFile, INFERMETER_TLS_KEY: certs.encryptedKeyFile }),
      /INFERMETER_TLS_CERT/,
      'an encrypted key without its passphrase',
    );
    assert.throws(
      () => loadConfig({ ...base, INFERMETER_TLS_CERT: certs.certFile }),
      /INFERMETER_TLS_KEY: expected a PEM file: the certificate and the key go together/,
    );
  });

  it('refuses a key or a passphrase without its certificate on every port, rather than serve in plain HTTP', () => {
    const base = { INFERMETER_UPSTREAM: 'http://127.0.0.1:1' };
    const management = { INFERMETER_MANAGEMENT_TLS_CERT: certs.certFile, INFERMETER_MANAGEMENT_TLS_KEY: certs.keyFile };
    for (const [env, problem] of [
      [
        { INFERMETER_METRICS_TLS_KEY: certs.keyFile },
        /INFERMETER_METRICS_TLS_CERT: expected a PEM file: the certificate and the key go together \(INFERMETER_METRICS_TLS_KEY is set\)/,
      ],
      [
        { ...management, INFERMETER_METRICS_TLS_KEY: certs.keyFile },
        /INFERMETER_METRICS_TLS_CERT: expected a PEM file: the certificate and the key go together/,
      ],
      [{ INFERMETER_METRICS_TLS_KEY_PASSPHRASE_FILE: certs.passphraseFile }, /INFERMETER_METRICS_TLS_KEY_PASSPHRASE_FILE: expected to go with a key/],
      [{ INFERMETER_TLS_KEY: certs.keyFile }, /INFERMETER_TLS_CERT: expected a PEM file: the certificate and the key go together/],
      [{ INFERMETER_TLS_KEY_PASSPHRASE_FILE: certs.passphraseFile }, /INFERMETER_TLS_KEY_PASSPHRASE_FILE: expected to go with a key/],
      [{ INFERMETER_MANAGEMENT_TLS_KEY: certs.keyFile }, /INFERMETER_MANAGEMENT_TLS_CERT: expected a PEM file/],
      [{ INFERMETER_MANAGEMENT_TLS_KEY_PASSPHRASE_FILE: certs.passphraseFile }, /INFERMETER_MANAGEMENT_TLS_KEY_PASSPHRASE_FILE: expected to go with a key/],
    ] as const) {
      assert.throws(
        () => loadConfig({ ...base, ...env }),
        (e: unknown) => e instanceof ConfigError && problem.test(e.message),
        JSON.stringify(env),
      );
    }
    // MindIE's config file: a metrics key without its certificate, likewise.
    const file = JSON.stringify({
      ServerConfig: {
        httpsEnabled: true,
        tlsCert: 'server.pem',
        tlsPk: 'server.key',
        managementTlsCert: 'server.pem',
        managementTlsPk: 'server.key',
        metricsTlsPk: 'server.key',
      },
    });
    // The problem names the file's keys, not a variable the operator never set.
    assert.throws(
      () => loadConfig({ INFERMETER_CONFIG: `${certs.dir}/config.json` }, { readFile: () => file }),
      /INFERMETER_CONFIG ServerConfig\.metricsTlsCert: expected a PEM file: the certificate and the key go together \(INFERMETER_CONFIG ServerConfig\.metricsTlsPk is set\)/,
    );
    // Both given: the metrics port serves its own certificate.
    const own = loadConfig({
      ...base,
      ...management,
      INFERMETER_METRICS_TLS_CERT: certs.certFile,
      INFERMETER_METRICS_TLS_KEY: certs.encryptedKeyFile,
      INFERMETER_METRICS_TLS_KEY_PASSPHRASE_FILE: certs.passphraseFile,
    });
    assert.equal(own.security.metricsTls?.passphrase, 'correct horse battery staple');
  });

  it("names the config file's key for a path that came from it, and calls a passphrase file a passphrase file", () => {
    const missing = `${certs.dir}/no-such-file`;
    const inFile = (server: Record<string, unknown>) => {
      const text = JSON.stringify({
        ServerConfig: {
          httpsEnabled: true,
          tlsCert: certs.certFile,
          tlsPk: certs.keyFile,
          managementTlsCert: certs.certFile,
          managementTlsPk: certs.keyFile,
          ...server,
        },
      });
      return () =>
        loadConfig(
          { INFERMETER_CONFIG: `${certs.dir}/config.json` },
          { readFile: (path) => (path.endsWith('config.json') ? text : readFileSync(path, 'utf8')) },
        );
    };
    assert.throws(
      inFile({ tlsCert: missing }),
      (e: unknown) =>
        e instanceof ConfigError &&
        /INFERMETER_CONFIG ServerConfig\.tlsCert: expected a readable PEM file \(ENOENT\)/.test(e.message) &&
        !/INFERMETER_TLS_CERT/.test(e.message),
    );
    assert.throws(
      inFile({ managementTlsPk: certs.encryptedKeyFile, managementTlsPkPwd: missing }),
      /INFERMETER_CONFIG ServerConfig\.managementTlsPkPwd: expected a readable passphrase file \(the key's passphrase on its first line\) \(ENOENT\)/,
    );
    assert.throws(
      inFile({ managementTlsPk: certs.encryptedKeyFile }),
      /INFERMETER_CONFIG ServerConfig\.managementTlsCert: expected a PEM certificate that goes with INFERMETER_CONFIG ServerConfig\.managementTlsPk: /,
    );
    // From the variables, the variables are named, the passphrase file as such.
    assert.throws(
      () =>
        loadConfig({
          INFERMETER_UPSTREAM: 'http://127.0.0.1:1',
          INFERMETER_TLS_CERT: certs.certFile,
          INFERMETER_TLS_KEY: certs.encryptedKeyFile,
          INFERMETER_TLS_KEY_PASSPHRASE_FILE: missing,
        }),
      /INFERMETER_TLS_KEY_PASSPHRASE_FILE: expected a readable passphrase file/,
    );
  });

  it('warns at start of a certificate expired or not yet valid, naming the variable, the file and the date, and still serves', async (t) => {
    const expired = certs.certWithDates('expired.pem', '20200101000000Z', '20210101000000Z');
    const future = certs.certWithDates('future.pem', '20990101000000Z', '21000101000000Z');
    const lines: Array<Record<string, unknown>> = [];
    const app = await startProxy(
      t,
      'http://127.0.0.1:9',
      {
        INFERMETER_MANAGEMENT_TLS_CERT: expired,
        INFERMETER_MANAGEMENT_TLS_KEY: certs.keyFile,
        INFERMETER_METRICS_TLS_CERT: future,
        INFERMETER_METRICS_TLS_KEY: certs.keyFile,
        INFERMETER_TLS_CERT: certs.certFile,
        INFERMETER_TLS_KEY: certs.keyFile,
      },
      { log: createLogger('info', (l) => lines.push(JSON.parse(l) as Record<string, unknown>)) },
    );
    const warnings = lines.filter((l) => l.level === 'warn');
    assert.deepEqual(
      warnings.map(({ msg, variable, file, not_after, not_before }) => ({ msg, variable, file, not_after, not_before })),
      [
        {
          msg: 'TLS certificate expired: clients will refuse it',
          variable: 'INFERMETER_MANAGEMENT_TLS_CERT',
          file: expired,
          not_after: '2021-01-01T00:00:00.000Z',
          not_before: undefined,
        },
        {
          msg: 'TLS certificate not valid yet: clients will refuse it',
          variable: 'INFERMETER_METRICS_TLS_CERT',
          file: future,
          not_after: undefined,
          not_before: '2099-01-01T00:00:00.000Z',
        },
      ],
      'one warning per certificate out of its dates, none for the valid one',
    );
    assert.ok(
      warnings.every((w) => w.subject === 'CN=127.0.0.1'),
      JSON.stringify(warnings),
    );
    assert.ok(lines.findIndex((l) => l.msg === 'infermeter started') > lines.indexOf(warnings[1]!), 'said at start');
    // Started anyway: a client that does not check dates is served.
    const health = await new Promise<number>((resolve, reject) => {
      httpsRequest(`${app.managementUrl}/health`, { rejectUnauthorized: false }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
    assert.equal(health, 200);
    // Every certificate of a chain file is read: the expired one second in the file is named.
    assert.deepEqual(
      certificateValidity(Buffer.concat([certs.cert, readFileSync(expired)]), Date.now()).map((p) => [p.state, p.date.toISOString()]),
      [['expired', '2021-01-01T00:00:00.000Z']],
    );
  });

  it("honours MindIE's httpsEnabled and TLS keys, relative to the config file", () => {
    const file = JSON.stringify({
      ServerConfig: {
        httpsEnabled: true,
        tlsCert: 'server.pem',
        tlsPk: 'server.key',
        managementTlsCert: 'server.pem',
        managementTlsPk: 'server-encrypted.key',
        managementTlsPkPwd: 'pass.txt',
      },
    });
    const config = loadConfig({ INFERMETER_CONFIG: `${certs.dir}/config.json` }, { readFile: () => file });
    assert.ok(config.security.dataTls?.cert.equals(certs.cert));
    assert.equal(config.security.managementTls?.passphrase, 'correct horse battery staple');
    assert.throws(
      () => loadConfig({ INFERMETER_CONFIG: `${certs.dir}/config.json` }, { readFile: () => JSON.stringify({ ServerConfig: { httpsEnabled: true } }) }),
      /a certificate for HTTPS \(ServerConfig.httpsEnabled is true/,
    );
  });
});
