// The processes a benchmark run measures side by side: the upstream, infermeter (all
// measurement on), infermeter with its access log, the Node floor (the pass-through that writes
// the head at once, in two processes), the same pass-through on undici, the holding pipe, and nginx.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { childPids } from './proc.ts';

export interface Target {
  readonly name: string;
  readonly url: string;
  /** The processes whose CPU and memory count for this target (none for direct). */
  readonly pids: () => number[];
  /** infermeter's metrics listener, whose failure counters the run reads (bench/counters.ts). */
  readonly metricsUrl?: string;
  /** Its access log, where the wave scenario reads each request's logged t0 (bench/wave.ts). */
  readonly log?: string;
  /** Measured in the wave pattern only (bench/run.ts), a reference for reading its goals. */
  readonly waveOnly?: boolean;
}

export interface Fleet {
  readonly upstream: Target;
  readonly targets: readonly Target[];
  readonly tmp: string;
  stop(): Promise<void>;
}

const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));

/**
 * The Node floor every goal is read against: the pass-through that writes the response head when
 * the upstream's arrives, as infermeter must (passthrough.ts `--head-at-once`); and a second
 * process of it, the run's control (how far apart the two are is what the run can resolve).
 */
export const FLOOR = 'node pass-through, head at once';
export const CONTROL = 'node pass-through, head at once (control)';
/** The same pass-through with undici's Pool as its upstream client (undici-passthrough.ts). */
export const UNDICI = 'undici pass-through, head at once';
/** The bare pipe that holds the head until the first body bytes: information, the wave only. */
export const HOLDING = 'node pass-through, head held';

/**
 * The flags infermeter runs with (npm start, the bin's shebang, the image; test/run-flags.test.ts
 * holds them equal). 32 MiB semi-spaces bound the resident set (8 MiB tripled a /metrics render:
 * npm run bench:render). 64 MiB of old generation before V8's first marking: with the default,
 * the limit sits just above infermeter's ~20 MB of live heap, and under load the scavenges
 * promoted about 4 MB per 512 throughput requests of objects that die young (the bare
 * pass-through: 0.02 MB); with it, 0.01 MB and no full collections (npm run bench:gc,
 * docs/performance.md).
 */
export const INFERMETER_FLAGS = '--max-semi-space-size=32 --initial-heap-size=64';

