// INFERMETER_TENANT, INFERMETER_TENANT_ALIASES and INFERMETER_MAX_TENANTS as loadConfig reads
// them, and the tenant a request's headers give.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { parseTenantAliases } from '../../src/tenants/tenant-config.ts';
import { apiKeyOf, createTenantOf, keyTenant } from '../../src/tenants/tenant-of.ts';
import { listen } from '../helpers/listen.ts';

const problems = (env: Record<string, string>, files: Record<string, string> = {}): string[] => {
  try {
    loadConfig(env, { readFile: (p) => (p in files ? files[p]! : assert.fail(`read ${p}`)) });
    return [];
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return error.problems.map((p) => `${p.variable}: ${p.expected}`);
  }
};

describe('tenant configuration', () => {
  it('reads the source, the cap and the alias file', () => {
    assert.deepEqual(loadConfig({}).tenant, { source: { kind: 'off' }, aliasesFile: undefined, aliases: new Map(), max: 100 });
    const config = loadConfig(
      { INFERMETER_TENANT: 'header:X-Tenant-Id', INFERMETER_MAX_TENANTS: '7', INFERMETER_TENANT_ALIASES: '/a.json' },
      { readFile: () => '{"acme": "Acme Corp"}' },
    );
    assert.deepEqual(config.tenant, {
      source: { kind: 'header', header: 'x-tenant-id' },
      aliasesFile: '/a.json',
      aliases: new Map([['acme', 'Acme Corp']]),
      max: 7,
    });
    assert.deepEqual(loadConfig({ INFERMETER_TENANT: 'API-KEY' }).tenant.source, { kind: 'api-key' });
  });

  it('refuses bad values, credential headers and a bad alias file, naming the variable and never the content', () => {
    assert.match(problems({ INFERMETER_TENANT: 'cookie' }).join(), /INFERMETER_TENANT: off, header:<header name>/);
    assert.match(problems({ INFERMETER_TENANT: 'header:' }).join(), /INFERMETER_TENANT: off, header/);
    assert.match(problems({ INFERMETER_TENANT: 'header:Authorization' }).join(), /INFERMETER_TENANT: api-key for a credential header/);
    assert.match(problems({ INFERMETER_TENANT: 'header:api-key' }).join(), /INFERMETER_TENANT: api-key for a credential header/);
    assert.match(problems({ INFERMETER_MAX_TENANTS: '0' }).join(), /INFERMETER_MAX_TENANTS: an integer from 1 to 10000/);
    assert.match(problems({ INFERMETER_TENANT_ALIASES: '/a.json' }, { '/a.json': '{}' }).join(), /INFERMETER_TENANT_ALIASES: INFERMETER_TENANT to be/);
    const bad = problems({ INFERMETER_TENANT: 'api-key', INFERMETER_TENANT_ALIASES: '/a.json' }, { '/a.json': '{"key-SECRET": 1}' });
    assert.match(bad.join(), /INFERMETER_TENANT_ALIASES: a JSON object mapping tenants to names: entry 1's name/);
    assert.doesNotMatch(bad.join(), /SECRET/);
    assert.match(problems({ INFERMETER_TENANT: 'api-key', INFERMETER_TENANT_ALIASES: '/missing.json' }, {}).join(), /INFERMETER_TENANT_ALIASES/);
  });

  it('checks an alias file', () => {
    assert.deepEqual(parseTenantAliases('{"a":"A","key-0123456789ab":"search-team"}'), {
      ok: true,
      aliases: new Map([
        ['a', 'A'],
        ['key-0123456789ab', 'search-team'],
      ]),
    });
    for (const [text, why] of [
      ['{', /not valid JSON/],
      ['[]', /no object/],
      ['{"a":"other"}', /reserved/],
      ['{"a":"none"}', /reserved/],
      ['{"a":""}', /printable/],
      ['{"a":"x\\ny"}', /printable/],
      [`{"a":"${'x'.repeat(129)}"}`, /printable/],
      ['{"":"x"}', /empty tenant/],
    ] as const) {
      const read = parseTenantAliases(text);
      assert.ok(!read.ok && why.test(read.expected), `${text}: ${JSON.stringify(read)}`);
    }
  });
});

describe("a request's tenant", () => {
  it("is key- and the first 12 hex digits of the key's SHA-256", () => {
    // `printf %s sk-test | sha256sum | cut -c1-12`, as docs/metrics.md tells an operator to check.
    assert.equal(keyTenant('sk-test'), 'key-f3abf2a6cc4f');
    assert.notEqual(keyTenant('sk-test'), keyTenant('sk-tesu'));
  });

  it('reads the key from Bearer, then api-key, then x-api-key', () => {
    assert.equal(apiKeyOf({ authorization: 'Bearer k1', 'api-key': 'k2' }), 'k1');
    assert.equal(apiKeyOf({ authorization: 'bearer   k1' }), 'k1');
    assert.equal(apiKeyOf({ authorization: 'Basic Zm9v', 'api-key': ' k2 ' }), 'k2');
    assert.equal(apiKeyOf({ 'x-api-key': 'k3' }), 'k3');
    assert.equal(apiKeyOf({ authorization: 'Bearer two words' }), '');
  });

  it('maps through the aliases in use and sanitises the rest', () => {
    let aliases = new Map([[keyTenant('k1'), 'search-team']]);
    const ofKey = createTenantOf({ kind: 'api-key' }, () => aliases)!;
    assert.equal(ofKey({ authorization: 'Bearer k1' }), 'search-team');
    assert.equal(ofKey({ authorization: 'Bearer k2' }), keyTenant('k2'));
    assert.equal(ofKey({}), 'none');
    aliases = new Map();
    assert.equal(ofKey({ authorization: 'Bearer k1' }), keyTenant('k1'), 'the mapping in use now');
    const ofHeader = createTenantOf({ kind: 'header', header: 'x-tenant' }, () => new Map([['a', 'Team A']]))!;
    assert.equal(ofHeader({ 'x-tenant': 'a' }), 'Team A');
    assert.equal(ofHeader({ 'x-tenant': ' b ' }), 'b');
    assert.equal(ofHeader({ 'x-tenant': 'c\u0001d' }), 'c_d');
    assert.equal(ofHeader({ 'x-tenant': '' }), 'none');
    assert.equal(
      createTenantOf({ kind: 'off' }, () => new Map()),
      undefined,
    );
  });

  it('reads a header value as the UTF-8 its sender wrote (Node hands its bytes over as Latin-1)', async (t) => {
    // Over a real socket: the bytes of UTF-8 `café` as Node's server parses them.
    const { createServer } = await import('node:http');
    const { connect } = await import('node:net');
    let received!: (header: string) => void;
    const header = new Promise<string>((resolve) => (received = resolve));
    const { port } = await listen(
      t,
      createServer((req, res) => {
        received(req.headers['x-tenant'] as string);
        res.end();
      }),
    );
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => {});
    socket.end(
      Buffer.concat([Buffer.from('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Tenant: '), Buffer.from('café', 'utf8'), Buffer.from('\r\n\r\n')]),
    );
    const parsed = await header;
    assert.equal(parsed, 'cafÃ©', 'what Node gives');
    const of = createTenantOf({ kind: 'header', header: 'x-tenant' }, () => new Map([['café', 'Café Team']]))!;
    assert.equal(of({ 'x-tenant': parsed }), 'Café Team', 'the alias keyed café matches');
    assert.equal(of({ 'x-tenant': Buffer.from('naïve', 'utf8').toString('latin1') }), 'naïve');
    assert.equal(of({ 'x-tenant': '\u00ff' }), '\ufffd', 'a byte that is not UTF-8 becomes U+FFFD');
  });
});
