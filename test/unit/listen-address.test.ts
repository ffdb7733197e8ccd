// Listening on every address is refused unless allowed, whatever the spelling: the guard reads
// the address, not the text. Checked against the OS's own reading of each spelling (getaddrinfo,
// through dns.lookup, as Node's listen resolves a host) and Node's BlockList as the judge of
// "unspecified", over a generated corpus of numeric IPv4 forms (1 to 4 parts, decimal, octal,
// hex) and IPv6 notations (compressed, mapped, zoned).
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { BlockList } from 'node:net';
import { describe, it } from 'node:test';
import { startInfermeter } from '../../src/app.ts';
import { startClusterPrimary } from '../../src/cluster/primary.ts';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { isAllAddresses, resolveListenAddress } from '../../src/config/listen-addresses.ts';
import { silentLogger } from '../../src/log.ts';
import { seededRandom } from '../helpers/random.ts';

const unspecified = new BlockList();
unspecified.addAddress('0.0.0.0', 'ipv4');
unspecified.addAddress('::', 'ipv6');

/** What the OS binds for a spelling: resolved as Node's listen resolves it, judged by BlockList. */
async function osSaysAll(spelling: string): Promise<boolean> {
  const bare = spelling.replace(/^\[(.*)\]$/, '$1');
  const { address, family } = await lookup(bare);
  return unspecified.check(address.replace(/%.*$/, ''), family === 6 ? 'ipv6' : 'ipv4');
}

/** Numeric IPv4 spellings of `bytes` as inet_aton reads them: 1 to 4 parts, each in base 8, 10 or 16. */
function ipv4Spellings(bytes: readonly number[], random: () => number, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const parts = 1 + Math.floor(random() * 4);
    // The last part holds the remaining bytes, big-endian.
    const values = [...bytes.slice(0, parts - 1), bytes.slice(parts - 1).reduce((v, b) => v * 256 + b, 0)];
    out.push(
      values
        .map((v) => {
          const r = random();
          if (r < 0.3) return `0x${'0'.repeat(Math.floor(random() * 3))}${v.toString(16)}`;
          if (r < 0.6 && v !== 0) return `0${v.toString(8)}`;
          if (r < 0.6) return '0'.repeat(1 + Math.floor(random() * 4));
          return String(v);
        })
        .join('.'),
    );
  }
  return out;
}

const IPV6_ALL = [
  '::',
  '::0',
  '0::',
  '0::0',
  '0:0:0:0:0:0:0:0',
  '0000:0000::0000',
  '::0.0.0.0',
  '::ffff:0.0.0.0',
  '::FFFF:0:0',
  '0:0:0:0:0:ffff:0.0.0.0',
  '[::]',
  '[::ffff:0.0.0.0]',
  '::%lo',
  '0::0%1',
];
const IPV6_SPECIFIC = ['::1', '::0.0.0.1', '::ffff:127.0.0.1', '::ffff:0:1', '1::', 'fe80::1%lo', '64:ff9b::0.0.0.0', '[::1]'];

