// The hardening settings as the configuration reads them: defaults, MindIE's keys, the token
// file, and a message naming the variable for each bad value (never showing a token).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.ts';

const TOKEN = 'a-token-of-more-than-16-chars';

function problemsOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return error.message;
  }
  assert.fail('expected a ConfigError');
}

describe('security configuration', () => {
  it('has generous defaults: no limit, no token, long timeouts', () => {
    const { security: s, limits: l } = loadConfig({});
    assert.deepEqual(
      [
        l.maxModels,
        l.maxConcurrency,
        s.metricsToken,
        l.headersTimeoutMs,
        l.requestTimeoutMs,
        l.upstreamConnectTimeoutMs,
        l.upstreamIdleTimeoutMs,
        l.totalTimeoutMs,
        l.drainTimeoutMs,
      ],
      [100, 0, undefined, 60_000, 300_000, 10_000, 600_000, 3_600_000, 30_000],
    );
    assert.equal(s.dataTls, undefined);
    assert.equal(s.allowAllZeroIp, false);
  });

  it("reads MindIE's maxLinkNum and allowAllZeroIpListening, below the variables", () => {
    const readFile = () => JSON.stringify({ ServerConfig: { maxLinkNum: 300, allowAllZeroIpListening: true, ipAddress: '0.0.0.0' } });
    const c = loadConfig({ INFERMETER_CONFIG: '/etc/mindie/config.json' }, { readFile });
    assert.deepEqual([c.limits.maxConcurrency, c.host], [300, '0.0.0.0']);
    assert.equal(loadConfig({ INFERMETER_CONFIG: 'c.json', INFERMETER_MAX_CONCURRENCY: '4' }, { readFile }).limits.maxConcurrency, 4);
    // A bad value from the file names the file's key, where it is to be fixed.
    assert.match(
      problemsOf(() => loadConfig({ INFERMETER_CONFIG: 'c.json' }, { readFile: () => '{"ServerConfig":{"maxLinkNum":-3}}' })),
      /INFERMETER_CONFIG ServerConfig\.maxLinkNum: expected an integer from 0 to 1000000, got "-3"/,
    );
    assert.match(
      problemsOf(() => loadConfig({ INFERMETER_CONFIG: 'c.json' }, { readFile: () => '{"ServerConfig":{"allowAllZeroIpListening":"maybe"}}' })),
      /ServerConfig\.allowAllZeroIpListening: expected 1 or 0/,
    );
  });

  it('reads the token from a file, trimmed; an unreadable or empty file stops the start', () => {
    const files: Record<string, string> = { '/run/secrets/token': `${TOKEN}\n`, '/run/secrets/empty': '\n' };
    const readBinary = (path: string): Buffer => {
      if (!(path in files)) throw Object.assign(new Error('no such file'), { code: 'ENOENT' });
      return Buffer.from(files[path]!);
    };
    assert.equal(loadConfig({ INFERMETER_METRICS_TOKEN_FILE: '/run/secrets/token' }, { readBinary }).security.metricsToken, TOKEN);
    assert.equal(
      loadConfig({ INFERMETER_METRICS_TOKEN: 'from-the-variable-0123', INFERMETER_METRICS_TOKEN_FILE: '/run/secrets/token' }, { readBinary }).security
        .metricsToken,
      'from-the-variable-0123',
    );
    assert.match(
      problemsOf(() => loadConfig({ INFERMETER_METRICS_TOKEN_FILE: '/run/secrets/nope' }, { readBinary })),
      /INFERMETER_METRICS_TOKEN_FILE: expected a readable file holding the token \(ENOENT\), got "\/run\/secrets\/nope"/,
    );
    assert.match(
      problemsOf(() => loadConfig({ INFERMETER_METRICS_TOKEN_FILE: '/run/secrets/empty' }, { readBinary })),
      /INFERMETER_METRICS_TOKEN_FILE: expected a file holding the token/,
    );
    const spaced = problemsOf(() => loadConfig({ INFERMETER_METRICS_TOKEN: 'has a space in the middle' }));
    assert.match(spaced, /INFERMETER_METRICS_TOKEN: expected a token of 16 to 4096 printable characters, no spaces, got "25 characters"/);
    assert.doesNotMatch(spaced, /space in the middle/, 'the token itself is never shown');
  });

  it('names each bad limit and timeout with the range it expects', () => {
    const message = problemsOf(() =>
      loadConfig({
        INFERMETER_MAX_MODELS: '0',
        INFERMETER_MAX_CONCURRENCY: '-1',
        INFERMETER_HEADERS_TIMEOUT_MS: '10',
        INFERMETER_UPSTREAM_IDLE_TIMEOUT_MS: 'soon',
        INFERMETER_TOTAL_TIMEOUT_MS: '1.5',
        INFERMETER_DRAIN_TIMEOUT_MS: '99999999',
      }),
    );
    assert.match(message, /INFERMETER_MAX_MODELS: expected an integer from 1 to 100000, got "0"/);
    assert.match(message, /INFERMETER_MAX_CONCURRENCY: expected an integer from 0 to 1000000, got "-1"/);
    assert.match(message, /INFERMETER_HEADERS_TIMEOUT_MS: expected an integer from 100 to 3600000, got "10"/);
    assert.match(message, /INFERMETER_UPSTREAM_IDLE_TIMEOUT_MS: expected an integer from 100 to 86400000, got "soon"/);
    assert.match(message, /INFERMETER_TOTAL_TIMEOUT_MS: expected an integer from 0 to 86400000, got "1.5"/);
    assert.match(message, /INFERMETER_DRAIN_TIMEOUT_MS: expected an integer from 0 to 3600000, got "99999999"/);
  });

  it('explains a port variable set by a Kubernetes service link', () => {
    assert.match(
      problemsOf(() => loadConfig({ INFERMETER_METRICS_PORT: 'tcp://10.96.0.10:1027' })),
      /INFERMETER_METRICS_PORT: expected an integer port from 0 to 65535 \(0 picks a free port\); this looks like a Kubernetes service link .*enableServiceLinks: false/,
    );
  });

  it('an unreadable upstream CA file stops the start', () => {
    assert.match(
      problemsOf(() => loadConfig({ INFERMETER_UPSTREAM_CA_FILE: '/nonexistent/ca.pem' })),
      /INFERMETER_UPSTREAM_CA_FILE: expected a readable PEM file of CA certificates \(ENOENT\)/,
    );
  });
});
