// The Kubernetes manifests of deploy/kubernetes/ and the Dockerfile, checked against the code
// they configure, so that neither can drift from it: every variable the infermeter container
// sets is one the configuration module reads, and the configuration they add up to (the
// image's ENV under the container's env) loads; the container ports are the ports that
// configuration listens on; the probes ask the management port for paths it really serves
// (checked on a running infermeter); the Service, the ServiceMonitor, the Secret and the
// NetworkPolicy name ports and keys that exist; the grace period outlasts the preStop sleep
// and the drain; the kustomization lists every manifest.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { ConfigError, loadConfig, type Config, type Env } from '../../src/config/config.ts';
import { VARIABLE_NAMES as VARIABLES } from '../../src/config/variables.ts';
import { healthUrl } from '../../src/management/health-probe.ts';
import { bucketVariable } from '../../src/metrics/exposition/buckets.ts';
import { histogramFamilies } from '../../src/metrics/dialects/index.ts';
import { execForm, finalStage, imageEnv } from '../helpers/dockerfile.ts';
import { listen } from '../helpers/listen.ts';
import { startProxy } from '../helpers/proxy-harness.ts';

const DIR = new URL('../../deploy/kubernetes/', import.meta.url);

// ---- the manifests, as far as these checks read them ----------------------------------------

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    configMapKeyRef?: { name: string; key: string };
    fieldRef?: { fieldPath: string };
  };
}
interface ContainerPort {
  name?: string;
  containerPort: number;
}
interface Probe {
  httpGet?: { path?: string; port: string | number; scheme?: string };
  exec?: { command: string[] };
  tcpSocket?: unknown;
  grpc?: unknown;
}
interface SecurityContext {
  runAsNonRoot?: boolean;
  runAsUser?: number;
  readOnlyRootFilesystem?: boolean;
  allowPrivilegeEscalation?: boolean;
  capabilities?: { drop?: string[] };
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  envFrom?: unknown[];
  ports?: ContainerPort[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] }; sleep?: { seconds: number } } };
  securityContext?: SecurityContext;
}
interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  terminationGracePeriodSeconds?: number;
  enableServiceLinks?: boolean;
  securityContext?: SecurityContext;
}
interface Deployment {
  kind: 'Deployment';
  metadata: { name: string };
  spec: { selector: { matchLabels: Record<string, string> }; template: { metadata: { labels: Record<string, string> }; spec: PodSpec } };
}
interface ServicePort {
  name?: string;
  port: number;
  targetPort?: string | number;
}
interface Service {
  kind: 'Service';
  metadata: { name: string; labels?: Record<string, string> };
  spec: { selector: Record<string, string>; ports: ServicePort[] };
}
interface ServiceMonitor {
  kind: 'ServiceMonitor';
  metadata: { name: string };
  spec: {
    selector: { matchLabels: Record<string, string> };
    jobLabel?: string;
    endpoints: Array<{
      port?: string;
      path?: string;
      interval?: string;
      scheme?: string;
      authorization?: { type?: string; credentials?: { name: string; key: string } };
      relabelings?: Array<{ action?: string; sourceLabels?: string[]; targetLabel?: string; replacement?: string }>;
    }>;
  };
}
interface Secret {
  kind: 'Secret';
  metadata: { name: string };
  stringData?: Record<string, string>;
  data?: Record<string, string>;
}
interface NetworkPolicyPeer {
  namespaceSelector?: unknown;
  podSelector?: unknown;
  ipBlock?: unknown;
}
interface NetworkPolicy {
  kind: 'NetworkPolicy';
  spec: {
    podSelector: { matchLabels?: Record<string, string> };
    ingress?: Array<{ from?: NetworkPolicyPeer[]; ports?: Array<{ port?: string | number }> }>;
  };
}
interface Kustomization {
  kind: 'Kustomization';
  resources?: string[];
}
type Manifest = { file: string } & (Deployment | Service | ServiceMonitor | Secret | NetworkPolicy | Kustomization | { kind: 'Other' });

