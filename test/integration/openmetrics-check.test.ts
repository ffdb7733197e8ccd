// The OpenMetrics exposition passes a strict OpenMetrics parser: Python's prometheus_client
// (Debian package python3-prometheus-client; .ci/run installs it), whose parser refuses what
// the format does not allow (a counter family named with _total, a quote unescaped in HELP,
// an exemplar of more than 128 characters, a missing # EOF). promtool check metrics reads the
// Prometheus text format only (an exemplar stops it: `expected integer as timestamp, got "#"`),
// so it checks the plain scrape (promtool.test.ts) and this the OpenMetrics one, every dialect,
// per-tenant metering and an engine's relayed families included.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { Registry } from '@prometheus-io/client';
import { registerHistogram } from '../../src/metrics/exposition/families.ts';
import { OPENMETRICS_EOF, toOpenMetrics } from '../../src/metrics/exposition/openmetrics.ts';
import { rawExchange } from '../helpers/raw-peers.ts';
import { startProxy } from '../helpers/proxy-harness.ts';
import { sseScript, startReplayUpstream } from '../helpers/replay-upstream.ts';

const PYTHON = '/usr/bin/python3';
const probe = spawnSync(PYTHON, ['-c', 'import prometheus_client.openmetrics.parser'], { encoding: 'utf8' });
const available = probe.status === 0;
const skip = available || process.env.CI ? false : 'python3-prometheus-client not installed (Debian package; .ci/run installs it)';

// Reads stdin strictly; prints the families and the exemplars it read, or fails naming the error.
const CHECK = `
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
families = 0
exemplars = 0
for family in text_string_to_metric_families(sys.stdin.read()):
    families += 1
    exemplars += sum(1 for s in family.samples if s.exemplar is not None)
print(families, exemplars)
`;

// Reads each exposition of a JSON list strictly: per text, the error or the exemplars' ids.
const EACH = `
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for text in json.load(sys.stdin):
    try:
        out.append({'ids': [s.exemplar.labels['request_id'] for f in text_string_to_metric_families(text) for s in f.samples if s.exemplar is not None]})
    except Exception as error:
        out.append({'error': repr(error)})
print(json.dumps(out))
`;

function parseEach(texts: readonly string[]): Array<{ ids?: string[]; error?: string }> {
  const result = spawnSync(PYTHON, ['-c', EACH], { input: JSON.stringify(texts), encoding: 'utf8' });
  assert.equal(result.status, 0, result.stderr);
  return JSON.parse(result.stdout) as Array<{ ids?: string[]; error?: string }>;
}

