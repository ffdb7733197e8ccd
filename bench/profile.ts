// npm run bench:profile: infermeter under the throughput scenario with --cpu-prof, and where its
// CPU time goes, inclusive, by function (Node's internals and infermeter's own modules).
// `--scenario=latency`: the latency scenario's shape instead (one event per read), `--scenario=wave`
// bench:fidelity's wave pattern, `--scenario=roundtrip` one-token requests one at a time; `--top=N`
// rows; `--self`: each function's own time per event instead (every function, Node's natives too;
// `--by-module`: that time summed by module, infermeter's by folder of src/);
// `--target=passthrough`: the bench's Node floor instead (the pass-through writing the head at once),
// `--target=undici`: the same on undici, to compare. Without
// include_usage, as most clients send: infermeter's default path (`--include-usage`: clients
// that ask for it, the relayed path).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad, type Scenario } from './load.ts';
import { INFERMETER_FLAGS, infermeterEnv, startNode, startUpstream } from './targets.ts';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));

const SHAPES: Record<string, Scenario> = {
  throughput: { name: 'throughput', requests: 1500, concurrency: 16, tokens: 512, ttftMs: 0, gapMs: 0 },
  latency: { name: 'latency', requests: 640, concurrency: 32, tokens: 128, ttftMs: 50, gapMs: 10 },
  // bench:fidelity's wave scenario: 32 streams ending together, the next 32 arriving at once.
  wave: { name: 'wave', requests: 320, concurrency: 32, tokens: 256, ttftMs: 200, gapMs: 5 },
  // The bench's round trip: a request's own cost, one token each, kept-alive.
  roundtrip: { name: 'round trip', requests: 6000, concurrency: 1, tokens: 1, ttftMs: 0, gapMs: 0 },
};

/** Profiles infermeter under the throughput scenario (or another); returns a markdown summary. */
export async function profileThroughput(
  shape = 'throughput',
  top = 20,
  target = 'infermeter',
  self = false,
  includeUsage = false,
  byModule = false,
): Promise<string> {
  const shaped = SHAPES[shape];
  // `--include-usage`: clients that ask for usage themselves (the relayed path, no strip).
  const scenario = shaped === undefined ? undefined : { ...shaped, includeUsage };
  if (scenario === undefined) throw new Error(`--scenario=${shape}: expected one of ${Object.keys(SHAPES).join(', ')}`);
  const dir = mkdtempSync(join(tmpdir(), 'infermeter-profile-'));
  const up = await startUpstream();
  // `--target=passthrough` (or undici): the bench's Node floor under the same load, for comparison.
  const passthrough = target === 'passthrough' || target === 'undici';
  if (!passthrough && target !== 'infermeter') throw new Error(`--target=${target}: expected infermeter, passthrough or undici`);
  const profFlags = ['--cpu-prof', `--cpu-prof-dir=${dir}`];
  const { child: inf, line } = passthrough
    ? target === 'undici'
      ? await startNode(here('undici-passthrough.ts'), [up.url], {}, /"port"/, 'stdout', profFlags)
      : await startNode(here('passthrough.ts'), [up.url, '--head-at-once'], {}, /"port"/, 'stdout', profFlags)
    : await startNode(here('../src/cli.ts'), [], infermeterEnv(up.url), /"infermeter started"/, 'stderr', [...INFERMETER_FLAGS.split(' '), ...profFlags]);
  const url = passthrough ? `http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}` : (JSON.parse(line) as { data: string }).data;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const r = await runLoad(url, scenario, agent);
  agent.destroy();
  inf.kill('SIGTERM');
  await new Promise((resolve) => inf.once('exit', resolve));
  up.child.kill();

  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))!;
  const prof = JSON.parse(readFileSync(join(dir, file), 'utf8')) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
  rmSync(dir, { recursive: true, force: true });
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  if (self) return selfTimes(prof, byId, r.events, top, passthrough, byModule);
  const parent = new Map<number, number>();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const inclusive = new Map<string, number>();
  let total = 0;
  prof.samples.forEach((id, i) => {
    const t = prof.timeDeltas[i] ?? 0;
    total += t;
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const cf = byId.get(cur)!.callFrame;
      const name = `${cf.functionName || '(anonymous)'} ${cf.url.replace(/.*\//, '')}:${cf.lineNumber + 1}`;
      if (seen.has(name)) continue;
      seen.add(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + t);
    }
  });
  const busy =
    total - [...prof.samples.keys()].reduce((a, i) => (byId.get(prof.samples[i]!)!.callFrame.functionName === '(idle)' ? a + (prof.timeDeltas[i] ?? 0) : a), 0);
  let out = `${r.events} events in ${r.wallSeconds.toFixed(2)} s, ${(busy / r.events).toFixed(2)} µs of sampled busy time per event; share of ${passthrough ? 'the pass-through' : 'infermeter'}'s busy samples (idle excluded), inclusive (a function's own time and its callees'):\n\n| share | function |\n|---|---|\n`;
  const wanted =
    /\.ts:|socketOnData|_writev|garbage collector|\(program\)|ondata|pipeOnDrain|write_|processTicksAndRejections|writeGeneric|writevGeneric|resOnFinish|parserOnIncoming/;
  for (const [name, t] of [...inclusive]
    .filter(([n]) => wanted.test(n))
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)) {
    out += `| ${((100 * t) / busy).toFixed(1)} % | \`${name}\` |\n`;
  }
  return out;
}

