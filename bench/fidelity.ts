// npm run bench:fidelity: how true infermeter's per-request figures are under load. Streams at
// concurrency 1, 8 and 32 go through each target while Debian's tcpdump captures its
// client-facing port on loopback; each request's TTFB, TTFT and e2e from the target's access
// log (matched by X-Request-Id) is compared with the times its bytes crossed that port
// (wire-times.ts): the request's first byte, the response's first byte, its first body byte
// (the first token: the bench's upstream sends the head, then the tokens) and its last byte.
// "Blind spot" = wire − logged: positive, the figure reads low. Targets: infermeter,
// infermeter with INFERMETER_WORKERS=2, the bare Node pass-through stamping where plain Node
// can (fidelity-floor.ts: the floor), and BENCH_COMPARE=<checkout> as one more infermeter.
// The capture holds the upstream's port too: the proxy leg of each request (when its first body
// byte, and its last, crossed the upstream's port, to when they crossed the client's), against
// the proxy_overhead_ms the target logged (infermeter_proxy_overhead_seconds).
// Then the scrape scenario: bystander streams' largest gap between chunks, with and without 20
// back-to-back /metrics scrapes at full cardinality (INFERMETER_MAX_MODELS models, all four
// dialects). Then the wave scenario (issue 34), the pattern of vLLM's benchmark client at a
// fixed concurrency: 32 lanes, each sending its next stream the moment its last one ends, every
// stream of one wave the same length, so that 32 streams end together and 32 requests arrive at
// once; per target, the arrival blind spot (the request's first byte on the wire to the logged
// t0) and the client's TTFT over direct's, waves after the first. Loopback only; every loop
// bounded in count. Needs tcpdump and the right to capture (root or CAP_NET_RAW). `--quick`:
// fewer requests.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { percentile } from './load.ts';
import { INFERMETER_FLAGS, infermeterEnv, startNode, startUpstream } from './targets.ts';
import { wireExchanges } from './wire-times.ts';
import { capture, load, logged, stopCapture, tcpdumpAvailable, wave, WAVE, type Sent } from './wave.ts';

const quick = process.argv.includes('--quick');
/** `--wave`: the wave scenario alone. */
const waveOnly = process.argv.includes('--wave');
const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));

/** The latency scenario's stream (bench/run.ts): 128 tokens, first after 50 ms, then every 10 ms. */
const STREAM = { tokens: 128, ttftMs: 50, gapMs: 10 };
const LEVELS = [
  { concurrency: 1, requests: quick ? 4 : 16 },
  { concurrency: 8, requests: quick ? 16 : 64 },
  { concurrency: 32, requests: quick ? 64 : 320 },
];
const MAX_MODELS = 100;
const SCRAPES = 20;

interface Target {
  readonly name: string;
  readonly url: string;
  readonly metricsUrl?: string;
  readonly log: string;
}

interface Spots {
  ttfb: number[];
  ttft: number[];
  e2e: number[];
  /** Logged e2e minus the client's own: must never be positive. */
  overClient: number[];
  /** The proxy leg on the wire: the first body byte's, the last byte's (client port − upstream port). */
  firstLeg: number[];
  lastLeg: number[];
  /** What the target logged as its own time (infermeter's proxy_overhead_ms). */
  overhead: number[];
}

