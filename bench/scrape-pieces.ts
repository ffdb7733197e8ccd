// How long one piece of a /metrics render at the caps holds the event loop (bench:scrape runs it
// beside the bystanders, as a process of its own): infermeter of the checkout `root` started in
// this process in front of `upstream`, its caps filled through its data plane as
// bench/scrape-stall.ts fills them, then `renders` renders read piece by piece from
// metrics.renderPieces as a scrape round reads them. A piece's time: from asking for it to
// holding it, encoded to bytes (what scrape-rounds.ts does in the same turn); with the loop idle,
// the turn given back in between is microseconds. Prints one JSON line. Loopback only; every loop
// bounded in count.
//   node bench/scrape-pieces.ts <root> <upstream> <models> <tenants> <dialects> [renders]
import http from 'node:http';
import { fillCaps } from './caps.ts';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [root = '.', upstream = '', modelsArg = '100', tenantsArg = '100', dialects = 'mindie,vllm,otel', rendersArg = '3'] = process.argv.slice(2);
const MODELS = Number(modelsArg);
const TENANTS = Number(tenantsArg);
const RENDERS = Number(rendersArg);
/**
 * The process's CPU time (ms), its GC threads' included: the main thread's alone is counted in
 * scheduler ticks (4 ms here: /proc's schedstat and RUSAGE_THREAD read a running thread's count
 * as of its last tick), too coarse for a piece.
 */
const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};
const load = (path: string) => import(pathToFileURL(join(root, path)).href);

const { startInfermeter } = await load('src/app.ts');
const { loadConfig } = await load('src/config/config.ts');
const { silentLogger } = await load('src/log.ts');
const config = loadConfig({
  INFERMETER_UPSTREAM: upstream,
  INFERMETER_PORT: '0',
  INFERMETER_MANAGEMENT_PORT: '0',
  INFERMETER_METRICS_PORT: '0',
  INFERMETER_DIALECTS: dialects,
  INFERMETER_TENANT: 'header:x-tenant',
  INFERMETER_UPSTREAM_METRICS: 'off',
  ...(process.env.BENCH_PRICES_FILE === undefined ? {} : { INFERMETER_PRICES_FILE: process.env.BENCH_PRICES_FILE }),
});
const app = await startInfermeter(config, { log: silentLogger });

function request(model: string, tenant: string, agent: http.Agent): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      new URL('/v1/chat/completions', app.dataUrl),
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'x-tenant': tenant, 'x-bench-tokens': '2', 'x-bench-ttft-ms': '0', 'x-bench-gap-ms': '0' },
      },
      (res) => {
        res.resume();
        res.on('end', resolve);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'hi' }] }));
  });
}

try {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  await fillCaps(MODELS, TENANTS, (model, tenant) => request(model, tenant, agent));
  agent.destroy();
  const times: number[] = [];
  // Each piece's CPU time (ms): apart from the scheduler's waits, which the wall time includes.
  const cpus: number[] = [];
  const trace: Array<[number, number, number, string]> = [];
  // The family the piece continues (the last one a piece before it began).
  let lastFamily = '';
  let largest = { ms: 0, chars: 0, family: '' };
  let bytes = 0;
  // The first render unmeasured (its JIT, the label strings built once).
  for (let r = 0; r <= RENDERS; r++) {
    const pieces = app.metrics.renderPieces(false) as AsyncGenerator<string>;
    bytes = 0;
    lastFamily = '';
    for (;;) {
      const t0 = performance.now();
      const c0 = cpuMs();
      const step = await pieces.next();
      if (step.done === true) break;
      const encoded = Buffer.from(step.value);
      const ms = performance.now() - t0;
      const cpu = cpuMs() - c0;
      bytes += encoded.length;
      if (r === 0) continue;
      times.push(ms);
      cpus.push(cpu);
      if (ms > largest.ms) largest = { ms, chars: step.value.length, family: lastFamily };
      if (process.env.BENCH_PIECES_TRACE !== undefined)
        trace.push([ms, cpu, step.value.length, `${lastFamily} -> ${[...step.value.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]).join(' ')}`]);
      lastFamily = [...step.value.matchAll(/^# TYPE (\S+)/gm)].at(-1)?.[1] ?? lastFamily;
    }
  }
  if (trace.length > 0)
    for (const t of trace.sort((a, b) => b[1] - a[1]).slice(0, 15))
      process.stderr.write(`${t.map((x) => (typeof x === 'number' ? x.toFixed(2) : x)).join(' ')}\n`);
  const p = (values: number[], q: number) => values.sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil((q / 100) * values.length) - 1)] ?? Number.NaN;
  process.stdout.write(
    `${JSON.stringify({ pieces: times.length / RENDERS, bytes, renderMs: times.reduce((a, b) => a + b, 0) / RENDERS, renderCpuMs: cpus.reduce((a, b) => a + b, 0) / RENDERS, largestMs: largest.ms, largestChars: largest.chars, largestFamily: largest.family, p99Ms: p(times, 99), largestCpuMs: Math.max(...cpus), p99CpuMs: p(cpus, 99) })}\n`,
  );
} finally {
  await app.close();
}
process.exit(0);
