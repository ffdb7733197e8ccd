// npm run bench:scrape: /metrics at full label caps against bystander streams. The caps are
// filled (INFERMETER_MAX_MODELS=100 models x INFERMETER_MAX_TENANTS=100 tenants, 128-character
// names, INFERMETER_DIALECTS=mindie,vllm,otel), then bystander streams (300 tokens, one every
// 10 ms) run without scrapes and with back-to-back scrapes from another process: the largest gap
// between chunks they saw, each time, and what the scrapes cost (time, size, the target's RSS).
// BENCH_COMPARE=<checkout> runs another infermeter the same way, after this one. Loopback only;
// every loop bounded in count.
import { spawn } from 'node:child_process';
import http from 'node:http';
import { cpus, loadavg } from 'node:os';
import { createWriteStream, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { percentile } from './load.ts';
import { INFERMETER_FLAGS, infermeterEnv, startNode, startUpstream } from './targets.ts';

const quick = process.argv.includes('--quick');
const MODELS = 100;
const TENANTS = quick ? 30 : 100;
const BYSTANDERS = Number(process.env.BENCH_BYSTANDERS ?? 32);
const SCRAPES = quick ? 2 : 4;
const name = (kind: string, i: number) => `${kind}-${i}-`.padEnd(128, 'x');

function stream(url: string, agent: http.Agent, tokens: number, model: string, tenant: string): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const gaps: number[] = [];
    let last: number | undefined;
    const req = http.request(
      new URL('/v1/chat/completions', url),
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-tenant': tenant, 'x-bench-tokens': String(tokens), 'x-bench-ttft-ms': '0', 'x-bench-gap-ms': tokens > 2 ? '10' : '0' } },
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

async function run(label: string, cli: string, upstream: string): Promise<string> {
  const env = { ...infermeterEnv(upstream), INFERMETER_DIALECTS: 'mindie,vllm,otel', INFERMETER_TENANT: 'header:x-tenant', INFERMETER_UPSTREAM_METRICS: 'off' };
  const flags = (process.env.BENCH_INFERMETER_FLAGS ?? INFERMETER_FLAGS).split(' ').filter(Boolean);
  const { child, line } = await startNode(cli, [], env, /"infermeter started"/, 'stderr', flags);
  child.stderr!.resume();
  if (process.env.BENCH_CHILD_STDOUT !== undefined) child.stdout!.pipe(createWriteStream(process.env.BENCH_CHILD_STDOUT));
  else child.stdout!.resume();
  try {
    const started = JSON.parse(line) as { data: string; metrics: string };
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    let next = 0;
    const pairs = MODELS * TENANTS;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < pairs) {
          const i = next++;
          await stream(started.data, agent, 2, name('model', i % MODELS), name('tenant', Math.floor(i / MODELS)));
        }
      }),
    );
    const bystanders = async () => {
      const gaps = await Promise.all(Array.from({ length: BYSTANDERS }, (_, i) => stream(started.data, agent, 300, name('model', i % MODELS), name('tenant', i % TENANTS))));
      return Math.max(...gaps.flat());
    };
    const quiet = await bystanders();
    const rssBefore = rssOf(child.pid!);
    // The scrapes come from another process, so that the bystanders' client does not read them:
    // curl, which reads as cheaply as Prometheus does (a Node fetch reading 500 MB would take a
    // core from the two the target shares).
    const scraper = spawn(
      'sh',
      ['-c', `for i in $(seq ${SCRAPES}); do curl -s -o /dev/null -w '%{time_total} %{size_download}\\n' "$0"; done`, started.metrics],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let printed = '';
    scraper.stdout!.on('data', (c: Buffer) => (printed += c.toString()));
    const scraped = new Promise((r) => scraper.once('exit', r));
    let busy = 0;
    let rounds = 0;
    let scraping = true;
    void scraped.then(() => (scraping = false));
    // Bystanders for as long as the scrapes last (bounded: the scraper does SCRAPES scrapes).
    while (scraping && rounds < 50) {
      busy = Math.max(busy, await bystanders());
      rounds++;
    }
    await scraped;
    const scrapes = printed.trim().split('\n').map((l) => l.split(' ').map(Number)).map(([s, n]) => [s! * 1000, n!] as [number, number]);
    const ms = scrapes.map(([t]) => t);
    agent.destroy();
    return `| ${label} | ${BYSTANDERS} | ${quiet.toFixed(1)} | ${busy.toFixed(1)} | ${(busy - quiet).toFixed(1)} | ${percentile(ms, 50).toFixed(0)} / ${Math.max(...ms).toFixed(0)} | ${mib(scrapes[0]![1])} | ${mib(rssBefore)} / ${mib(rssOf(child.pid!))} / ${mib(hwmOf(child.pid!))} |`;
  } finally {
    child.kill('SIGKILL');
  }
}

const up = await startUpstream();
try {
  console.log(`Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.versions.node}, load average ${loadavg()[0]!.toFixed(2)} at the start.`);
  console.log(`Caps: ${MODELS} models x ${TENANTS} tenants, 128-character names, mindie,vllm,otel; ${SCRAPES} back-to-back scrapes from another process while rounds of bystander streams (300 tokens, every 10 ms) run.\n`);
  console.log('| target | bystanders | largest gap, no scrapes, ms | largest gap, scraped, ms | added, ms | scrape p50 / max, ms | MiB | RSS before / after / peak, MiB |');
  console.log('|---|---|---|---|---|---|---|---|');
  console.log(await run('infermeter', fileURLToPath(new URL('../src/cli.ts', import.meta.url)), up.url));
  const compare = process.env.BENCH_COMPARE;
  if (compare !== undefined && compare !== '') console.log(await run(`infermeter @ ${compare}`, join(compare, 'src/cli.ts'), up.url));
  console.log(`\nLoad average at the end: ${loadavg()[0]!.toFixed(2)}.`);
} finally {
  up.child.kill('SIGKILL');
}