describe('the all-addresses guard', () => {
  it('agrees with the OS on every spelling of the unspecified address and of addresses next to it', async () => {
    const seed = 18;
    const random = seededRandom(seed);
    const corpus = [
      ...ipv4Spellings([0, 0, 0, 0], random, 60),
      ...ipv4Spellings([0, 0, 0, 1], random, 20),
      ...ipv4Spellings([1, 0, 0, 0], random, 20),
      ...ipv4Spellings([127, 0, 0, 1], random, 20),
      '0',
      '0x0',
      '000.000.000.000',
      '0.0',
      ...IPV6_ALL,
      ...IPV6_SPECIFIC,
    ];
    let all = 0;
    for (const spelling of corpus) {
      const os = await osSaysAll(spelling);
      if (os) all++;
      assert.equal(isAllAddresses(spelling), os, `${JSON.stringify(spelling)} (seed ${seed}): the OS binds ${os ? 'every address' : 'one address'}`);
      // Refused by the configuration, naming the variable, unless allowed.
      let problem: string | undefined;
      try {
        loadConfig({ INFERMETER_HOST: spelling, INFERMETER_MANAGEMENT_HOST: '127.0.0.1' });
      } catch (error) {
        assert.ok(error instanceof ConfigError, String(error));
        problem = error.message;
      }
      if (os)
        assert.match(
          problem ?? 'accepted',
          /INFERMETER_HOST: expected a specific address: listening on all addresses needs INFERMETER_ALLOW_ALL_ZERO_IP=1/,
          spelling,
        );
      else assert.equal(problem, undefined, spelling);
      if (os) loadConfig({ INFERMETER_HOST: spelling, INFERMETER_ALLOW_ALL_ZERO_IP: '1' });
    }
    assert.ok(all >= 60 + 4 + IPV6_ALL.length, `the corpus holds the unspecified spellings (${all})`);
  });

  it("reads every source of a host the same way: the management host, MindIE's variables and config file", () => {
    const refused = (env: Record<string, string>, readFile?: () => string) => {
      try {
        loadConfig(env, readFile === undefined ? {} : { readFile });
      } catch (error) {
        return (error as Error).message;
      }
      return 'accepted';
    };
    assert.match(refused({ INFERMETER_MANAGEMENT_HOST: '0x0' }), /INFERMETER_MANAGEMENT_HOST: expected a specific address/);
    // The refusal names what the operator set (issue 21): here MindIE's variable.
    assert.match(refused({ MIES_CONTAINER_IP: '::ffff:0.0.0.0' }), /MIES_CONTAINER_IP: expected a specific address/);
    assert.match(refused({ MIES_CONTAINER_MANAGEMENT_IP: '[::0]', INFERMETER_HOST: '127.0.0.1' }), /MIES_CONTAINER_MANAGEMENT_IP: expected a specific address/);
    assert.match(
      refused({ INFERMETER_CONFIG: 'c.json' }, () => '{"ServerConfig":{"ipAddress":"000.000.000.000"}}'),
      /INFERMETER_CONFIG ServerConfig\.ipAddress: expected a specific address/,
    );
    assert.equal(
      refused({ INFERMETER_CONFIG: 'c.json' }, () => '{"ServerConfig":{"ipAddress":"0","allowAllZeroIpListening":true}}'),
      'accepted',
    );
  });

  it('resolves a host name when listening and refuses one that lands on every address; nothing is bound', async (t) => {
    await assert.rejects(resolveListenAddress('0x0', false, 'INFERMETER_HOST'), /INFERMETER_HOST=0x0 listens on every address \(0\.0\.0\.0\)/);
    assert.equal(await resolveListenAddress('0x0', true, 'INFERMETER_HOST'), '0.0.0.0');
    assert.ok(['127.0.0.1', '::1'].includes(await resolveListenAddress('localhost', false, 'INFERMETER_HOST')));
    assert.equal(await resolveListenAddress('::1', false, 'INFERMETER_HOST'), '::1');
    // A host that got past the configuration (a name the resolver maps to 0.0.0.0; here a
    // configuration built by hand) is refused by the listen itself, in one process and with workers.
    const env = {
      INFERMETER_UPSTREAM: 'http://127.0.0.1:9',
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_UPSTREAM_METRICS: 'off',
    };
    const config = { ...loadConfig(env), host: '0x0', hostDefaulted: false };
    await assert.rejects(startInfermeter(config, { log: silentLogger }), /INFERMETER_HOST=0x0 listens on every address/);
    const management = { ...loadConfig(env), managementHost: '0', managementHostDefaulted: false };
    await assert.rejects(
      startInfermeter(management, { log: silentLogger }).then((app) => {
        t.after(() => app.close());
      }),
      /INFERMETER_MANAGEMENT_HOST=0 listens on every address/,
    );
    await assert.rejects(
      startClusterPrimary(config, env, { log: silentLogger, workers: 2 }),
      /INFERMETER_HOST=0x0 listens on every address/,
      'refused before any worker starts',
    );
  });
});
