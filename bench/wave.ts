// The streaming client, the loopback capture and the access-log matching that bench:fidelity and
// npm run bench's wave scenario share, and the wave itself: the pattern of vLLM's benchmark
// client at a fixed concurrency (32 lanes, each sending its next stream the moment its last
// ends, every stream the same length, so that 32 streams end together and 32 requests arrive
// at once). Per request: the client's TTFT, and, where the target logs its own figures
// (infermeter's access log) and tcpdump may capture, the arrival blind spot: the request's first
// byte on the client-facing port to the logged t0 (as the TTFB blind spot: the wire's head minus
// the request's first byte, minus the logged TTFB). Loopback only; every loop bounded in count.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { wireExchanges } from './wire-times.ts';
import { benchHeaders } from './load.ts';

export interface Shape {
  readonly tokens: number;
  readonly ttftMs: number;
  readonly gapMs: number;
  /** The client asks for usage itself (vLLM's benchmark does); without it infermeter injects and strips. */
  readonly includeUsage?: boolean;
}

export interface Sent {
  readonly id: string;
  /** The client's own time to the first body byte. */
  readonly clientTtftMs: number;
  readonly clientE2eMs: number;
  readonly gapsMs: number[];
  readonly ok: boolean;
}

const body = (model: string, includeUsage: boolean) =>
  JSON.stringify({
    model,
    stream: true,
    ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
    messages: [{ role: 'user', content: 'Measure the hop, not the model.' }],
  });

/** One streamed request; the gaps between the chunks the client read (after the first). */
export function stream(url: string, id: string, agent: http.Agent, shape: Shape, model = 'bench-model'): Promise<Sent> {
  return new Promise((resolve) => {
    const payload = body(model, shape.includeUsage ?? true);
    const t0 = performance.now();
    let last: number | undefined;
    let first: number | undefined;
    const gapsMs: number[] = [];
    const req = http.request(
      new URL('/v1/chat/completions', url),
      {
        method: 'POST',
        agent,
        headers: benchHeaders(payload, shape, id),
      },
      (res) => {
        res.on('data', () => {
          const now = performance.now();
          first ??= now - t0;
          if (last !== undefined) gapsMs.push(now - last);
          last = now;
        });
        res.on('end', () => resolve({ id, clientTtftMs: first ?? Number.NaN, clientE2eMs: performance.now() - t0, gapsMs, ok: res.statusCode === 200 }));
        res.on('error', () => resolve({ id, clientTtftMs: Number.NaN, clientE2eMs: Number.NaN, gapsMs, ok: false }));
      },
    );
    req.on('error', () => resolve({ id, clientTtftMs: Number.NaN, clientE2eMs: Number.NaN, gapsMs, ok: false }));
    // A stalled stream is a failed one, not a run that never ends.
    req.setTimeout(30_000, () => {
      resolve({ id, clientTtftMs: Number.NaN, clientE2eMs: Number.NaN, gapsMs, ok: false });
      req.destroy();
    });
    req.end(payload);
  });
}

/** `requests` streams over `concurrency` lanes, each lane sending its next when its last ended. */
export async function load(url: string, prefix: string, requests: number, concurrency: number, shape: Shape, model?: (i: number) => string): Promise<Sent[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const sent: Sent[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < requests) {
        const i = next++;
        sent.push(await stream(url, `${prefix}-${i}`, agent, shape, model?.(i)));
      }
    }),
  );
  agent.destroy();
  return sent;
}

export interface Capture {
  readonly child: ChildProcess;
  readonly said: () => string;
}

/** Whether Debian's tcpdump is there (capturing also needs root or CAP_NET_RAW). */
export function tcpdumpAvailable(): boolean {
  return spawnSync('tcpdump', ['--version']).status === 0;
}

/** tcpdump on loopback, capturing these ports; resolves once it listens. */
export async function capture(file: string, ports: readonly number[]): Promise<Capture> {
  const filter = ports.map((p) => `tcp port ${p}`).join(' or ');
  const child = spawn('tcpdump', ['-i', 'lo', '-n', '-U', '--immediate-mode', '-s', '2048', '-B', '65536', '--time-stamp-precision=nano', '-w', file, filter], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let text = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on('data', (c: Buffer) => {
      text += c.toString();
      if (text.includes('listening on')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`tcpdump exited with ${code}: ${text}`)));
  });
  return { child, said: () => text };
}

