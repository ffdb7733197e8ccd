// npm run bench:alloc: the bytes infermeter allocates per request in the kept-alive round trip
// (one-token requests at concurrency 1, clients without include_usage: the bench's `round trip`),
// from V8's sampling heap profiler (every allocation, collected objects included; a sample every
// 256 bytes), and the sites that allocate most. Allocation, unlike CPU time, does not depend on
// what else the machine runs, so two builds compare on a busy machine too: BENCH_COMPARE=<another
// checkout, with its node_modules> measures that build as well. `--fresh`: a connection per
// request; `--requests=N` (3000), `--top=N` (25) sites.
import http from 'node:http';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad, type Scenario } from './load.ts';
import { INFERMETER_FLAGS, infermeterEnv, startNode, startUpstream } from './targets.ts';

interface AllocationNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children: AllocationNode[];
}
interface AllocationProfile {
  head: AllocationNode;
  samples: { nodeId: number; size: number }[];
}

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const requests = Number(arg('requests') ?? 3000);
const top = Number(arg('top') ?? 25);
const fresh = process.argv.includes('--fresh');
const here = fileURLToPath(new URL('..', import.meta.url));
const builds = [here, ...(process.env.BENCH_COMPARE === undefined ? [] : [process.env.BENCH_COMPARE])];
const shape: Scenario = { name: 'round trip', requests, concurrency: 1, tokens: 1, ttftMs: 0, gapMs: 0, freshConnections: fresh };
const dir = mkdtempSync(join(tmpdir(), 'infermeter-alloc-'));
const up = await startUpstream();

/** Bytes per request by allocating site (function, file and line). */
function sites(profile: AllocationProfile): Map<string, number> {
  const bytes = new Map<number, number>();
  for (const s of profile.samples) bytes.set(s.nodeId, (bytes.get(s.nodeId) ?? 0) + s.size);
  const out = new Map<string, number>();
  const walk = (n: AllocationNode): void => {
    const b = bytes.get(n.id);
    if (b !== undefined) {
      const cf = n.callFrame;
      const name = `${cf.functionName || '(anonymous)'} ${cf.url.replace(/.*\/(src|node_modules)\//, '$1/')}:${cf.lineNumber + 1}`;
      out.set(name, (out.get(name) ?? 0) + b / requests);
    }
    for (const c of n.children) walk(c);
  };
  walk(profile.head);
  return out;
}

try {
  for (const [i, build] of builds.entries()) {
    const file = join(dir, `${i}.json`);
    const sampler = fileURLToPath(new URL('allocation-sampler.ts', import.meta.url));
    const { child, line } = await startNode(
      join(build, 'src/cli.ts'),
      [],
      { ...infermeterEnv(up.url), ALLOCATION_PROFILE: file },
      /"infermeter started"/,
      'stderr',
      [...INFERMETER_FLAGS.split(' '), '--import', sampler],
    );
    try {
      const url = (JSON.parse(line) as { data: string }).data;
      const agent = new http.Agent({ keepAlive: true });
      await runLoad(url, { ...shape, requests: 1000 }, agent); // warm: its paths compiled
      child.kill('SIGUSR2');
      await new Promise((resolve) => setTimeout(resolve, 200));
      const r = await runLoad(url, shape, agent);
      child.kill('SIGUSR2');
      agent.destroy();
      for (let waited = 0; !existsSync(file) && waited < 10_000; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
      await new Promise((resolve) => setTimeout(resolve, 300)); // its write done
      const bySite = sites(JSON.parse(readFileSync(file, 'utf8')) as AllocationProfile);
      const total = [...bySite.values()].reduce((a, b) => a + b, 0);
      process.stdout.write(
        `\n### ${build === here ? 'this build' : build}: ${(total / 1024).toFixed(1)} KiB allocated per request (${requests} requests, ${r.errors} errors)\n\n| bytes per request | site |\n|---|---|\n`,
      );
      for (const [name, b] of [...bySite].sort((x, y) => y[1] - x[1]).slice(0, top)) process.stdout.write(`| ${b.toFixed(0)} | \`${name}\` |\n`);
    } finally {
      child.kill('SIGTERM');
    }
  }
} finally {
  up.child.kill();
  rmSync(dir, { recursive: true, force: true });
}