const FILES = readdirSync(DIR)
  .filter((f) => /\.ya?ml$/.test(f))
  .sort();

const MANIFESTS: Manifest[] = FILES.flatMap((file) => {
  const text = readFileSync(new URL(file, DIR), 'utf8');
  return parseAllDocuments(text).flatMap((doc) => {
    assert.deepEqual(doc.errors, [], `${file}: YAML errors`);
    assert.deepEqual(doc.warnings, [], `${file}: YAML warnings`);
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) return [];
    assert.equal(typeof value, 'object', `${file}: a document is a mapping`);
    return [{ file, ...(value as { kind: 'Other' }) }];
  });
});

function only<K extends Manifest['kind']>(kind: K): Array<Extract<Manifest, { kind: K }>> {
  return MANIFESTS.filter((m): m is Extract<Manifest, { kind: K }> => m.kind === kind);
}
function one<K extends Manifest['kind']>(kind: K): Extract<Manifest, { kind: K }> {
  const all = only(kind);
  assert.equal(all.length, 1, `exactly one ${kind} in deploy/kubernetes`);
  return all[0]!;
}

const deployment = one('Deployment');
const pod = deployment.spec.template.spec;
/** The infermeter container: the one whose env names the upstream. */
const infermeter = (() => {
  const found = pod.containers.filter((c) => c.env?.some((e) => e.name === 'INFERMETER_UPSTREAM'));
  assert.equal(found.length, 1, 'exactly one container sets INFERMETER_UPSTREAM');
  return found[0]!;
})();
const others = [...pod.containers.filter((c) => c !== infermeter), ...(pod.initContainers ?? [])];

const envOf = (c: Container, name: string): EnvVar | undefined => c.env?.find((e) => e.name === name);

// ---- the Dockerfile's final stage -------------------------------------------------------------

const STAGE = finalStage();
const IMAGE_ENV = imageEnv(STAGE);

// ---- the configuration the container runs with -------------------------------------------------

/** A token as an operator would put in the Secret. */
const TOKEN = 'k8s-test-token-0123456789abcdef';

const ALLOWED = new Set<string>([...VARIABLES, ...histogramFamilies().map(bucketVariable)]);

/** The image's ENV, then the container's env: literal values, a token for a secretKeyRef. */
function containerEnv(c: Container): Record<string, string> {
  const env: Record<string, string> = { ...IMAGE_ENV };
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.secretKeyRef !== undefined) env[e.name] = TOKEN;
    else if (e.valueFrom?.fieldRef?.fieldPath === 'status.podIP') env[e.name] = '10.1.2.3';
    else assert.fail(`${c.name}: env ${e.name} has a source this test does not model: ${JSON.stringify(e.valueFrom)}`);
  }
  return env;
}

const noFiles = (path: string): Buffer => assert.fail(`the container's configuration reads a file (${path}); model its volume in this test`);

function load(env: Env): Config {
  return loadConfig(env, { requireUpstream: true, hostname: 'llm-7d9f8-abcde', readFile: (p) => noFiles(p).toString(), readBinary: noFiles });
}

/** What infermeter runs with in the pod; loaded on first use, so that a bad value fails the tests that need it. */
let loaded: Config | undefined;
function config(): Config {
  loaded ??= load(containerEnv(infermeter));
  return loaded;
}

function portOf(c: Container, ref: string | number): number {
  if (typeof ref === 'number') return ref;
  const port = c.ports?.find((p) => p.name === ref);
  assert.ok(port, `${c.name} has a port named ${ref}`);
  return port.containerPort;
}

