// The example Prometheus setup in deploy/prometheus: the alerting rules pass `promtool check
// rules` and their unit tests (`promtool test rules`), the scrape configuration passes `promtool
// check config`, every metric the rules query is one infermeter really exposes, and every alert
// has a test case where it fires and one where it does not. promtool comes from Debian's
// prometheus package: skipped, saying so, where it is missing, except under CI, where that fails.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { describe, it } from 'node:test';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { startSimServer } from '../../src/sim/model-server.ts';
import { startOpenMeter } from '../helpers/openmeter.ts';
import { startProxy } from '../helpers/proxy-harness.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ALERTS = 'deploy/prometheus/alerts.yml';
const ALERT_TESTS = 'deploy/prometheus/alerts.test.yml';
const CONFIG = 'deploy/prometheus/prometheus.yml';

const available = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0;
// In CI a missing promtool is a failure, not a skip: .ci/run installs it.
const skip = available || process.env.CI ? false : 'promtool not installed (Debian package prometheus; .ci/run installs it)';

function promtool(...args: string[]): void {
  assert.ok(available, 'promtool must be installed');
  const result = spawnSync('promtool', args, { cwd: ROOT, encoding: 'utf8' });
  const output = `${result.stdout ?? ''}${result.stderr ?? ''}${result.error === undefined ? '' : String(result.error)}`;
  assert.equal(result.status, 0, `promtool ${args.join(' ')} exited ${result.status}:\n${output}`);
}

describe('promtool on deploy/prometheus', { skip }, () => {
  it('check rules accepts alerts.yml', () => promtool('check', 'rules', ALERTS));
  it('test rules passes alerts.test.yml', () => promtool('test', 'rules', ALERT_TESTS));
  it('check config accepts prometheus.yml (and the rule files it names)', () => promtool('check', 'config', CONFIG));
});

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  labels?: Record<string, string>;
}
interface AlertTest {
  alertname: string;
  exp_alerts?: Array<{ exp_labels?: Record<string, string> }> | null;
}

const readYaml = (path: string): unknown => parse(readFileSync(join(ROOT, path), 'utf8'));

function rules(): Rule[] {
  const doc = readYaml(ALERTS) as { groups: Array<{ name: string; rules: Rule[] }> };
  return doc.groups.flatMap((g) => g.rules);
}

function alertTests(): AlertTest[] {
  const doc = readYaml(ALERT_TESTS) as { tests: Array<{ alert_rule_test?: AlertTest[] }> };
  return doc.tests.flatMap((t) => t.alert_rule_test ?? []);
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'inf', 'nan', 'atan2']);

/**
 * The metric names a PromQL expression selects: label matchers, strings, ranges and the label
 * lists of by/without/on/ignoring/group_* are removed, then every identifier that is not a
 * function or aggregation (followed by a parenthesis) nor a keyword is a metric name.
 */
function metricNames(expr: string): Set<string> {
  const s = expr
    .replace(/#.*$/gm, ' ')
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of s.matchAll(/(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:]|\s*\()/g)) {
    const name = m[1]!;
    if (!KEYWORDS.has(name.toLowerCase())) names.add(name);
  }
  return names;
}