async function measure(
  target: Target,
  concurrency: number,
  requests: number,
  tmp: string,
  upstreamPort: number,
  shape = STREAM,
): Promise<Spots & { sent: Sent[] }> {
  const port = Number(new URL(target.url).port);
  const file = join(tmp, `${target.name.replace(/\W+/g, '-')}-${concurrency}.pcap`);
  // A warm-up round, unmeasured: the target's paths warm, its connections open.
  await load(target.url, `warm-${target.name}-${concurrency}`, concurrency, concurrency, { tokens: 4, ttftMs: 0, gapMs: 1 });
  const tcpdump = await capture(file, [port, upstreamPort]);
  const prefix = `${target.name.replace(/\W+/g, '-')}-c${concurrency}`;
  const sent = await load(target.url, prefix, requests, concurrency, shape);
  await new Promise((r) => setTimeout(r, 100)); // the last segments reach the capture (--immediate-mode: at once)
  await stopCapture(tcpdump);
  const pcap = readFileSync(file);
  const wire = new Map(wireExchanges(pcap, port).map((w) => [w.requestId, w]));
  const upstreamWire = new Map(wireExchanges(pcap, upstreamPort).map((w) => [w.requestId, w]));
  const log = await logged(
    target.log,
    sent.map((s) => s.id),
  );
  const spots: Spots = { ttfb: [], ttft: [], e2e: [], overClient: [], firstLeg: [], lastLeg: [], overhead: [] };
  for (const s of sent) {
    const w = wire.get(s.id);
    const l = log.get(s.id);
    if (w === undefined || l === undefined || !s.ok)
      throw new Error(`${s.id}: ${w === undefined ? 'not on the wire' : l === undefined ? 'not logged' : 'failed'}`);
    if (w.headAt !== undefined && l.ttfb_ms !== undefined) spots.ttfb.push(w.headAt - w.requestAt - l.ttfb_ms);
    if (w.bodyAt !== undefined && l.ttft_ms !== undefined) spots.ttft.push(w.bodyAt - w.requestAt - l.ttft_ms);
    if (w.lastAt !== undefined && l.e2e_ms !== undefined) spots.e2e.push(w.lastAt - w.requestAt - l.e2e_ms);
    if (process.env.FIDELITY_DEBUG !== undefined && w.lastAt !== undefined && l.e2e_ms !== undefined && Math.abs(w.lastAt - w.requestAt - l.e2e_ms) > 5)
      console.error(s.id, JSON.stringify(w), JSON.stringify(l), s.clientE2eMs);
    if (l.e2e_ms !== undefined) spots.overClient.push(l.e2e_ms - s.clientE2eMs);
    const u = upstreamWire.get(s.id);
    if (u?.bodyAt !== undefined && w.bodyAt !== undefined) spots.firstLeg.push(w.bodyAt - u.bodyAt);
    if (u?.lastAt !== undefined && w.lastAt !== undefined) spots.lastLeg.push(w.lastAt - u.lastAt);
    if (l.proxy_overhead_ms !== undefined) spots.overhead.push(l.proxy_overhead_ms);
  }
  if (process.env.FIDELITY_DEBUG === undefined) rmSync(file);
  return { ...spots, sent };
}

/** vLLM's benchmark client's pattern at a fixed concurrency (see the header). */
const WAVES = quick ? 3 : 6;

async function waveScenario(targets: readonly Target[], direct: string, tmp: string): Promise<string[]> {
  const rows: string[] = [];
  // Direct first, then each target: interleaved by target, the same pattern for each.
  const directTtft = (await wave(direct, 'direct', WAVES, tmp)).ttftMs;
  const dp50 = percentile(directTtft, 50);
  const dp99 = percentile(directTtft, 99);
  rows.push(`| direct | – | – | ${f(dp50)} | ${f(dp99)} | – | – |`);
  for (const target of targets) {
    const s = await wave(target.url, target.name, WAVES, tmp, { log: target.log });
    if (s.failed > 0) throw new Error(`${target.name}: ${s.failed} wave requests failed`);
    rows.push(
      `| ${target.name} | ${f(percentile(s.blindMs, 50))} | ${f(percentile(s.blindMs, 99))} | ${f(percentile(s.ttftMs, 50))} | ${f(percentile(s.ttftMs, 99))} | ${f(percentile(s.ttftMs, 50) - dp50)} | ${f(percentile(s.ttftMs, 99) - dp99)} |`,
    );
  }
  return rows;
}

