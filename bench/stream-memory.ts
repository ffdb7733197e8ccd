// npm run bench:stream-memory: where the memory of long streams goes, build beside build. Each
// build (BUILDS: checkouts with their node_modules, comma-separated; this one by default) runs
// behind the bench upstream with bench/memory-probe.ts loaded; each round, 20,000 one-token
// requests and then 1000 concurrent 4k-token streams (STREAMS, TOKENS; ROUNDS rounds, builds
// in turn). Printed per round and build: RSS, heap used and total, external and ArrayBuffers at
// 30 % and 90 % into the streams, and the highest of each during them. RSS that grows while
// heap and ArrayBuffers do not is the allocator's; with them, what the process holds (or has
// not collected yet). Loopback only; every loop bounded.
import http from 'node:http';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad } from './load.ts';
import { INFERMETER_FLAGS, infermeterEnv, startNode, startUpstream } from './targets.ts';

interface Reading {
  t: number;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}
const KEYS = ['rss', 'heapUsed', 'heapTotal', 'external', 'arrayBuffers'] as const;

const here = fileURLToPath(new URL('.', import.meta.url));
const builds = (process.env.BUILDS ?? join(here, '..')).split(',');
const streams = Number(process.env.STREAMS ?? 1000);
const tokens = Number(process.env.TOKENS ?? 4096);
const rounds = Number(process.env.ROUNDS ?? 3);
const mb = (b: number) => (b / 1048576).toFixed(1);
const show = (r: Reading | undefined) => (r === undefined ? 'n/a' : KEYS.map((k) => mb(r[k])).join(' | '));

const up = await startUpstream();
const targets: Array<{ build: string; out: string; stop: () => void; url: string }> = [];
try {
  for (const [i, build] of builds.entries()) {
    const out = join(tmpdir(), `infermeter-stream-memory-${process.pid}-${i}.jsonl`);
    writeFileSync(out, '');
    const flags = [...INFERMETER_FLAGS.split(' '), '--import', join(here, 'memory-probe.ts')];
    const { child, line } = await startNode(
      join(build, 'src/cli.ts'),
      [],
      { ...infermeterEnv(up.url), MEMORY_PROBE_OUT: out },
      /"infermeter started"/,
      'stderr',
      flags,
    );
    targets.push({ build, out, stop: () => child.kill(), url: (JSON.parse(line) as { data: string }).data });
  }
  process.stdout.write(`| round | build | reading | RSS, MB | heap used | heap total | external | ArrayBuffers |\n|---|---|---|---|---|---|---|---|\n`);
  for (let round = 1; round <= rounds; round++) {
    for (const t of targets) {
      const agent = new http.Agent({ keepAlive: true, maxSockets: streams + 32 });
      await runLoad(t.url, { name: 'requests', requests: 20_000, concurrency: 32, tokens: 1, ttftMs: 0, gapMs: 0 }, agent);
      const t0 = Date.now();
      await runLoad(t.url, { name: 'long', requests: streams, concurrency: streams, tokens, ttftMs: 0, gapMs: 0 }, agent);
      const t1 = Date.now();
      agent.destroy();
      const readings = readFileSync(t.out, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Reading)
        .filter((r) => r.t >= t0 && r.t <= t1);
      const at = (p: number) => readings[Math.floor(readings.length * p)];
      const highest = Object.fromEntries(KEYS.map((k) => [k, Math.max(...readings.map((r) => r[k]))])) as unknown as Reading;
      for (const [name, r] of [
        ['30 %', at(0.3)],
        ['90 %', at(0.9)],
        ['highest', readings.length === 0 ? undefined : highest],
      ] as const)
        process.stdout.write(`| ${round} | ${t.build} | ${name} | ${show(r)} |\n`);
    }
  }
} finally {
  for (const t of targets) {
    t.stop();
    rmSync(t.out, { force: true });
  }
  up.child.kill();
}
