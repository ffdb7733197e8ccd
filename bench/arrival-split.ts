// npm run bench:arrival: where the TTFT a proxy adds goes, on the way in or on the way back.
// The bench's upstream (BENCH_TIMINGS=1) notes when each request's body had come and when it
// wrote the request's first token, on the machine's monotonic clock, which the client shares
// (process.hrtime). Per request: the way in, from the client's send to the upstream's whole body;
// the way back, from the upstream's first token to the client's first body byte; each over
// direct's. Two patterns, 32 lanes: `wave`, the latency scenario's streams (128 tokens, TTFT
// 50 ms, 10 ms apart), each lane sending its next the moment its last ended, so that 32 streams
// end together and 32 requests arrive at once (waves 2 on pooled: the first wave's requests
// come to a proxy that is doing nothing else); `burst`, 32 one-token requests sent at once to a
// proxy that is doing nothing else (no stream ends among them). Targets: direct; the Node floor
// (the bare pass-through that writes the response head when the upstream's arrives, as infermeter
// must: npm run bench's floor) in two processes, whose difference is what a run resolves;
// infermeter with its defaults, and the same process on a path it forwards unmeasured
// (`/v1/unmeasured`: its proxying alone); BENCH_COMPARE=<checkouts, comma-separated> as in npm
// run bench. Interleaved repetitions (`--reps=N`, 5), medians of each repetition's p50 and p99.
// Clients without include_usage. Loopback only, every loop bounded in count.
import http from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchHeaders, median, percentile } from './load.ts';
import { CONTROL, FLOOR, INFERMETER_FLAGS, infermeterEnv, startNode } from './targets.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const reps = Number(arg('reps') ?? 5);
if (!Number.isInteger(reps) || reps < 1 || reps > 50) throw new Error('--reps: expected an integer from 1 to 50');
const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));

const LANES = 32;
const WAVES = 4;
const STREAM = { tokens: 128, ttftMs: 50, gapMs: 10 };
const ONE_TOKEN = { tokens: 1, ttftMs: 50, gapMs: 0 };
const payload = JSON.stringify({ model: 'bench-model', stream: true, messages: [{ role: 'user', content: 'Measure the hop, not the model.' }] });

interface Sent {
  readonly id: string;
  readonly wave: number;
  readonly sentAt: bigint;
  readonly firstByteAt: bigint;
}

let seq = 0;
/** Requests that failed or came back without a body, since the last figures. */
let failed = 0;
function send(url: string, agent: http.Agent, shape: typeof STREAM, wave: number): Promise<Sent | undefined> {
  const id = `arrival-${seq++}`;
  return new Promise((resolve) => {
    const sentAt = process.hrtime.bigint();
    let firstByteAt = 0n;
    let settled = false;
    const settle = (sent: Sent | undefined): void => {
      if (settled) return;
      settled = true;
      if (sent === undefined) failed++;
      resolve(sent);
    };
    const req = http.request(url, { method: 'POST', agent, headers: benchHeaders(payload, shape, id) }, (res) => {
      res.on('data', () => {
        if (firstByteAt === 0n) firstByteAt = process.hrtime.bigint();
      });
      res.on('end', () => settle(res.statusCode === 200 && firstByteAt !== 0n ? { id, wave, sentAt, firstByteAt } : undefined));
      res.on('error', () => settle(undefined));
    });
    req.on('error', () => settle(undefined));
    req.end(payload);
  });
}

async function wavePattern(url: string, agent: http.Agent): Promise<Sent[]> {
  const out: Sent[] = [];
  await Promise.all(
    Array.from({ length: LANES }, async () => {
      for (let wave = 1; wave <= WAVES; wave++) {
        const s = await send(url, agent, STREAM, wave);
        if (s !== undefined) out.push(s);
      }
    }),
  );
  return out.filter((s) => s.wave >= 2);
}

async function burstPattern(url: string, agent: http.Agent): Promise<Sent[]> {
  const out: Sent[] = [];
  for (let wave = 1; wave <= WAVES; wave++) {
    await new Promise((r) => setTimeout(r, 100)); // the proxy idle before each burst
    for (const s of await Promise.all(Array.from({ length: LANES }, () => send(url, agent, ONE_TOKEN, wave)))) if (s !== undefined) out.push(s);
  }
  return out;
}

interface Figures {
  inP50: number;
  inP99: number;
  backP50: number;
  ttftP50: number;
  /** Requests that failed, or whose timings the upstream did not note. */
  missing: number;
}