describe('OpenMetrics exposition, strictly parsed', () => {
  it('takes every x-request-id a client sends: an id an exemplar cannot carry is left out, never written to break the scrape', { skip }, async (t) => {
    assert.ok(available, `${PYTHON} with prometheus_client must be installed`);
    const upstream = await startReplayUpstream();
    t.after(() => upstream.close());
    upstream.respond(() => ({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: [{ data: '{"usage":{"prompt_tokens":3,"completion_tokens":4}}' }],
    }));
    const app = await startProxy(t, upstream.url);
    // Written as they are, and read back so: quotes and backslashes escaped, = and , as they are.
    const kept = ['a"b', 'a\\b', 'a=b', 'a,b', 'x",y="z', '\\"', 'a'.repeat(118)];
    // Not an exemplar: a brace (the finding: `}` made the parser refuse the whole scrape), or
    // longer than an exemplar's 128 characters leave (the client's id still goes upstream).
    const left = ['a}b', '}', 'x"} 1 2 # {y="z', '{a', 'b'.repeat(119)];
    // Not a sane id at all (non-ASCII, over 128): infermeter's own takes its place.
    const replaced = ['r-\u00e9t\u00e9', `c${'d'.repeat(128)}`];
    const ids = [...kept, ...left, ...replaced];
    const { port } = new URL(app.dataUrl!);
    for (const [i, id] of ids.entries()) {
      const body = `{"model":"m${i}"}`;
      // Raw, so that the id's bytes are the client's (latin1 for the non-ASCII one).
      const { text } = await rawExchange(
        app.dataUrl!,
        Buffer.from(
          `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Request-Id: ${id}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
          'latin1',
        ),
      );
      assert.match(text, /^HTTP\/1\.1 200/, id);
    }
    const res = await fetch(app.metricsUrl!, { headers: { accept: 'application/openmetrics-text;version=1.0.0' } });
    const [read] = parseEach([await res.text()]);
    assert.equal(read!.error, undefined, `the OpenMetrics parser refused the exposition: ${read!.error}`);
    const got = new Set(read!.ids);
    for (const id of kept) assert.ok(got.has(id), `kept: ${id}`);
    for (const id of [...left, ...replaced]) assert.ok(!got.has(id), `left out: ${id}`);
    assert.ok([...got].filter((id) => /^[0-9a-f-]{36}$/.test(id)).length >= replaced.length, "infermeter's own ids for the ids that are not sane");
  });

  it('writes an exemplar for no id a strict parser would refuse or read otherwise (control characters, non-ASCII, braces, the 128-character cap)', {
    skip,
  }, () => {
    assert.ok(available, `${PYTHON} with prometheus_client must be installed`);
    const ids = [
      'plain',
      'a}b',
      '{',
      'new\nline',
      'cr\rhere',
      'tab\there',
      'del\u007f',
      'caf\u00e9 \u65e5\u672c',
      '\u{1f600}'.repeat(59), // 118 UTF-16 units, 59 characters
      '\u00e9'.repeat(118),
      '\u00e9'.repeat(119),
      'lone\ud800',
      'q"\\=,',
    ];
    const texts = ids.map((id) => {
      const registry = new Registry();
      const h = registerHistogram(registry, { name: 'e2e_seconds', help: 'h', buckets: [1, 2], labelName: 'model_name' });
      h.observe('m', 0.5, 1, id);
      return toOpenMetrics(h.renderText(true)) + OPENMETRICS_EOF;
    });
    const written = ['plain', 'caf\u00e9 \u65e5\u672c', '\u{1f600}'.repeat(59), '\u00e9'.repeat(118), 'q"\\=,'];
    for (const [i, read] of parseEach(texts).entries()) {
      assert.equal(read.error, undefined, `${JSON.stringify(ids[i])}: ${read.error}`);
      assert.deepEqual(read.ids, written.includes(ids[i]!) ? [ids[i]] : [], JSON.stringify(ids[i]));
    }
  });

  for (const dialects of ['mindie', 'mindie,aom,vllm,otel']) {
    it(`parses with exemplars (INFERMETER_DIALECTS=${dialects}, tenants, relayed engine families)`, { skip }, async (t) => {
      assert.ok(available, `${PYTHON} with prometheus_client must be installed`);
      const upstream = await startReplayUpstream();
      t.after(() => upstream.close());
      const vllm = readFileSync(new URL('../../fixtures/streams/vllm-chat-usage.sse', import.meta.url));
      const engine = readFileSync(new URL('../../fixtures/engine-metrics/vllm-v1.prom', import.meta.url), 'utf8');
      upstream.respond((req) => {
        if (req.url === '/metrics') return { status: 200, headers: { 'content-type': 'text/plain; version=0.0.4' }, body: [{ data: engine }] };
        const body = req.body.toString();
        if (body.includes('"fail"')) return { status: 500, body: [{ data: 'oops' }] };
        if (body.includes('"stream":true')) return sseScript(vllm, 0, 0);
        return { status: 200, headers: { 'content-type': 'application/json' }, body: [{ data: '{"usage":{"prompt_tokens":3,"completion_tokens":4}}' }] };
      });
      let now = 0;
      const app = await startProxy(
        t,
        upstream.url,
        {
          INFERMETER_DIALECTS: dialects,
          INFERMETER_TENANT: 'header:x-team',
          INFERMETER_UPSTREAM_METRICS: `${upstream.url}/metrics`,
          INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '3600',
          INFERMETER_RELAY_UPSTREAM_METRICS: '1',
          INFERMETER_AOM_SERVICE_ID: 'svc "1"',
        },
        { clock: () => now },
      );
      await app.metrics.engineScraper!.scrapeOnce();
      const requests: Array<[string, string]> = [
        ['{"model":"llama","stream":true}', 'a'.repeat(118)], // the longest id an exemplar takes
        ['{"model":"llama"}', 'plain-1'],
        ['{"model":"qu\\"ote\\\\back\\nline","stream":true}', 'q"uo\\te'],
        ['{"model":"fail"}', 'f-1'],
        ['{"model":"llama","stream":true}', 'b'.repeat(119)], // too long for one: infermeter's own id
      ];
      for (const [body, id] of requests) {
        await (await fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', headers: { 'x-request-id': id, 'x-team': 'tea"m' }, body })).arrayBuffer();
      }
      now += 31_000; // an AOM collection period ends: its gauges join the exposition
      const res = await fetch(app.metricsUrl!, { headers: { accept: 'application/openmetrics-text;version=1.0.0' } });
      const text = await res.text();
      assert.ok(text.includes('request_id="q\\"uo\\\\te"'), 'an id with a quote and a backslash, escaped');
      assert.ok(!text.includes('b'.repeat(119)), 'an id too long for an exemplar is not written');
      assert.ok(text.includes('vllm:'), 'relayed or dialect families of vLLM are there');
      const result = spawnSync(PYTHON, ['-c', CHECK], { input: text, encoding: 'utf8' });
      assert.equal(result.status, 0, `the OpenMetrics parser refused the exposition: ${result.stderr}`);
      const [families, exemplars] = result.stdout.trim().split(' ').map(Number);
      assert.ok(families! > 20, `${families} families`);
      assert.ok(exemplars! >= 3, `${exemplars} exemplars`);
    });
  }
});
