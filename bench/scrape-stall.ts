// npm run bench:scrape: /metrics at full label caps against bystander streams. The caps are
// filled (INFERMETER_MAX_MODELS=100 models x INFERMETER_MAX_TENANTS=100 tenants, 128-character
// names, INFERMETER_DIALECTS=mindie,vllm,otel), then bystander streams (300 tokens, one every
// 10 ms) run without scrapes and with back-to-back scrapes from another process, in turn, five
// times: the largest gap between chunks they saw in each round, and what the scrapes cost
// (time, size, the target's RSS). Round for round beside them, the control: the same bystanders
// through the Node floor (bench/passthrough.ts) while infermeter is scraped, so that what the
// scrapes cost the machine (the render's CPU, curl's reading, the scheduler) is told apart from
// infermeter's loop holding a stream.
// First, each build's render at the same caps read piece by piece in a process of its own
// (bench/scrape-pieces.ts): how long the largest piece held the loop, wall and CPU.
// BENCH_COMPARE=<checkout> runs another infermeter the same way, after this one. Loopback only;
// every loop bounded in count. BENCH_TENANTS, BENCH_DIALECTS, BENCH_BYSTANDERS and
// BENCH_PRICES_FILE (a prices file: the cost families at the caps too) change the
// scenario (e.g. BENCH_TENANTS=1 BENCH_DIALECTS=mindie,aom,vllm,otel BENCH_BYSTANDERS=8: the
// fidelity bench's scrape scenario, 100 models, in repetitions).
import { spawn } from 'node:child_process';
import http from 'node:http';
import { capName, fillCaps } from './caps.ts';
import { cpus, loadavg } from 'node:os';
import { createWriteStream, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { percentile } from './load.ts';
import { INFERMETER_FLAGS, infermeterEnv, startNode, startUpstream } from './targets.ts';

const quick = process.argv.includes('--quick');
const MODELS = 100;
const TENANTS = Number(process.env.BENCH_TENANTS ?? (quick ? 30 : 100));
const DIALECTS = process.env.BENCH_DIALECTS ?? 'mindie,vllm,otel';
const BYSTANDERS = Number(process.env.BENCH_BYSTANDERS ?? 32);
const REPETITIONS = quick ? 2 : 5;
/** BENCH_PRICES_FILE: infermeter with these prices (INFERMETER_PRICES_FILE), its cost families at the caps too. */
const PRICES: { INFERMETER_PRICES_FILE?: string } =
  process.env.BENCH_PRICES_FILE === undefined ? {} : { INFERMETER_PRICES_FILE: process.env.BENCH_PRICES_FILE };

function stream(url: string, agent: http.Agent, tokens: number, model: string, tenant: string): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const gaps: number[] = [];
    let last: number | undefined;
    const req = http.request(
      new URL('/v1/chat/completions', url),
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'x-tenant': tenant,
          'x-bench-tokens': String(tokens),
          'x-bench-ttft-ms': '0',
          'x-bench-gap-ms': tokens > 2 ? '10' : '0',
        },
      },
      (res) => {
        res.on('data', () => {
          const now = performance.now();
          if (last !== undefined) gaps.push(now - last);
          last = now;
        });
        res.on('end', () => resolve(gaps));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const rssOf = (pid: number) => Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
const hwmOf = (pid: number) => Number(/^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
const mib = (b: number) => (b / 1024 / 1024).toFixed(1);

/** One scrape by curl (it reads as cheaply as Prometheus does; a Node client reading 500 MB would
 * take a core from the two the target shares): its time in ms and its size. */
function scrapeOnce(url: string): Promise<[number, number]> {
  return new Promise((resolve, reject) => {
    const curl = spawn('curl', ['-s', '-o', '/dev/null', '-w', '%{time_total} %{size_download}', url], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    curl.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    curl.once('exit', (code) => {
      const [seconds, bytes] = out.trim().split(' ').map(Number);
      if (code !== 0 || !(bytes! > 0)) reject(new Error(`curl exited with ${code}: ${out}`));
      else resolve([seconds! * 1000, bytes!]);
    });
  });
}

interface Rounds {
  quiet: number[];
  busy: number[];
  scrapeMs: number[];
}

/** infermeter at the caps: rounds of its bystanders and, interleaved, of the control's through `floor`. */
async function run(label: string, cli: string, upstream: string, floor: string): Promise<{ rows: string[]; added: number[]; controlAdded: number[] }> {
  const env = {
    ...infermeterEnv(upstream),
    INFERMETER_DIALECTS: DIALECTS,
    INFERMETER_TENANT: 'header:x-tenant',
    INFERMETER_UPSTREAM_METRICS: 'off',
    ...PRICES,
  };
  const flags = (process.env.BENCH_INFERMETER_FLAGS ?? INFERMETER_FLAGS).split(' ').filter(Boolean);
  const { child, line } = await startNode(cli, [], env, /"infermeter started"/, 'stderr', flags);
  child.stderr!.resume();
  if (process.env.BENCH_CHILD_STDOUT !== undefined) child.stdout!.pipe(createWriteStream(process.env.BENCH_CHILD_STDOUT));
  else child.stdout!.resume();
  try {
    const started = JSON.parse(line) as { data: string; metrics: string };
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    await fillCaps(MODELS, TENANTS, (model, tenant) => stream(started.data, agent, 2, model, tenant));
    const bystanders = async (via: string) => {
      const gaps = await Promise.all(
        Array.from({ length: BYSTANDERS }, (_, i) => stream(via, agent, 300, capName('model', i % MODELS), capName('tenant', i % TENANTS))),
      );
      return Math.max(...gaps.flat());
    };
    // Warm: a round of bystanders and one scrape, unmeasured (the render's first run, the paths' JIT).
    await bystanders(started.data);
    await bystanders(floor);
    await scrapeOnce(started.metrics);
    const rssBefore = rssOf(child.pid!);
    const own: Rounds = { quiet: [], busy: [], scrapeMs: [] };
    const control: Rounds = { quiet: [], busy: [], scrapeMs: [] };
    let size = 0;
    /** A round of bystanders through `via` without scrapes, then one with back-to-back scrapes of infermeter from another process. */
    const round = async (via: string, into: Rounds) => {
      into.quiet.push(await bystanders(via));
      let scraping = true;
      const scrapes = (async () => {
        for (let n = 0; scraping && n < 20; n++) {
          const [ms, bytes] = await scrapeOnce(started.metrics);
          into.scrapeMs.push(ms);
          size = bytes;
        }
      })();
      into.busy.push(await bystanders(via));
      scraping = false;
      await scrapes;
    };
    for (let r = 0; r < REPETITIONS; r++) {
      // Interleaved, the order turned every repetition.
      if (r % 2 === 0) {
        await round(started.data, own);
        await round(floor, control);
      } else {
        await round(floor, control);
        await round(started.data, own);
      }
    }
    const row = (name: string, { quiet, busy, scrapeMs }: Rounds) => {
      const added = busy.map((b, i) => b - quiet[i]!);
      return {
        added,
        row: `| ${name} | ${BYSTANDERS} | ${percentile(quiet, 50).toFixed(1)} / ${Math.max(...quiet).toFixed(1)} | ${percentile(busy, 50).toFixed(1)} / ${Math.max(...busy).toFixed(1)} | ${percentile(added, 50).toFixed(1)} / ${Math.max(...added).toFixed(1)} | ${scrapeMs.length} | ${percentile(scrapeMs, 50).toFixed(0)} / ${Math.max(...scrapeMs).toFixed(0)} | ${mib(size)} | ${mib(rssBefore)} / ${mib(rssOf(child.pid!))} / ${mib(hwmOf(child.pid!))} |`,
      };
    };
    const mine = row(label, own);
    const theirs = row(`control: the Node floor's bystanders, ${label} scraped`, control);
    agent.destroy();
    return { rows: [mine.row, theirs.row], added: mine.added, controlAdded: theirs.added };
  } finally {
    child.kill('SIGKILL');
  }
}

interface Pieces {
  pieces: number;
  renderMs: number;
  renderCpuMs: number;
  largestMs: number;
  largestCpuMs: number;
  largestChars: number;
  p99Ms: number;
  p99CpuMs: number;
}

/** The render of the checkout `root` at the caps, piece by piece (bench/scrape-pieces.ts). */
async function pieces(label: string, root: string, upstream: string): Promise<string> {
  const flags = (process.env.BENCH_INFERMETER_FLAGS ?? INFERMETER_FLAGS).split(' ').filter(Boolean);
  const args = [root, upstream, String(MODELS), String(TENANTS), DIALECTS, quick ? '2' : '5'];
  const { child, line } = await startNode(
    fileURLToPath(new URL('scrape-pieces.ts', import.meta.url)),
    args,
    PRICES.INFERMETER_PRICES_FILE === undefined ? {} : { BENCH_PRICES_FILE: PRICES.INFERMETER_PRICES_FILE },
    /"pieces"/,
    'stdout',
    flags,
  );
  child.kill('SIGKILL');
  const r = JSON.parse(line) as Pieces;
  const f = (n: number) => n.toFixed(1);
  return `| ${label} | ${f(r.pieces)} | ${f(r.renderMs)} / ${f(r.renderCpuMs)} | ${f(r.largestMs)} / ${f(r.largestCpuMs)} | ${f(r.p99Ms)} / ${f(r.p99CpuMs)} | ${f(r.largestChars / 1024)} |`;
}

const up = await startUpstream();
// The control: bystanders through the Node floor (the bench's pass-through) while infermeter is
// scraped, round for round beside infermeter's own. What the scrapes add to its gaps is the
// machine's share (the render's CPU, curl's reading, the scheduler), none of it a loop of
// infermeter's holding a stream.
const floorProcess = await startNode(fileURLToPath(new URL('passthrough.ts', import.meta.url)), [up.url, '--head-at-once'], {}, /"port"/, 'stdout');
const floor = `http://127.0.0.1:${(JSON.parse(floorProcess.line) as { port: number }).port}`;
try {
  console.log(`Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.versions.node}, load average ${loadavg()[0]!.toFixed(2)} at the start.`);
  console.log(
    `Caps: ${MODELS} models x ${TENANTS} tenants, 128-character names, ${DIALECTS}. ${REPETITIONS} repetitions of: a round of ${BYSTANDERS} bystander streams (300 tokens, every 10 ms) without scrapes, then one with back-to-back scrapes (curl, another process); the control's the same, through the Node floor while infermeter is scraped. Per round, the largest gap between chunks of any bystander; p50 / max over the repetitions.\n`,
  );
  const compare = process.env.BENCH_COMPARE;
  const builds: Array<[string, string]> = [['infermeter', fileURLToPath(new URL('..', import.meta.url))]];
  if (compare !== undefined && compare !== '') builds.push([`infermeter @ ${compare}`, compare]);
  console.log(
    `The render at these caps in a process of its own, read piece by piece as a scrape round reads it (bench/scrape-pieces.ts; ${quick ? 2 : 5} renders after an unmeasured one): a piece's time is from asking for it to holding it as bytes; CPU is the process's (its GC threads' included: the main thread's alone is counted in 4 ms ticks), apart from the scheduler's waits.\n`,
  );
  console.log(
    '| target | pieces per render | render, ms (wall / CPU) | largest piece, ms (wall / CPU) | piece p99, ms (wall / CPU) | largest piece, Ki chars |',
  );
  console.log('|---|---|---|---|---|---|');
  for (const [label, root] of builds) console.log(await pieces(label, root, up.url));
  console.log();
  console.log(
    '| target | bystanders | largest gap, no scrapes, ms | largest gap, scraped, ms | added, ms | scrapes | scrape p50 / max, ms | MiB | RSS before / after / peak, MiB |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|');
  const goals: string[] = [];
  for (const [label, root] of builds) {
    const { rows, added, controlAdded } = await run(label, join(root, 'src/cli.ts'), up.url, floor);
    for (const row of rows) console.log(row);
    // The goal (issue 54): the scrapes add at most 25 ms to the largest gap, in every round.
    const worst = Math.max(...added);
    goals.push(
      `${label}: scrapes add at most 25 ms to a bystander's largest gap: ${worst <= 25 ? 'PASS' : 'MISS'} (${worst.toFixed(1)} ms in the worst round, ${percentile(added, 50).toFixed(1)} at the median; the control's bystanders, under the same scrapes through no loop of infermeter's: ${Math.max(...controlAdded).toFixed(1)} and ${percentile(controlAdded, 50).toFixed(1)})`,
    );
  }
  console.log();
  for (const goal of goals) console.log(goal);
  console.log(`\nLoad average at the end: ${loadavg()[0]!.toFixed(2)}.`);
} finally {
  floorProcess.child.kill('SIGKILL');
  up.child.kill('SIGKILL');
}