/** The variables Kubernetes' service links would add for a Service, as the kubelet names them. */
function serviceLinkEnv(service: Service): Record<string, string> {
  const prefix = service.metadata.name.toUpperCase().replace(/-/g, '_');
  const ip = '10.96.0.10';
  const first = service.spec.ports[0]!;
  const env: Record<string, string> = {
    [`${prefix}_SERVICE_HOST`]: ip,
    [`${prefix}_SERVICE_PORT`]: String(first.port),
    [`${prefix}_PORT`]: `tcp://${ip}:${first.port}`,
  };
  for (const p of service.spec.ports) {
    if (p.name !== undefined) env[`${prefix}_SERVICE_PORT_${p.name.toUpperCase().replace(/-/g, '_')}`] = String(p.port);
    const base = `${prefix}_PORT_${p.port}_TCP`;
    Object.assign(env, { [base]: `tcp://${ip}:${p.port}`, [`${base}_PROTO`]: 'tcp', [`${base}_PORT`]: String(p.port), [`${base}_ADDR`]: ip });
  }
  return env;
}

/** An upstream that answers 404 to everything: the management checks need none of its answers. */
async function startNullUpstream(t: TestContext): Promise<string> {
  const server = http.createServer((req, res) => {
    req.resume();
    res.writeHead(404, { 'content-type': 'application/json' }).end('{}');
  });
  return (await listen(t, server)).url;
}

// ---- the checks ------------------------------------------------------------------------------

