// npm run bench:gc: what V8's collector does under the throughput scenario, per set of node
// flags: infermeter with its flags (INFERMETER_FLAGS), infermeter with the young-generation cap
// alone, and the bare Node pass-through with the same cap. Each runs in turn behind the bench
// upstream, traced with --trace-gc-nvp; per repetition of 512 requests: scavenges, full
// collections, bytes the scavenges promoted to the old generation, main-thread pause and CPU
// per event. The figures behind `--initial-heap-size=64` (docs/performance.md).
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { runLoad, type Scenario } from './load.ts';
import { cpuSeconds } from './proc.ts';
import { INFERMETER_FLAGS, infermeterEnv, startNode, startUpstream } from './targets.ts';

const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));
const REPS = 8;
const THROUGHPUT: Scenario = { name: 'throughput', requests: 512, concurrency: 16, tokens: 512, ttftMs: 0, gapMs: 0 };

interface Tally {
  scavenges: number;
  full: number;
  promoted: number;
  pauseMs: number;
}

async function measure(label: string, script: string, flags: string, upstream: string): Promise<string> {
  const pass = script.endsWith('passthrough.ts');
  const traced = [...flags.split(' ').filter(Boolean), '--trace-gc-nvp'];
  // The pass-through prints its port on stdout, infermeter its start on stderr.
  const { child, line } = pass
    ? await startNode(here(script), [upstream], {}, /"port"/, 'stdout', traced)
    : await startNode(here(script), [], infermeterEnv(upstream), /"infermeter started"/, 'stderr', traced);
  const url = pass ? `http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}` : (JSON.parse(line) as { data: string }).data;
  // The trace, a line per collection on stdout; counted from the measured repetitions on.
  let tally: Tally = { scavenges: 0, full: 0, promoted: 0, pauseMs: 0 };
  let out = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    const lines = out.split('\n');
    out = lines.pop()!;
    for (const trace of lines) {
      const kind = /\bgc=(\w+)/.exec(trace)?.[1];
      if (kind === undefined) continue;
      if (kind === 's') tally.scavenges++;
      else if (kind === 'mc' || kind === 'ms') tally.full++;
      tally.promoted += Number(/\bpromoted=(\d+)/.exec(trace)?.[1] ?? 0);
      tally.pauseMs += Number(/\bpause=([\d.]+)/.exec(trace)?.[1] ?? 0);
    }
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  await runLoad(url, THROUGHPUT, agent); // warm
  tally = { scavenges: 0, full: 0, promoted: 0, pauseMs: 0 };
  const cpu0 = cpuSeconds([child.pid!]);
  let events = 0;
  for (let i = 0; i < REPS; i++) events += (await runLoad(url, THROUGHPUT, agent)).events;
  const cpu = cpuSeconds([child.pid!]) - cpu0;
  agent.destroy();
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  const per = (n: number, digits: number) => (n / REPS).toFixed(digits);
  return `| ${label} | \`${flags}\` | ${per(tally.scavenges, 1)} | ${per(tally.full, 2)} | ${per(tally.promoted / 1048576, 2)} | ${per(tally.pauseMs, 1)} | ${((cpu * 1e6) / events).toFixed(2)} |`;
}

const up = await startUpstream();
const upstream = up.url;
const cap = INFERMETER_FLAGS.split(' ')
  .filter((f) => f.startsWith('--max-semi-space-size'))
  .join(' ');
try {
  process.stdout.write(
    `Per repetition of ${THROUGHPUT.requests} requests × ${THROUGHPUT.tokens} tokens at concurrency ${THROUGHPUT.concurrency}, mean of ${REPS}, after one unmeasured:\n\n`,
  );
  process.stdout.write(
    '| process | node flags | scavenges | full collections | promoted MB | main-thread GC pause ms | CPU µs/event |\n|---|---|---|---|---|---|---|\n',
  );
  process.stdout.write(`${await measure('infermeter', '../src/cli.ts', INFERMETER_FLAGS, upstream)}\n`);
  process.stdout.write(`${await measure('infermeter', '../src/cli.ts', cap, upstream)}\n`);
  process.stdout.write(`${await measure('node pass-through', 'passthrough.ts', cap, upstream)}\n`);
} finally {
  up.child.kill();
}
