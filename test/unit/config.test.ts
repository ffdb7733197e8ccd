import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { readdirSync } from 'node:fs';
import { AOM_LABEL_VARIABLES } from '../../src/config/aom-labels.ts';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { markdownRows } from '../../src/config/variables/variable-table.ts';
import { CONFIGURATION_TABLE, closestVariable, unknownVariables, VARIABLE_NAMES as VARIABLES } from '../../src/config/variables.ts';
import { histogramFamilies } from '../../src/metrics/dialects/index.ts';
import { CONFIGURATION_DOC, documentedRows, replaceDocumentedRows } from '../../scripts/configuration-doc.ts';

const noFile = (path: string): string => {
  throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
};

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const c = loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:8000' });
    assert.equal(c.upstream?.href, 'http://127.0.0.1:8000/');
    assert.equal(c.host, '127.0.0.1');
    assert.equal(c.port, 1025);
    assert.equal(c.managementHost, '127.0.0.1');
    assert.equal(c.managementPort, 1026);
    assert.equal(c.metricsPort, 1027);
    assert.equal(c.metricsEnabled, true);
    assert.equal(c.maxInspectBytes, 4 * 1024 * 1024);
    assert.equal(c.throughputWindowSeconds, 10);
    assert.equal(c.logLevel, 'info');
    assert.ok(Object.isFrozen(c));
  });

  it('requires the upstream only when asked to', () => {
    assert.equal(loadConfig({}).upstream, undefined);
    assert.throws(
      () => loadConfig({}, { requireUpstream: true }),
      (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.equal(e.problems[0]?.variable, 'INFERMETER_UPSTREAM');
        return true;
      },
    );
  });

  it('keeps a path prefix of the upstream and refuses credentials in it', () => {
    assert.equal(loadConfig({ INFERMETER_UPSTREAM: 'https://models.example/serving/llama' }).upstream?.pathname, '/serving/llama');
    assert.throws(
      () => loadConfig({ INFERMETER_UPSTREAM: 'http://user:secret@h:1' }),
      (e: ConfigError) => {
        assert.doesNotMatch(e.message, /secret/, 'a password never reaches the error message');
        return true;
      },
    );
  });

  it('reads INFERMETER_UPSTREAM_CONNECTIONS: mirror by default, pool or close, anything else refused by name', () => {
    assert.equal(loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:8000' }).upstreamConnections, 'mirror');
    assert.equal(loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:8000', INFERMETER_UPSTREAM_CONNECTIONS: 'Pool' }).upstreamConnections, 'pool');
    assert.equal(loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:8000', INFERMETER_UPSTREAM_CONNECTIONS: 'close' }).upstreamConnections, 'close');
    assert.throws(
      () => loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:8000', INFERMETER_UPSTREAM_CONNECTIONS: 'shared' }),
      /INFERMETER_UPSTREAM_CONNECTIONS: expected mirror, pool, close/,
    );
  });

  it('collects every bad value into one error naming each variable', () => {
    try {
      loadConfig({
        INFERMETER_UPSTREAM: 'ftp://x',
        INFERMETER_PORT: '70000',
        INFERMETER_MANAGEMENT_PORT: 'abc',
        INFERMETER_HOST: 'not a host!',
        INFERMETER_MAX_INSPECT_BYTES: '-1',
        INFERMETER_LOG_LEVEL: 'loud',
      });
      assert.fail('expected a ConfigError');
    } catch (e) {
      assert.ok(e instanceof ConfigError);
      assert.deepEqual(e.problems.map((p) => p.variable).sort(), [
        'INFERMETER_HOST',
        'INFERMETER_LOG_LEVEL',
        'INFERMETER_MANAGEMENT_PORT',
        'INFERMETER_MAX_INSPECT_BYTES',
        'INFERMETER_PORT',
        'INFERMETER_UPSTREAM',
      ]);
      assert.match(e.message, /INFERMETER_PORT: expected an integer port from 0 to 65535/);
    }
  });

  it('follows MindIE precedence: env, then MIES_CONTAINER_*, then config.json, then defaults', () => {
    const file = JSON.stringify({
      ServerConfig: { ipAddress: '10.0.0.5', managementIpAddress: '10.0.0.6', port: 2025, managementPort: 2026, metricsPort: 2027 },
    });
    const readFile = () => file;
    const fromFile = loadConfig({ INFERMETER_CONFIG: '/etc/mindie/config.json' }, { readFile });
    assert.deepEqual(
      [fromFile.host, fromFile.managementHost, fromFile.port, fromFile.managementPort, fromFile.metricsPort],
      ['10.0.0.5', '10.0.0.6', 2025, 2026, 2027],
    );
    const mies = loadConfig({ INFERMETER_CONFIG: 'c.json', MIES_CONTAINER_IP: '10.1.0.1', MIES_CONTAINER_MANAGEMENT_IP: '10.1.0.2' }, { readFile });
    assert.deepEqual([mies.host, mies.managementHost], ['10.1.0.1', '10.1.0.2']);
    const env = loadConfig(
      { INFERMETER_CONFIG: 'c.json', MIES_CONTAINER_IP: '10.1.0.1', INFERMETER_HOST: '::1', INFERMETER_PORT: '0', INFERMETER_METRICS_PORT: '0' },
      { readFile },
    );
    assert.deepEqual([env.host, env.managementHost, env.port, env.metricsPort, env.managementPort], ['::1', '10.0.0.6', 0, 0, 2026]);
  });

  it('uses the data-plane host for management when nothing else says', () => {
    assert.equal(loadConfig({ INFERMETER_HOST: '127.0.0.2' }).managementHost, '127.0.0.2');
  });

  it('takes INFERMETER_DEFAULT_HOST only where nothing else sets the address, every address without the allowance', () => {
    const readFile = () => JSON.stringify({ ServerConfig: { ipAddress: '10.0.0.5' } });
    const hosts = (env: Record<string, string>) => {
      const c = loadConfig(env, { readFile });
      return [c.host, c.managementHost];
    };
    assert.deepEqual(hosts({ INFERMETER_DEFAULT_HOST: '0.0.0.0' }), ['0.0.0.0', '0.0.0.0']);
    assert.deepEqual(hosts({ INFERMETER_DEFAULT_HOST: '::', INFERMETER_MANAGEMENT_HOST: '127.0.0.1' }), ['::', '127.0.0.1']);
    assert.deepEqual(hosts({ INFERMETER_DEFAULT_HOST: '0.0.0.0', MIES_CONTAINER_IP: '10.1.0.1' }), ['10.1.0.1', '10.1.0.1']);
    assert.deepEqual(hosts({ INFERMETER_DEFAULT_HOST: '0.0.0.0', INFERMETER_CONFIG: 'c.json' }), ['10.0.0.5', '10.0.0.5']);
    assert.deepEqual(hosts({ INFERMETER_DEFAULT_HOST: '0.0.0.0', INFERMETER_HOST: '127.0.0.2' }), ['127.0.0.2', '127.0.0.2']);
    assert.throws(
      () => loadConfig({ INFERMETER_DEFAULT_HOST: 'not a host!' }),
      /INFERMETER_DEFAULT_HOST: expected an IPv4 or IPv6 address or a host name, got "not a host!"/,
    );
    // An explicit every-address setting still needs the allowance, default or not.
    assert.throws(() => loadConfig({ INFERMETER_DEFAULT_HOST: '0.0.0.0', INFERMETER_HOST: '0.0.0.0' }), /INFERMETER_HOST: expected a specific address/);
  });

  it('reports an unreadable or malformed config file under INFERMETER_CONFIG', () => {
    assert.throws(
      () => loadConfig({ INFERMETER_CONFIG: '/nope.json' }, { readFile: noFile }),
      /INFERMETER_CONFIG: expected a readable MindIE config.json file \(ENOENT\)/,
    );
    assert.throws(() => loadConfig({ INFERMETER_CONFIG: 'x' }, { readFile: () => '{' }), /INFERMETER_CONFIG: expected a JSON file/);
    assert.throws(() => loadConfig({ INFERMETER_CONFIG: 'x' }, { readFile: () => '{"ServerConfig":{"port":"http"}}' }), /INFERMETER_CONFIG ServerConfig.port/);
  });

  it('refuses a data port that collides with a management listener', () => {
    assert.throws(
      () => loadConfig({ INFERMETER_PORT: '9000', INFERMETER_METRICS_PORT: '9000' }),
      /INFERMETER_PORT: expected a port different from INFERMETER_METRICS_PORT/,
    );
    // Port 0 never collides, and management and metrics may share a port.
    const shared = loadConfig({ INFERMETER_MANAGEMENT_PORT: '9001', INFERMETER_METRICS_PORT: '9001' });
    assert.equal(shared.metricsPort, shared.managementPort);
  });

  it('honours MIES_SERVICE_MONITOR_MODE as MindIE does', () => {
    assert.equal(loadConfig({}).metricsEnabled, true);
    assert.equal(loadConfig({ MIES_SERVICE_MONITOR_MODE: '1' }).metricsEnabled, true);
    assert.equal(loadConfig({ MIES_SERVICE_MONITOR_MODE: '0' }).metricsEnabled, false);
    assert.equal(loadConfig({ MIES_SERVICE_MONITOR_MODE: 'yes' }).metricsEnabled, false);
  });

  it('selects metric dialects, each at most once', () => {
    assert.deepEqual(loadConfig({}).dialects, ['mindie']);
    assert.deepEqual(loadConfig({ INFERMETER_DIALECTS: 'aom' }).dialects, ['aom']);
    assert.deepEqual(loadConfig({ INFERMETER_DIALECTS: ' MindIE , aom ' }).dialects, ['mindie', 'aom']);
    assert.deepEqual(loadConfig({ INFERMETER_DIALECTS: 'vllm' }).dialects, ['vllm']);
    assert.deepEqual(loadConfig({ INFERMETER_DIALECTS: 'mindie,vllm' }).dialects, ['mindie', 'vllm']);
    assert.throws(() => loadConfig({ INFERMETER_DIALECTS: 'mindie,mindie' }), /INFERMETER_DIALECTS: expected a comma-separated list of mindie, aom/);
    assert.throws(() => loadConfig({ INFERMETER_DIALECTS: 'prometheus' }), /INFERMETER_DIALECTS/);
  });

  it('reads histogram bucket overrides by family and refuses bad ones', () => {
    const c = loadConfig({ INFERMETER_BUCKETS_TIME_TO_FIRST_TOKEN_SECONDS: '0.5, 1,2,5e0' });
    assert.deepEqual(c.buckets, { time_to_first_token_seconds: [0.5, 1, 2, 5] });
    // vLLM's names: the colon of `vllm:` is an underscore in the variable's name.
    assert.deepEqual(loadConfig({ INFERMETER_BUCKETS_VLLM_TIME_TO_FIRST_TOKEN_SECONDS: '0.1,1' }).buckets, { 'vllm:time_to_first_token_seconds': [0.1, 1] });
    assert.throws(() => loadConfig({ INFERMETER_BUCKETS_TIME_TO_FIRST_TOKEN_SECONDS: '1,1' }), /strictly increasing positive numbers/);
    assert.throws(() => loadConfig({ INFERMETER_BUCKETS_E2E_REQUEST_LATENCY_SECONDS: '-1,2' }), /INFERMETER_BUCKETS_E2E_REQUEST_LATENCY_SECONDS/);
    assert.throws(() => loadConfig({ INFERMETER_BUCKETS_TTFT: '1,2' }), /INFERMETER_BUCKETS_TTFT: expected the name of a histogram family/);
  });

  it('reads the AOM service labels, leaving unset ones out, with the host name as source', () => {
    const c = loadConfig({ INFERMETER_AOM_SERVICE_ID: 'svc', INFERMETER_AOM_GROUP_ID: '', INFERMETER_AOM_PERIOD_SECONDS: '60' }, { hostname: 'pod-7' });
    assert.deepEqual(c.aom, { periodSeconds: 60, labels: { service_id: 'svc', source: 'pod-7' } });
    assert.equal(loadConfig({ INFERMETER_AOM_SOURCE: 'node-a' }, { hostname: 'pod-7' }).aom.labels.source, 'node-a');
    assert.throws(() => loadConfig({ INFERMETER_AOM_SERVICE_NAME: 'a\nb' }), /INFERMETER_AOM_SERVICE_NAME: expected a label value/);
    assert.throws(() => loadConfig({ INFERMETER_AOM_PERIOD_SECONDS: '0' }), /INFERMETER_AOM_PERIOD_SECONDS/);
  });

  it('is documented: every variable it reads is in the documented configuration table', () => {
    const readme = readFileSync(CONFIGURATION_DOC, 'utf8');
    for (const variable of VARIABLES) assert.match(readme, new RegExp(`\\| \`${variable}\` \\|`), `${variable} in README`);
    assert.match(readme, /\| `INFERMETER_BUCKETS_<FAMILY>` \|/);
    for (const family of histogramFamilies()) assert.match(readme, new RegExp(`\`${family}\``), `histogram family ${family} named in README`);
  });

  it('has one table: the documented configuration table is variables.ts row by row', () => {
    assert.deepEqual(documentedRows(), markdownRows(CONFIGURATION_TABLE));
  });

  it('has its documented rows rewritten by npm run docs:config: only the rows, in place', () => {
    const doc = readFileSync(CONFIGURATION_DOC, 'utf8');
    const rows = markdownRows(CONFIGURATION_TABLE);
    const stale = doc.replace(rows[3]!, rows[3]!.replace(' |', ' | stale |')).replace(`${rows.at(-1)!}\n`, '');
    assert.notEqual(stale, doc);
    assert.equal(replaceDocumentedRows(stale, rows), doc);
    assert.throws(() => replaceDocumentedRows(`${rows[0]}\ntext\n${rows[1]}`, rows), /not one block/);
  });

  it('reads no INFERMETER_*, MIES_* or OTEL_* variable the table lacks: every name written in src is in it', () => {
    const dir = new URL('../../src/', import.meta.url);
    const known = new Set(VARIABLES);
    const files = readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((file) => ({ file, text: readFileSync(new URL(file, dir), 'utf8') }));
    assert.ok(files.length > 100, `${files.length} files read`);
    // A constant of the code's own (OTEL_INSTRUMENTS) is not a variable.
    const constants = new Set(files.flatMap(({ text }) => [...text.matchAll(/\bconst ([A-Z][A-Z0-9_]*)\b/g)].map((m) => m[1])));
    for (const { file, text } of files) {
      for (const [name] of text.matchAll(/\b(?:INFERMETER|MIES|OTEL)_[A-Z0-9_]*[A-Z0-9]\b/g)) {
        if (constants.has(name) || name === 'INFERMETER_CONFIG_INVALID' || /^INFERMETER_(?:MANAGEMENT|METRICS|BUCKETS)$|^INFERMETER_BUCKETS_/.test(name))
          continue;
        assert.ok(known.has(name), `${name} (in src/${file}) is in the configuration table`);
      }
    }
    // The TLS variables security.ts spells as a plane's prefix and a suffix.
    const security = readFileSync(new URL('config/security.ts', dir), 'utf8');
    const prefixes = [...security.matchAll(/\btls\(r, '([A-Z_]+)'/g)].map((m) => m[1]!);
    const suffixes = [...security.matchAll(/`\$\{prefix\}(_[A-Z_]+)`/g)].map((m) => m[1]!);
    assert.deepEqual([prefixes.length, suffixes.length], [3, 3], 'three planes, three files each');
    for (const prefix of prefixes) for (const suffix of suffixes) assert.ok(known.has(`${prefix}${suffix}`), `${prefix}${suffix}`);
    for (const v of Object.values(AOM_LABEL_VARIABLES)) assert.ok(known.has(v), v);
  });

  it('stops the start on an unknown INFERMETER_* variable, naming the closest known one, never its value', () => {
    const cases: Array<[string, string]> = [
      ['INFERMETER_UPSTREM', 'INFERMETER_UPSTREAM'],
      ['INFERMETER_PROT', 'INFERMETER_PORT'],
      ['INFERMETER_INJECT_USGE', 'INFERMETER_INJECT_USAGE'],
      ['INFERMETER_METRICS_TOKN', 'INFERMETER_METRICS_TOKEN'],
      ['INFERMETER_DIALECT', 'INFERMETER_DIALECTS'],
    ];
    for (const [typed, meant] of cases) {
      assert.equal(closestVariable(typed), meant, typed);
      assert.throws(
        () => loadConfig({ [typed]: 'secret-value' }),
        (e: unknown) =>
          e instanceof ConfigError &&
          e.message.includes(`${typed}: expected a variable infermeter reads: did you mean ${meant}?`) &&
          !e.message.includes('secret-value'),
        typed,
      );
    }
    // (INFERMETER_FOO is two edits from INFERMETER_SLO, a fair guess now: a name far from every one.)
    assert.equal(closestVariable('INFERMETER_QUUX'), undefined, 'no far-fetched guess');
    assert.throws(() => loadConfig({ INFERMETER_QUUX: '1' }), /INFERMETER_QUUX: expected a variable infermeter reads \(infermeter --help lists them all\)/);
  });

  it('lets through what is not a typing mistake: Kubernetes service links, bucket variables, other prefixes', () => {
    const env = {
      INFERMETER_SERVICE_HOST: '10.0.0.1',
      INFERMETER_SERVICE_PORT: '1025',
      INFERMETER_SERVICE_PORT_HTTP: '1025',
      INFERMETER_PORT_1025_TCP: 'tcp://10.0.0.1:1025',
      INFERMETER_PORT_1025_TCP_PROTO: 'tcp',
      INFERMETER_PORT_1025_TCP_PORT: '1025',
      INFERMETER_PORT_1025_TCP_ADDR: '10.0.0.1',
      INFERMETER_METRICS_SERVICE_HOST: '10.0.0.2',
      INFERMETER_BUCKETS_TIME_TO_FIRST_TOKEN_SECONDS: '1,2',
      OTEL_EXPORTER_OTLP_INSECURE: 'true',
      PATH: '/usr/bin',
    };
    assert.deepEqual(unknownVariables(env), []);
    assert.equal(loadConfig(env).port, 1025);
  });

  it('refuses an upstream ending in /v1, naming the URL to set instead', () => {
    for (const [given, fix] of [
      ['http://127.0.0.1:8000/v1', 'http://127.0.0.1:8000'],
      ['http://127.0.0.1:8000/v1/', 'http://127.0.0.1:8000'],
      ['https://models.example/serving/llama/v1', 'https://models.example/serving/llama'],
    ] as const) {
      assert.throws(
        () => loadConfig({ INFERMETER_UPSTREAM: given }),
        (e: unknown) =>
          e instanceof ConfigError &&
          e.message.includes('without the trailing /v1') &&
          e.message.includes(`set ${fix}, got`) &&
          e.message.includes(`got "${given}"`),
        given,
      );
    }
    assert.equal(loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:8000/v1beta' }).upstream?.pathname, '/v1beta');
  });

  it('names what the operator set when refusing 0.0.0.0: the management host follows it when unset', () => {
    assert.throws(
      () => loadConfig({ INFERMETER_HOST: '0.0.0.0' }),
      (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.deepEqual(
          e.problems.map((p) => p.variable),
          ['INFERMETER_HOST'],
        );
        assert.match(e.message, /the management and metrics ports follow it, INFERMETER_MANAGEMENT_HOST being unset/);
        return true;
      },
    );
    assert.throws(
      () => loadConfig({ INFERMETER_HOST: '127.0.0.1', INFERMETER_MANAGEMENT_HOST: '::' }),
      (e: unknown) => e instanceof ConfigError && e.problems.map((p) => p.variable).join() === 'INFERMETER_MANAGEMENT_HOST',
    );
    assert.throws(
      () => loadConfig({ MIES_CONTAINER_IP: '0.0.0.0', MIES_CONTAINER_MANAGEMENT_IP: '0.0.0.0' }),
      (e: unknown) => e instanceof ConfigError && e.problems.map((p) => p.variable).join() === 'MIES_CONTAINER_IP,MIES_CONTAINER_MANAGEMENT_IP',
    );
  });

  it('records what set each listen setting', () => {
    assert.deepEqual(
      { ...loadConfig({ INFERMETER_METRICS_PORT: '2027', MIES_CONTAINER_IP: '127.0.0.3' }).sources },
      {
        host: 'MIES_CONTAINER_IP',
        port: undefined,
        managementHost: undefined,
        managementPort: undefined,
        metricsPort: 'INFERMETER_METRICS_PORT',
      },
    );
  });
});