const f = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : 'n/a');
const stats = (values: readonly number[]) =>
  `${f(percentile(values, 50))} | ${f(percentile(values, 99))} | ${f(Math.max(...values))} | ${f(Math.min(...values))}`;

/** The largest gap between chunks of bystander streams, with and without back-to-back scrapes. */
async function scrapeScenario(target: Target): Promise<string> {
  if (target.metricsUrl === undefined) return `| ${target.name} | n/a (no metrics listener) | | | |`;
  // Full cardinality: a request for each of INFERMETER_MAX_MODELS models (and one over the cap).
  await load(target.url, `fill-${target.name}`, MAX_MODELS + 1, 16, { tokens: 2, ttftMs: 0, gapMs: 0 }, (i) => `fidelity-model-${i}`);
  const bystanders = { tokens: 300, ttftMs: 0, gapMs: 10 };
  const largest = (sent: Sent[]) => Math.max(...sent.flatMap((s) => s.gapsMs));
  const quiet = largest(await load(target.url, `quiet-${target.name}`, 8, 8, bystanders));
  // The scrapes come from another process, so the client's own loop does not read 6 MB.
  const scraper = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const out = []; await new Promise((r) => setTimeout(r, 200)); for (let i = 0; i < ${SCRAPES}; i++) { const t = performance.now(); const text = await (await fetch(process.argv[1])).text(); out.push([performance.now() - t, text.length]); } console.log(JSON.stringify(out));`,
      target.metricsUrl,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let printed = '';
  scraper.stdout!.on('data', (c: Buffer) => (printed += c.toString()));
  const scraped = new Promise((r) => scraper.once('exit', r));
  const busy = largest(await load(target.url, `scraped-${target.name}`, 8, 8, bystanders));
  await scraped;
  const scrapes = JSON.parse(printed) as Array<[number, number]>;
  const scrapeMs = scrapes.map(([t]) => t);
  return `| ${target.name} | ${f(quiet)} | ${f(busy)} | ${f(busy - quiet)} | ${f(percentile(scrapeMs, 50))} / ${f(Math.max(...scrapeMs))} | ${(scrapes[0]![1] / 1024 / 1024).toFixed(1)} |`;
}

async function main(): Promise<void> {
  if (!tcpdumpAvailable()) throw new Error('tcpdump is missing: apt-get install -y tcpdump');
  const tmp = mkdtempSync(join(tmpdir(), 'infermeter-fidelity-'));
  const children: ChildProcess[] = [];
  const up = await startUpstream();
  children.push(up.child);
  const flags = (process.env.BENCH_INFERMETER_FLAGS ?? INFERMETER_FLAGS).split(' ').filter(Boolean);
  const infermeter = async (name: string, extra: Record<string, string>, cli = here('../src/cli.ts')): Promise<Target> => {
    const log = join(tmp, `${name.replace(/\W+/g, '-')}.log`);
    const env = {
      ...infermeterEnv(up.url),
      INFERMETER_DIALECTS: 'mindie,aom,vllm,otel',
      INFERMETER_MAX_MODELS: String(MAX_MODELS),
      INFERMETER_ACCESS_LOG: log,
      ...extra,
    };
    const { child, line } = await startNode(cli, [], env, /"infermeter started"/, 'stderr', flags);
    children.push(child);
    child.stderr!.resume();
    const started = JSON.parse(line) as { data: string; metrics?: string };
    return { name, url: started.data, log, ...(started.metrics?.startsWith('http') ? { metricsUrl: started.metrics } : {}) };
  };
  const floorLog = join(tmp, 'floor.log');
  const floor = await startNode(here('fidelity-floor.ts'), [up.url, floorLog], {}, /"port"/, 'stdout');
  children.push(floor.child);
  const targets: Target[] = [
    { name: 'node pass-through (floor)', url: `http://127.0.0.1:${(JSON.parse(floor.line) as { port: number }).port}`, log: floorLog },
    await infermeter('infermeter', {}),
    await infermeter('infermeter, 2 workers', { INFERMETER_WORKERS: '2' }),
  ];
  const compare = process.env.BENCH_COMPARE;
  if (compare !== undefined && compare !== '') targets.push(await infermeter(`infermeter @ ${compare}`, {}, join(compare, 'src/cli.ts')));
  try {
    const load0 = loadavg()[0]!;
    console.log(`Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.versions.node}, load average ${load0.toFixed(2)} at the start.`);
    console.log(
      `Streams: ${STREAM.tokens} tokens, first after ${STREAM.ttftMs} ms, then every ${STREAM.gapMs} ms. Blind spot = wire − logged, ms: p50 | p99 | max | min (min < 0: the figure read high).\n`,
    );
    console.log(
      '| target | concurrency | requests | TTFT p50 | p99 | max | min | TTFB p50 | p99 | max | min | e2e p50 | p99 | max | min | logged e2e − client e2e, max |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    const legs: string[] = [];
    const upstreamPort = Number(new URL(up.url).port);
    for (const level of waveOnly ? [] : LEVELS) {
      // Interleaved: every target at one level before the next level.
      for (const target of targets) {
        const s = await measure(target, level.concurrency, level.requests, tmp, upstreamPort);
        console.log(
          `| ${target.name} | ${level.concurrency} | ${s.ttft.length} | ${stats(s.ttft)} | ${stats(s.ttfb)} | ${stats(s.e2e)} | ${f(Math.max(...s.overClient))} |`,
        );
        const logged = s.overhead.length === 0 ? 'n/a | n/a | n/a | n/a' : stats(s.overhead);
        legs.push(`| ${target.name} | ${level.concurrency} | ${s.firstLeg.length} | ${stats(s.firstLeg)} | ${stats(s.lastLeg)} | ${logged} |`);
      }
    }
    console.log(
      '\nThe proxy leg on the wire (client port − upstream port: the first body byte, the last byte) against the time the target logged as its own (proxy_overhead_ms: infermeter_proxy_overhead_seconds), ms: p50 | p99 | max | min.\n',
    );
    console.log(
      '| target | concurrency | requests | first byte leg p50 | p99 | max | min | last byte leg p50 | p99 | max | min | logged overhead p50 | p99 | max | min |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const line of legs) console.log(line);
    console.log(
      `\nWaves: ${WAVE.concurrency} lanes × ${WAVES} waves, streams of ${WAVE.shape.tokens} tokens, first after ${WAVE.shape.ttftMs} ms, then every ${WAVE.shape.gapMs} ms; each lane sends its next the moment its last ends. Blind spot = the request's first byte on the wire to the logged t0 (the TTFB blind spot), waves 2 on, ms; the client's TTFT over waves 2 on, ms.\n`,
    );
    console.log('| target | blind spot p50 | blind spot p99 | client TTFT p50 | client TTFT p99 | added over direct, p50 | added over direct, p99 |');
    console.log('|---|---|---|---|---|---|---|');
    for (const row of await waveScenario(targets, up.url, tmp)) console.log(row);
    console.log(
      `\nScrapes: ${SCRAPES} back to back from another process while 8 bystander streams run (300 tokens, every 10 ms), after a request for each of ${MAX_MODELS + 1} models; INFERMETER_DIALECTS=mindie,aom,vllm,otel.\n`,
    );
    console.log('| target | largest gap, no scrapes, ms | largest gap, scraped, ms | added, ms | scrape p50 / max, ms | MiB |');
    console.log('|---|---|---|---|---|---|');
    if (!waveOnly) for (const target of targets) if (target.metricsUrl !== undefined) console.log(await scrapeScenario(target));
    console.log(`\nLoad average at the end: ${loadavg()[0]!.toFixed(2)}.`);
  } finally {
    for (const c of children) c.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