/** `--self`: each function's own time (its callees' excluded), in µs per event, every function. */
function selfTimes(
  prof: { samples: number[]; timeDeltas: number[] },
  byId: Map<number, ProfileNode>,
  events: number,
  top: number,
  passthrough: boolean,
  byModule: boolean,
): string {
  const own = new Map<string, number>();
  let busy = 0;
  prof.samples.forEach((id, i) => {
    const cf = byId.get(id)!.callFrame;
    if (cf.functionName === '(idle)') return;
    const t = prof.timeDeltas[i] ?? 0;
    busy += t;
    const name = byModule ? moduleOf(cf) : `${cf.functionName || '(anonymous)'} ${cf.url.replace(/.*\//, '')}:${cf.lineNumber + 1}`;
    own.set(name, (own.get(name) ?? 0) + t);
  });
  const by = byModule ? 'module' : 'function';
  let out = `${events} events, ${(busy / events).toFixed(2)} µs of sampled busy time per event; ${passthrough ? 'the pass-through' : 'infermeter'}'s self time by ${by} (idle excluded):\n\n| µs per event | share | ${by} |\n|---|---|---|\n`;
  for (const [name, t] of [...own].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    out += `| ${(t / events).toFixed(2)} | ${((100 * t) / busy).toFixed(1)} % | \`${name}\` |\n`;
  }
  return out;
}

/**
 * `--by-module`: infermeter's code by folder of src/ (the bench's own files by name), Node's by
 * its module, native code by function.
 */
function moduleOf(cf: ProfileNode['callFrame']): string {
  if (cf.url === '') return `${cf.functionName || '(anonymous)'} (native)`;
  const src = /\/src\/(.*)\/[^/]*$/.exec(cf.url);
  if (src !== null) return `src/${src[1]}/`;
  if (/\/src\/[^/]*$/.test(cf.url)) return 'src/';
  if (cf.url.startsWith('wasm:')) return 'wasm (type stripping, at start)';
  return cf.url.startsWith('node:') ? cf.url : cf.url.replace(/.*\//, '');
}

if (import.meta.main) {
  const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  process.stdout.write(
    await profileThroughput(
      arg('scenario'),
      Number(arg('top') ?? 20),
      arg('target'),
      process.argv.includes('--self') || process.argv.includes('--by-module'),
      process.argv.includes('--include-usage'),
      process.argv.includes('--by-module'),
    ),
  );
}