/** Each request's way in and way back, from the upstream's timings of the same ids. */
async function figures(upstream: string, sent: Sent[]): Promise<Figures> {
  const text = await (await fetch(`${upstream}/timings`)).text();
  const lost = failed;
  failed = 0;
  const at = new Map<string, [bigint, bigint]>();
  for (const line of text.split('\n')) {
    const [id, arrived, first] = line.split(' ');
    if (id !== undefined && arrived !== undefined && first !== undefined) at.set(id, [BigInt(arrived), BigInt(first)]);
  }
  const ms = (ns: bigint) => Number(ns) / 1e6;
  const wayIn: number[] = [];
  const wayBack: number[] = [];
  const ttft: number[] = [];
  for (const s of sent) {
    const u = at.get(s.id);
    if (u === undefined) continue;
    wayIn.push(ms(u[0] - s.sentAt));
    wayBack.push(ms(s.firstByteAt - u[1]));
    ttft.push(ms(s.firstByteAt - s.sentAt));
  }
  return {
    inP50: percentile(wayIn, 50),
    inP99: percentile(wayIn, 99),
    backP50: percentile(wayBack, 50),
    ttftP50: percentile(ttft, 50),
    missing: sent.length - wayIn.length + lost,
  };
}

const children: Array<{ kill(): unknown }> = [];
try {
  const { child: upChild, line: upLine } = await startNode(here('upstream.ts'), [], { BENCH_TIMINGS: '1' }, /"port"/, 'stdout');
  children.push(upChild);
  const upstream = `http://127.0.0.1:${(JSON.parse(upLine) as { port: number }).port}`;
  const CHAT = '/v1/chat/completions';
  const targets: Array<{ name: string; url: string }> = [{ name: 'direct', url: upstream + CHAT }];
  for (const name of [FLOOR, CONTROL]) {
    const { child, line } = await startNode(here('passthrough.ts'), [upstream, '--head-at-once'], {}, /"port"/, 'stdout');
    children.push(child);
    targets.push({ name, url: `http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}${CHAT}` });
  }
  const builds = [here('..'), ...(process.env.BENCH_COMPARE?.split(',') ?? [])];
  for (const [i, root] of builds.entries()) {
    const { child, line } = await startNode(
      join(root, 'src/cli.ts'),
      [],
      infermeterEnv(upstream),
      /"infermeter started"/,
      'stderr',
      INFERMETER_FLAGS.split(' '),
    );
    children.push(child);
    const data = (JSON.parse(line) as { data: string }).data;
    targets.push({ name: i === 0 ? 'infermeter' : `infermeter @ ${root}`, url: data + CHAT });
    // The same process on a path it forwards unmeasured: its proxying alone.
    if (i === 0) targets.push({ name: 'infermeter, unmeasured path', url: `${data}/v1/unmeasured` });
  }
  const agents = new Map(targets.map((t) => [t.name, new http.Agent({ keepAlive: true, maxSockets: LANES })]));
  const patterns: Array<[string, (url: string, agent: http.Agent) => Promise<Sent[]>]> = [
    ['wave', wavePattern],
    ['burst', burstPattern],
  ];
  for (const [pattern, run] of patterns) {
    for (const t of targets) {
      await run(t.url, agents.get(t.name)!); // warm: the pattern's paths compiled
      await fetch(`${upstream}/timings`);
      failed = 0;
    }
    const byTarget = new Map(targets.map((t) => [t.name, [] as Figures[]]));
    for (let rep = 0; rep < reps; rep++) {
      for (let i = 0; i < targets.length; i++) {
        const t = targets[(i + rep) % targets.length]!;
        byTarget.get(t.name)!.push(await figures(upstream, await run(t.url, agents.get(t.name)!)));
      }
    }
    const med = (name: string, key: keyof Figures) => median(byTarget.get(name)!.map((f) => f[key]));
    const title =
      pattern === 'wave'
        ? `wave: ${LANES} lanes × ${WAVES} waves, ${STREAM.tokens} tokens, TTFT ${STREAM.ttftMs} ms, ${STREAM.gapMs} ms between tokens, waves 2 on`
        : `burst: ${LANES} one-token requests at once (TTFT ${ONE_TOKEN.ttftMs} ms) to an idle proxy, ${WAVES} bursts`;
    process.stdout.write(
      `\n### ${title}; medians of ${reps} interleaved repetitions\n\n| target | way in p50 ms | added | way in p99 ms | added | way back p50 ms | added | TTFT p50 ms | added | requests failed or unmatched |\n|---|---|---|---|---|---|---|---|---|---|\n`,
    );
    for (const t of targets) {
      const cell = (key: keyof Figures) => {
        const v = med(t.name, key);
        return t.name === 'direct' ? `${v.toFixed(3)} | -` : `${v.toFixed(3)} | ${(v - med('direct', key)).toFixed(3)}`;
      };
      const missing = byTarget.get(t.name)!.reduce((n, f) => n + f.missing, 0);
      process.stdout.write(`| ${t.name} | ${cell('inP50')} | ${cell('inP99')} | ${cell('backP50')} | ${cell('ttftP50')} | ${missing} |\n`);
    }
  }
  for (const a of agents.values()) a.destroy();
} finally {
  for (const c of children) c.kill();
}