describe('alerts.yml against infermeter', () => {
  it('reads metric names out of PromQL', () => {
    assert.deepEqual(
      [
        ...metricNames(
          'histogram_quantile(0.9, sum by (le, model_name) (rate(a_bucket{job=~"x.*",le!="1e3"}[5m]))) > 2.5 and on (job) b_total offset 1m unless absent(up) or c:d > bool 1e-3',
        ),
      ].sort(),
      ['a_bucket', 'b_total', 'c:d', 'up'],
    );
  });

  it('queries only metrics that infermeter exposes', async (t) => {
    const usageDir = mkdtempSync(join(tmpdir(), 'infermeter-alerts-usage-'));
    t.after(() => rmSync(usageDir, { recursive: true, force: true, maxRetries: 5 }));
    const sim = await startSimServer({ ttftMs: 5, interTokenMs: 1, defaultTokens: 3 });
    t.after(() => sim.close());
    const app = await startProxy(t, sim.url, {
      INFERMETER_DIALECTS: 'mindie,aom',
      INFERMETER_TENANT: 'header:x-tenant-id',
      INFERMETER_SLO: 'ttft:500 tpot:50',
      INFERMETER_UPSTREAM_METRICS: `${sim.url}/metrics`,
      INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '3600',
      // The usage ledger's families (InfermeterUsageRecordsLost), with a sink's (the backlog, parked records).
      INFERMETER_USAGE_DIR: usageDir,
      INFERMETER_USAGE_SINK: (await startOpenMeter(t)).url,
    });
    const res = await fetch(`${app.dataUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-llama-8b', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    await app.metrics.engineScraper!.scrapeOnce();
    const text = await (await fetch(app.metricsUrl!)).text();

    const exposed = new Set(['up']); // Prometheus's own, per target
    for (const m of text.matchAll(/^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+)$/gm)) {
      const [, name, type] = m as unknown as [string, string, string];
      exposed.add(name);
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exposed.add(name + suffix);
      if (type === 'summary') for (const suffix of ['_sum', '_count']) exposed.add(name + suffix);
    }
    assert.ok(exposed.has('request_received_total') && exposed.has('infermeter_upstream_metrics_up'), 'the exposition was read');

    const all = rules();
    assert.ok(all.length > 0, 'alerts.yml has rules');
    const used = new Set<string>();
    for (const rule of all) {
      const names = metricNames(rule.expr);
      assert.ok(names.size > 0, `${rule.alert ?? rule.record}: no metric found in ${rule.expr}`);
      for (const name of names) {
        used.add(name);
        assert.ok(exposed.has(name), `${rule.alert ?? rule.record} queries ${name}, which infermeter does not expose`);
      }
    }
    assert.ok(
      used.has('infermeter_request_failures_total') && used.has('time_to_first_token_seconds_bucket'),
      `names read from the rules: ${[...used].join(', ')}`,
    );
  });

  it("the clients' own errors page no one: the 404 case expects every critical alert silent", () => {
    const doc = readYaml(ALERT_TESTS) as { tests: Array<{ name: string; alert_rule_test?: AlertTest[] }> };
    const only404s = doc.tests.find((c) => c.name.startsWith('only 404s for a model plus healthy traffic'));
    assert.ok(only404s !== undefined, `${ALERT_TESTS} has the 404 case`);
    const silent = new Set((only404s.alert_rule_test ?? []).filter((a) => (a.exp_alerts ?? []).length === 0).map((a) => a.alertname));
    const critical = rules().filter((r) => r.alert !== undefined && r.labels?.severity === 'critical');
    assert.ok(critical.length > 0);
    for (const rule of critical) assert.ok(silent.has(rule.alert!), `${rule.alert} (critical) is not checked silent in the 404 case of ${ALERT_TESTS}`);
    const fivexx = doc.tests.find((c) => c.name === '5xx: fires');
    assert.ok(
      (fivexx?.alert_rule_test ?? []).some((a) => (a.exp_alerts ?? []).some((e) => e.exp_labels?.severity === 'critical')),
      'the 5xx case expects a critical alert',
    );
  });

  it('every alert has a test case where it fires and one where it does not', () => {
    const tests = alertTests();
    for (const rule of rules()) {
      if (rule.alert === undefined) continue;
      const own = tests.filter((c) => c.alertname === rule.alert);
      // A firing case of this very rule: its static labels (severity, and e.g. cause where two
      // rules share the alert name) are among the expected labels.
      const fires = own.some((c) => (c.exp_alerts ?? []).some((a) => Object.entries(rule.labels ?? {}).every(([k, v]) => a.exp_labels?.[k] === v)));
      assert.ok(fires, `${rule.alert} ${JSON.stringify(rule.labels ?? {})} has no firing test case in ${ALERT_TESTS}`);
      assert.ok(
        own.some((c) => (c.exp_alerts ?? []).length === 0),
        `${rule.alert} has no case where it does not fire in ${ALERT_TESTS}`,
      );
    }
  });
});