/** Stops the capture (by its PID); a capture that lost packets is refused (its last byte would read early). */
export async function stopCapture(capture: Capture): Promise<void> {
  const exited = new Promise((r) => capture.child.once('exit', r));
  capture.child.kill('SIGINT');
  await exited;
  const dropped = /(\d+) packets? dropped by kernel/.exec(capture.said());
  if (dropped === null || dropped[1] !== '0') throw new Error(`the capture lost packets: ${capture.said()}`);
}

interface Logged {
  request_id?: string;
  ttfb_ms?: number;
  ttft_ms?: number;
  e2e_ms?: number;
  proxy_overhead_ms?: number;
}

/** The log's lines for these ids, once all are written (the access log batches every 100 ms). */
export async function logged(file: string, ids: readonly string[]): Promise<Map<string, Logged>> {
  const wanted = new Set(ids);
  for (let i = 0; i < 100; i++) {
    const found = new Map<string, Logged>();
    if (existsSync(file)) {
      for (const line of readFileSync(file, 'utf8').split('\n')) {
        if (line === '') continue;
        const record = JSON.parse(line) as Logged;
        if (record.request_id !== undefined && wanted.has(record.request_id)) found.set(record.request_id, record);
      }
    }
    if (found.size === wanted.size) return found;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${file}: not every request was logged`);
}

/** 32 lanes, streams of 256 tokens (the first after 200 ms, then one every 5 ms). */
export const WAVE = { concurrency: 32, shape: { tokens: 256, ttftMs: 200, gapMs: 5 } };

/** Requests of the waves after the first (lanes start together, so request i is in wave floor(i / 32)). */
const laterWaves = (sent: readonly Sent[]): Sent[] => sent.filter((s) => Number(s.id.slice(s.id.lastIndexOf('-') + 1)) >= WAVE.concurrency);

export interface WaveResult {
  /** The client's TTFT of each request of the waves after the first, ms. */
  readonly ttftMs: number[];
  /** The arrival blind spot of each of them, ms (empty: the target logs nothing, or no capture). */
  readonly blindMs: number[];
  readonly failed: number;
}

/**
 * One run of the wave pattern against a target: `waves` waves, after an unmeasured warm-up
 * round. With `log` (the target's access log) and tcpdump, the blind spot of each later request.
 */
export async function wave(url: string, name: string, waves: number, tmp: string, options: { log?: string; includeUsage?: boolean } = {}): Promise<WaveResult> {
  const shape = { ...WAVE.shape, includeUsage: options.includeUsage ?? true };
  const prefix = `${name.replace(/\W+/g, '-')}-wave-${Math.random().toString(36).slice(2, 8)}`;
  await load(url, `warm-${prefix}`, WAVE.concurrency, WAVE.concurrency, { tokens: 4, ttftMs: 0, gapMs: 1, includeUsage: shape.includeUsage });
  const port = Number(new URL(url).port);
  const file = join(tmp, `${prefix}.pcap`);
  const tcpdump = options.log === undefined ? undefined : await capture(file, [port]);
  const sent = await load(url, prefix, WAVE.concurrency * waves, WAVE.concurrency, shape);
  const later = laterWaves(sent);
  const blindMs: number[] = [];
  if (tcpdump !== undefined && options.log !== undefined) {
    await new Promise((r) => setTimeout(r, 100)); // the last segments reach the capture
    await stopCapture(tcpdump);
    const wire = new Map(wireExchanges(readFileSync(file), port).map((w) => [w.requestId, w]));
    rmSync(file);
    const log = await logged(
      options.log,
      later.map((s) => s.id),
    );
    for (const s of later) {
      const w = wire.get(s.id);
      const l = log.get(s.id);
      if (w?.headAt !== undefined && l?.ttfb_ms !== undefined) blindMs.push(w.headAt - w.requestAt - l.ttfb_ms);
    }
  }
  return { ttftMs: later.filter((s) => s.ok).map((s) => s.clientTtftMs), blindMs, failed: sent.filter((s) => !s.ok).length };
}