/** The first line of `child`'s `stream` that matches `pattern` (the stream is drained from then on). */
export function lineMatching(child: ChildProcess, stream: 'stdout' | 'stderr', pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const source = child[stream]!;
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      for (const line of text.split('\n')) {
        if (pattern.test(line)) {
          source.off('data', onData);
          source.resume();
          resolve(line);
          return;
        }
      }
    };
    source.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${child.spawnfile} exited with ${code}: ${text}`)));
  });
}

/** A free loopback port (for a server that cannot be told port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** A node process of the bench, once it has printed the line that says it is ready. */
export async function startNode(
  script: string,
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
  stream: 'stdout' | 'stderr',
  flags: string[] = [],
): Promise<{ child: ChildProcess; line: string }> {
  const child = spawn(process.execPath, [...flags, script, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const line = await lineMatching(child, stream, ready);
  return { child, line };
}

/** The bench's model server (upstream.ts). */
export async function startUpstream(): Promise<{ child: ChildProcess; url: string }> {
  const { child, line } = await startNode(here('upstream.ts'), [], {}, /"port"/, 'stdout');
  return { child, url: `http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}` };
}

/** infermeter as every bench runs it: in front of `upstream`, all measurement on, ports chosen by the system. */
export function infermeterEnv(upstream: string): Record<string, string> {
  return {
    INFERMETER_UPSTREAM: upstream,
    INFERMETER_PORT: '0',
    INFERMETER_MANAGEMENT_PORT: '0',
    INFERMETER_METRICS_PORT: '0',
    INFERMETER_DIALECTS: 'mindie,aom',
    INFERMETER_LOG_LEVEL: 'info',
  };
}

export function nginxAvailable(): boolean {
  return spawnSync('nginx', ['-v']).status === 0;
}

export async function startFleet(options: { nginx: boolean }): Promise<Fleet> {
  const tmp = mkdtempSync(join(tmpdir(), 'infermeter-bench-'));
  const children: ChildProcess[] = [];
  const up = await startUpstream();
  children.push(up.child);
  const upstreamUrl = up.url;

  const infermeter = async (
    name: string,
    extra: Record<string, string>,
    cli = here('../src/cli.ts'),
    flags = process.env.BENCH_INFERMETER_FLAGS ?? INFERMETER_FLAGS,
  ): Promise<Target> => {
    const env = { ...infermeterEnv(upstreamUrl), ...extra };
    const { child, line } = await startNode(cli, [], env, /"infermeter started"/, 'stderr', flags.split(' ').filter(Boolean));
    children.push(child);
    const started = JSON.parse(line) as { data: string; metrics?: string };
    // An older build compared (BENCH_COMPARE) may not say where its metrics are.
    const metricsUrl = started.metrics?.startsWith('http') ? started.metrics : undefined;
    return {
      name,
      url: started.data,
      pids: () => [child.pid!],
      ...(metricsUrl === undefined ? {} : { metricsUrl }),
      ...(extra.INFERMETER_ACCESS_LOG === undefined ? {} : { log: extra.INFERMETER_ACCESS_LOG }),
    };
  };

  const node = async (script: string, args: string[] = []) => {
    const { child, line } = await startNode(here(script), [upstreamUrl, ...args], {}, /"port"/, 'stdout');
    children.push(child);
    return { url: `http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}`, pids: () => [child.pid!] };
  };
  const targets: Target[] = [
    { name: FLOOR, ...(await node('passthrough.ts', ['--head-at-once'])) },
    { name: CONTROL, ...(await node('passthrough.ts', ['--head-at-once'])) },
    { name: UNDICI, ...(await node('undici-passthrough.ts')) },
    { name: HOLDING, ...(await node('passthrough.ts')), waveOnly: true },
    { name: 'http-proxy-3 alone', ...(await node('hp3-passthrough.ts')) },
    await infermeter('infermeter', {}),
    await infermeter('infermeter + access log', { INFERMETER_ACCESS_LOG: join(tmp, 'access.log') }),
  ];
  // The data plane in N worker processes (BENCH_WORKERS=N): whether more processes help on this
  // machine. Its CPU and memory: the primary's and its workers'.
  const workers = process.env.BENCH_WORKERS;
  if (workers !== undefined && workers !== '') {
    const t = await infermeter(`infermeter, ${workers} workers`, { INFERMETER_WORKERS: workers });
    const primary = t.pids()[0]!;
    targets.push({ ...t, pids: () => [primary, ...childPids(primary)] });
  }
  // Goodput on (BENCH_GOODPUT=1: INFERMETER_SLO, nothing else): what judging every
  // request costs, side by side with the plain infermeter.
  if (process.env.BENCH_GOODPUT === '1') targets.push(await infermeter('infermeter + goodput', { INFERMETER_SLO: 'ttft:500 tpot:50' }));
  // Another build side by side (a checkout of an earlier commit, with its node_modules): how a
  // change is measured before and after in one run; BENCH_COMPARE_FLAGS: its node flags.
  const compare = process.env.BENCH_COMPARE;
  const compareFlags = process.env.BENCH_COMPARE_FLAGS;
  // Several builds: comma-separated (a fix measured beside the build before it and an older one).
  for (const build of compare === undefined || compare === '' ? [] : compare.split(',')) {
    const name = `infermeter @ ${build}${compareFlags === undefined ? '' : ` (${compareFlags})`}`;
    targets.push(await infermeter(name, {}, join(build, 'src/cli.ts'), compareFlags));
  }

  let nginx: ChildProcess | undefined;
  if (options.nginx && nginxAvailable()) {
    const port = await freePort();
    const upstreamPort = new URL(upstreamUrl).port;
    // One worker like one Node process; streaming unbuffered; keep-alive to the upstream.
    writeFileSync(
      join(tmp, 'nginx.conf'),
      `worker_processes 1;
error_log ${tmp}/nginx-error.log warn;
pid ${tmp}/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${tmp}/body; proxy_temp_path ${tmp}/proxy; fastcgi_temp_path ${tmp}/fcgi; uwsgi_temp_path ${tmp}/uwsgi; scgi_temp_path ${tmp}/scgi;
  upstream model { server 127.0.0.1:${upstreamPort}; keepalive 256; }
  server {
    listen 127.0.0.1:${port};
    keepalive_requests 1000000;
    location / {
      proxy_pass http://model;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
`,
    );
    nginx = spawn('nginx', ['-c', join(tmp, 'nginx.conf'), '-p', tmp, '-g', 'daemon off;'], { stdio: 'ignore' });
    // Ready once it accepts connections.
    for (let i = 0; i < 100; i++) {
      const ok = await fetch(`http://127.0.0.1:${port}/metrics`).then(
        () => true,
        () => false,
      );
      if (ok) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const master = nginx.pid!;
    targets.push({ name: 'nginx', url: `http://127.0.0.1:${port}`, pids: () => childPids(master) });
  }

  return {
    upstream: { name: 'direct', url: upstreamUrl, pids: () => [] },
    targets,
    tmp,
    async stop() {
      for (const c of children) c.kill('SIGKILL');
      nginx?.kill('SIGQUIT');
      await new Promise((r) => setTimeout(r, 100));
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}