describe('deploy/kubernetes manifests', () => {
  it('are YAML that parses, and the kustomization lists every one of them', () => {
    assert.ok(FILES.includes('kustomization.yaml'), 'kustomization.yaml');
    for (const kind of ['Deployment', 'Service', 'ServiceMonitor', 'Secret'] as const) assert.ok(only(kind).length > 0, `a ${kind}`);
    const kustomization = one('Kustomization');
    const listed = [...(kustomization.resources ?? [])].sort();
    const manifests = FILES.filter((f) => f !== 'kustomization.yaml');
    assert.deepEqual(listed, manifests, 'kustomization resources = the manifest files of the folder');
  });

  it('the infermeter container sets only variables the configuration module reads', () => {
    assert.equal(infermeter.envFrom, undefined, 'no envFrom: its names could not be checked');
    const names = (infermeter.env ?? []).map((e) => e.name);
    assert.equal(new Set(names).size, names.length, 'no variable set twice');
    for (const name of names) assert.ok(ALLOWED.has(name), `${name} is read by src/config (VARIABLES)`);
    for (const name of Object.keys(IMAGE_ENV).filter((n) => n.startsWith('INFERMETER_') || n.startsWith('MIES_'))) {
      assert.ok(ALLOWED.has(name), `Dockerfile ENV ${name} is read by src/config (VARIABLES)`);
    }
  });

  it('the image ENV plus the container env is a configuration that loads', () => {
    assert.equal(config().upstream?.href, new URL(envOf(infermeter, 'INFERMETER_UPSTREAM')!.value!).href);
    // The drain timeout is set explicitly, not left to the default.
    const drain = envOf(infermeter, 'INFERMETER_DRAIN_TIMEOUT_MS')?.value;
    assert.ok(drain !== undefined, 'INFERMETER_DRAIN_TIMEOUT_MS is set explicitly');
    assert.equal(config().limits.drainTimeoutMs, Number(drain));
    // The kubelet and Prometheus reach the pod IP: the management plane must listen on it.
    assert.ok(['0.0.0.0', '::'].includes(config().managementHost), `management host ${config().managementHost} is reachable on the pod IP`);
    assert.ok(['0.0.0.0', '::'].includes(config().host), `data host ${config().host} is reachable on the pod IP`);
    assert.equal(config().metricsEnabled, true, '/metrics is served (the ServiceMonitor scrapes it)');
    // The token comes from the Secret by secretKeyRef, and makes it into the configuration.
    const token = envOf(infermeter, 'INFERMETER_METRICS_TOKEN')?.valueFrom?.secretKeyRef;
    assert.ok(token, 'INFERMETER_METRICS_TOKEN comes from a Secret');
    assert.equal(token.optional, true, 'optional: the pod starts without the Secret');
    assert.equal(config().security.metricsToken, TOKEN);
  });

  it('service links are off, and the Services here would not clash with the configuration if they were on', () => {
    // Kubernetes adds <SERVICE>_PORT=tcp://ip:port etc. for each Service of the namespace: a
    // Service named `infermeter` would set INFERMETER_PORT to a URL and stop the start.
    assert.equal(pod.enableServiceLinks, false, 'enableServiceLinks: false');
    const clash = serviceLinkEnv({
      kind: 'Service',
      metadata: { name: 'infermeter-metrics' },
      spec: { selector: {}, ports: [{ name: 'metrics', port: 1027 }] },
    });
    assert.throws(
      () => load({ ...containerEnv(infermeter), ...clash }),
      (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.variable === 'INFERMETER_METRICS_PORT'),
    );
    for (const service of only('Service')) {
      const links = serviceLinkEnv(service);
      for (const name of Object.keys(links)) assert.ok(!ALLOWED.has(name), `Service ${service.metadata.name} would set ${name}`);
      load({ ...links, ...containerEnv(infermeter) });
    }
  });

  it('the container ports are the ports the configuration listens on, and the Dockerfile EXPOSEs the defaults', () => {
    assert.equal(portOf(infermeter, 'http'), config().port);
    assert.equal(portOf(infermeter, 'management'), config().managementPort);
    assert.equal(portOf(infermeter, 'metrics'), config().metricsPort);
    assert.deepEqual(
      (infermeter.ports ?? []).map((p) => p.containerPort).sort(),
      [config().port, config().managementPort, config().metricsPort].sort(),
      'no other ports',
    );
    const defaults = loadConfig({ INFERMETER_UPSTREAM: 'http://127.0.0.1:8000' });
    const exposed = STAGE.filter((i) => i.op === 'EXPOSE')
      .flatMap((i) => i.rest.split(/\s+/))
      .map((p) => Number(p.replace(/\/tcp$/, '')))
      .sort();
    assert.deepEqual(exposed, [defaults.port, defaults.managementPort, defaults.metricsPort].sort(), 'EXPOSE = the default ports');
  });

  it("the Dockerfile's HEALTHCHECK runs the probe, which asks /health on this configuration's management port", () => {
    // test/integration/image-probe.test.ts runs the probe against a running infermeter.
    assert.deepEqual(execForm(STAGE, 'HEALTHCHECK'), ['node', 'dist/healthcheck.js']);
    assert.equal(healthUrl(config()).href, `http://127.0.0.1:${config().managementPort}/health`);
  });

  it('the probes ask the management port for /health (liveness) and /ready (readiness)', () => {
    const scheme = config().security.managementTls === undefined ? 'HTTP' : 'HTTPS';
    const probes = { livenessProbe: '/health', readinessProbe: '/ready', startupProbe: '/health' } as const;
    for (const [kind, path] of Object.entries(probes) as Array<[keyof typeof probes, string]>) {
      const probe = infermeter[kind];
      if (probe === undefined) {
        assert.equal(kind, 'startupProbe', `${kind} is set`);
        continue;
      }
      assert.ok(probe.httpGet, `${kind} is an httpGet`);
      assert.equal(probe.httpGet.path, path, `${kind} path`);
      assert.equal(portOf(infermeter, probe.httpGet.port), config().managementPort, `${kind} port is the management port`);
      assert.equal(probe.httpGet.scheme ?? 'HTTP', scheme, `${kind} scheme`);
    }
  });

  it('a running infermeter answers the probe paths 200 without the token, and the scrape path only with it', async (t) => {
    const upstream = await startNullUpstream(t);
    const app = await startProxy(t, upstream, { INFERMETER_METRICS_TOKEN: TOKEN });
    for (const probe of [infermeter.livenessProbe, infermeter.readinessProbe, infermeter.startupProbe]) {
      if (probe?.httpGet === undefined) continue;
      const res = await fetch(`${app.managementUrl}${probe.httpGet.path}`); // the kubelet sends no token
      assert.equal(res.status, 200, `${probe.httpGet.path} on the management port`);
      await res.arrayBuffer();
    }
    const endpoint = one('ServiceMonitor').spec.endpoints[0]!;
    const metrics = new URL(endpoint.path ?? '/metrics', app.metricsUrl!);
    const anonymous = await fetch(metrics);
    assert.equal(anonymous.status, 401, 'no token, no metrics');
    await anonymous.arrayBuffer();
    const scraped = await fetch(metrics, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(scraped.status, 200, `${metrics.pathname} with the token`);
    assert.match(await scraped.text(), /# TYPE /);
  });

  it('the model server is private to the pod, at the address INFERMETER_UPSTREAM names', () => {
    assert.equal(others.length, 1, 'one model server container beside infermeter');
    const model = others[0]!;
    const upstream = config().upstream!;
    assert.ok(['127.0.0.1', 'localhost', '[::1]'].includes(upstream.hostname), `upstream ${upstream.hostname} is the pod's loopback`);
    const args = [...(model.command ?? []), ...(model.args ?? [])];
    const flag = (name: string): string | undefined => {
      const i = args.indexOf(name);
      if (i >= 0) return args[i + 1];
      return args.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);
    };
    // vLLM and SGLang say --host, TGI --hostname.
    assert.equal(flag('--host') ?? flag('--hostname'), '127.0.0.1', 'the model server binds loopback only');
    assert.equal(flag('--port'), upstream.port, 'the model server listens where INFERMETER_UPSTREAM points');
    assert.deepEqual(model.ports ?? [], [], 'the model server declares no container port');
  });

  it('the Service routes to infermeter’s data and metrics ports, never to the model server', () => {
    const service = one('Service');
    const labels = deployment.spec.template.metadata.labels;
    for (const [k, v] of Object.entries(service.spec.selector)) assert.equal(labels[k], v, `Service selector ${k} matches the pod`);
    const modelPort = Number(config().upstream!.port);
    const targets = service.spec.ports.map((p) => portOf(infermeter, p.targetPort ?? p.port));
    for (const p of service.spec.ports) {
      const target = p.targetPort ?? p.port;
      assert.ok(typeof target !== 'string' || infermeter.ports?.some((c) => c.name === target), `targetPort ${target} is a port of infermeter`);
      assert.notEqual(portOf(infermeter, target), modelPort, 'not the model server port');
      for (const other of others)
        assert.ok(!other.ports?.some((c) => c.name === target || c.containerPort === target), `targetPort ${target} is not ${other.name}'s`);
    }
    assert.ok(targets.includes(config().port), 'the data port is exposed');
    assert.ok(targets.includes(config().metricsPort), 'the metrics port is exposed');
    const metrics = service.spec.ports.find((p) => portOf(infermeter, p.targetPort ?? p.port) === config().metricsPort);
    assert.equal(metrics?.name, 'metrics', 'the metrics port is named `metrics`');
  });

  it('the ServiceMonitor scrapes a port of the Service at /metrics every 15 s with the Secret’s token', () => {
    const monitor = one('ServiceMonitor');
    const service = one('Service');
    for (const [k, v] of Object.entries(monitor.spec.selector.matchLabels))
      assert.equal(service.metadata.labels?.[k], v, `ServiceMonitor selector ${k} matches the Service`);
    assert.equal(monitor.spec.endpoints.length, 1);
    const endpoint = monitor.spec.endpoints[0]!;
    const port = service.spec.ports.find((p) => p.name === endpoint.port);
    assert.ok(port, `the Service has a port named ${endpoint.port}`);
    assert.equal(portOf(infermeter, port.targetPort ?? port.port), config().metricsPort, 'it leads to the metrics port');
    assert.equal(endpoint.path, '/metrics');
    assert.equal(endpoint.interval, '15s');
    assert.equal(endpoint.scheme ?? 'http', config().security.metricsTls === undefined ? 'http' : 'https');
    const ref = envOf(infermeter, 'INFERMETER_METRICS_TOKEN')?.valueFrom?.secretKeyRef;
    assert.equal(endpoint.authorization?.type ?? 'Bearer', 'Bearer');
    assert.deepEqual(endpoint.authorization?.credentials, { name: ref?.name, key: ref?.key }, 'the same Secret key as the container');
  });

  it("the ServiceMonitor's job is one the rules of deploy/prometheus/alerts.yml select", (t) => {
    const monitor = one('ServiceMonitor');
    const service = one('Service');
    // The operator's job: the Service's jobLabel label, else the Service name; a relabeling after it wins.
    let job = monitor.spec.jobLabel === undefined ? service.metadata.name : service.metadata.labels?.[monitor.spec.jobLabel];
    for (const r of monitor.spec.endpoints[0]!.relabelings ?? []) {
      if (r.targetLabel === 'job' && (r.action ?? 'replace') === 'replace' && (r.sourceLabels ?? []).length === 0) job = r.replacement;
    }
    assert.ok(job !== undefined, 'the job has a name');
    let rules: string;
    try {
      rules = readFileSync(new URL('../../deploy/prometheus/alerts.yml', import.meta.url), 'utf8');
    } catch {
      t.skip('deploy/prometheus/alerts.yml is not there');
      return;
    }
    const parsed = parse(rules) as { groups?: Array<{ rules?: Array<{ expr?: string }> }> };
    const exprs = (parsed.groups ?? []).flatMap((g) => (g.rules ?? []).map((r) => r.expr ?? '')).join('\n');
    const selectors = new Set([...exprs.matchAll(/\bjob\s*=~\s*"([^"]+)"/g)].map((m) => m[1]!));
    const exact = new Set([...exprs.matchAll(/\bjob\s*=\s*"([^"]+)"/g)].map((m) => m[1]!));
    assert.ok(selectors.size + exact.size > 0, 'the rules select a job');
    for (const re of selectors) assert.match(job, new RegExp(`^(?:${re})$`), `job ${job} matches job=~"${re}" of alerts.yml`);
    for (const name of exact) assert.equal(job, name, `job ${job} is job="${name}" of alerts.yml`);
  });

  it('the example Secret holds that key, with a placeholder infermeter refuses until it is replaced', () => {
    const ref = envOf(infermeter, 'INFERMETER_METRICS_TOKEN')?.valueFrom?.secretKeyRef;
    const secret = only('Secret').find((s) => s.metadata.name === ref?.name);
    assert.ok(secret, `a Secret named ${ref?.name}`);
    const placeholder =
      secret.stringData?.[ref!.key] ?? (secret.data?.[ref!.key] === undefined ? undefined : Buffer.from(secret.data[ref!.key]!, 'base64').toString());
    assert.ok(placeholder !== undefined, `the Secret has the key ${ref?.key}`);
    assert.match(readFileSync(new URL(secret.file, DIR), 'utf8'), /REPLACE/, 'marked to be replaced');
    const env = { ...containerEnv(infermeter), INFERMETER_METRICS_TOKEN: placeholder };
    assert.throws(
      () => load(env),
      (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.variable === 'INFERMETER_METRICS_TOKEN'),
      'the placeholder is not a usable token',
    );
  });

  it('the grace period outlasts the preStop sleep plus the drain, with a margin', () => {
    const grace = pod.terminationGracePeriodSeconds;
    assert.ok(grace !== undefined, 'terminationGracePeriodSeconds is set');
    const preStop = infermeter.lifecycle?.preStop;
    let sleepMs = 0;
    if (preStop?.sleep !== undefined) sleepMs = preStop.sleep.seconds * 1000;
    else if (preStop?.exec !== undefined) {
      const [cmd, seconds] = preStop.exec.command;
      assert.equal(cmd, 'sleep', 'the preStop hook is a sleep');
      sleepMs = Number(seconds) * 1000;
    }
    assert.ok(sleepMs > 0, 'a preStop sleep: the data port stops accepting at SIGTERM, before every proxy has dropped the pod');
    const drain = config().limits.drainTimeoutMs;
    assert.ok(grace * 1000 > drain, `terminationGracePeriodSeconds ${grace} s > INFERMETER_DRAIN_TIMEOUT_MS ${drain} ms`);
    assert.ok(grace * 1000 >= sleepMs + drain + 10_000, `grace ${grace} s covers the preStop ${sleepMs} ms + drain ${drain} ms + 10 s`);
    // The model server waits for infermeter's /health (on its management port) to go before it stops.
    const model = others[0]!;
    const hook = (model.lifecycle?.preStop?.exec?.command ?? []).join(' ');
    const polled = /127\.0\.0\.1:(\d+)\/health/.exec(hook);
    assert.ok(polled, 'the model server’s preStop waits for infermeter’s /health');
    assert.equal(Number(polled[1]), config().managementPort);
    const waits = /monotonic\(\)\s*\+\s*(\d+)/.exec(hook);
    assert.ok(waits, 'that wait has a deadline');
    assert.ok(Number(waits[1]) * 1000 >= sleepMs + drain, 'the deadline covers the preStop sleep and the drain');
    assert.ok(Number(waits[1]) < grace, 'and leaves the model server time for its own SIGTERM');
  });

  it('infermeter runs unprivileged, with a read-only root, and bounded resources', () => {
    const sc = { ...pod.securityContext, ...infermeter.securityContext };
    assert.equal(sc.runAsNonRoot, true, 'runAsNonRoot');
    assert.equal(sc.readOnlyRootFilesystem, true, 'readOnlyRootFilesystem');
    assert.equal(sc.allowPrivilegeEscalation, false, 'allowPrivilegeEscalation false');
    assert.ok(sc.capabilities?.drop?.includes('ALL'), 'capabilities drop ALL');
    // The kubelet can check runAsNonRoot only against a numeric user: a name in USER needs runAsUser.
    const user = STAGE.filter((i) => i.op === 'USER')
      .at(-1)
      ?.rest.split(':')[0];
    assert.ok(user !== undefined && user !== 'root' && user !== '0', 'the image does not run as root');
    if (!/^\d+$/.test(user)) assert.ok(sc.runAsUser !== undefined && sc.runAsUser > 0, `the image's USER ${user} is a name: runAsUser is set to its uid`);
    const r = infermeter.resources;
    assert.ok(r?.requests?.cpu && r.requests.memory && r.limits?.memory, 'cpu and memory requests, a memory limit');
  });

  it('the NetworkPolicy, if any, names infermeter’s ports and keeps metrics and management to selected peers', () => {
    for (const policy of only('NetworkPolicy')) {
      const labels = deployment.spec.template.metadata.labels;
      for (const [k, v] of Object.entries(policy.spec.podSelector.matchLabels ?? {})) assert.equal(labels[k], v, `podSelector ${k} matches the pod`);
      for (const rule of policy.spec.ingress ?? []) {
        const ports = (rule.ports ?? []).map((p) => portOf(infermeter, p.port!));
        const guarded = ports.some((p) => p === config().metricsPort || p === config().managementPort);
        if (guarded) assert.ok((rule.from ?? []).length > 0, 'metrics and management ports only from listed peers');
        assert.ok(rule.ports !== undefined && rule.ports.length > 0, 'every rule names its ports');
      }
    }
  });
});

describe('docs/deploy.md', () => {
  it('names only variables the configuration module reads', () => {
    const doc = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8');
    const named = new Set(doc.match(/\b(?:INFERMETER|MIES)_[A-Z0-9_]*[A-Z0-9]\b/g) ?? []);
    assert.ok(named.size > 0);
    for (const name of named) {
      if (name === 'INFERMETER_BUCKETS') continue; // INFERMETER_BUCKETS_<FAMILY>
      assert.ok(ALLOWED.has(name), `${name} (docs/deploy.md) is read by src/config`);
    }
  });
});
