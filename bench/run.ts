// npm run bench: infermeter side by side with no proxy, the Node floor (a node:http pass-through
// that writes the response head when the upstream's arrives, in two processes), the same
// pass-through on undici, and nginx, in one run, interleaved (the order rotates every repetition), medians over repetitions, because
// these machines are noisy. `--quick` for a shorter run; `--write` puts the table in
// docs/performance.md; BENCH_COMPARE=<another checkout> adds that build as one more target
// (BENCH_COMPARE_FLAGS: its node flags; several, comma-separated, each one more target, and with
// `--memory-only` in the memory section too), to measure a change before and after in one run;
// BENCH_WORKERS=N adds infermeter with N worker processes; `--scenario=<name>` runs that scenario
// alone (with `--no-memory`, a short run); `--scenario=wave` the wave pattern alone (bench/wave.ts:
// 32 streams ending together, the next 32 arriving at once; its blind spot needs tcpdump).
// Loopback only; every loop is bounded in count.
import http from 'node:http';
import { execSync } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { readFileSync, writeFileSync } from 'node:fs';
import { CONTROL, FLOOR, HOLDING, startFleet, type Target, UNDICI } from './targets.ts';
import { median, percentile, runLoad, type Scenario } from './load.ts';
import { cpuSeconds, rssBytes, trimmedRssBytes } from './proc.ts';
import { renderWithFlags } from './render.ts';
import { profileThroughput } from './profile.ts';
import { counted, failureCounters } from './counters.ts';
import { capture, stopCapture, tcpdumpAvailable, wave, WAVE } from './wave.ts';

const quick = process.argv.includes('--quick');
const write = process.argv.includes('--write');
const skipMemory = process.argv.includes('--no-memory');
const memoryOnly = process.argv.includes('--memory-only');
const only = process.argv.find((a) => a.startsWith('--scenario='))?.slice('--scenario='.length);

// The goals are read from the scenarios named 'latency', 'throughput' and 'round trip': clients
// that do not ask for usage, as most do, so that infermeter's defaults inject it and strip the
// usage chunk on the way back (the path users run). The `include_usage` scenarios are the relay
// path; the fresh-connection round trip is a client that opens a connection per request.
const SCENARIOS: ReadonlyArray<Scenario & { reps: number }> = [
  // Repetitions: the medians of these paired runs are what the goals are read from; the
  // machine's noise between runs is tens of percent, so the short scenarios get many.
  { name: 'latency', requests: quick ? 64 : 192, concurrency: 32, tokens: 128, ttftMs: 50, gapMs: 10, reps: quick ? 2 : 15 },
  { name: 'latency, include_usage', includeUsage: true, requests: quick ? 64 : 192, concurrency: 32, tokens: 128, ttftMs: 50, gapMs: 10, reps: quick ? 2 : 7 },
  // 512 requests (about half a second each): with 128, one repetition was too short to outlast
  // a process's cold spells, and processes of one build spread from 0.84 to 1.24x the floor's
  // CPU per event; with 512, 0.95 to 1.03x (scratch runs: eight targets interleaved, 9
  // repetitions).
  { name: 'throughput', requests: quick ? 64 : 512, concurrency: 16, tokens: 512, ttftMs: 0, gapMs: 0, reps: quick ? 2 : 11 },
  { name: 'throughput, include_usage', includeUsage: true, requests: quick ? 64 : 512, concurrency: 16, tokens: 512, ttftMs: 0, gapMs: 0, reps: quick ? 2 : 7 },
  { name: 'round trip', requests: quick ? 300 : 1500, concurrency: 1, tokens: 1, ttftMs: 0, gapMs: 0, reps: quick ? 2 : 15 },
  {
    name: 'round trip, fresh connections',
    freshConnections: true,
    requests: quick ? 200 : 800,
    concurrency: 1,
    tokens: 1,
    ttftMs: 0,
    gapMs: 0,
    reps: quick ? 2 : 9,
  },
];

interface Rep {
  ttftP50: number;
  ttftP99: number;
  e2eP50: number;
  eventsPerSecond: number;
  cpuUsPerEvent: number;
  errors: number;
  failures: ReadonlyMap<string, number>;
}

const f = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

function meanRep(a: Rep, b: Rep): Rep {
  return {
    ttftP50: (a.ttftP50 + b.ttftP50) / 2,
    ttftP99: (a.ttftP99 + b.ttftP99) / 2,
    e2eP50: (a.e2eP50 + b.e2eP50) / 2,
    eventsPerSecond: (a.eventsPerSecond + b.eventsPerSecond) / 2,
    cpuUsPerEvent: (a.cpuUsPerEvent + b.cpuUsPerEvent) / 2,
    errors: a.errors + b.errors,
    failures: new Map(),
  };
}

async function measure(target: Target, scenario: Scenario, agent: http.Agent): Promise<Rep> {
  const pids = target.pids();
  const cpu0 = pids.length === 0 ? 0 : cpuSeconds(pids);
  const r = await runLoad(target.url, scenario, agent);
  const cpu = pids.length === 0 ? Number.NaN : cpuSeconds(pids) - cpu0;
  return {
    ttftP50: percentile(r.ttftMs, 50),
    ttftP99: percentile(r.ttftMs, 99),
    e2eP50: percentile(r.e2eMs, 50),
    eventsPerSecond: r.events / r.wallSeconds,
    cpuUsPerEvent: (cpu * 1e6) / r.events,
    errors: r.errors,
    failures: r.failures,
  };
}

async function main(): Promise<void> {
  if (only !== undefined && only !== 'wave' && !SCENARIOS.some((s) => s.name === only))
    throw new Error(`--scenario=${only}: expected one of ${SCENARIOS.map((s) => s.name).join(', ')}, wave`);
  if (only !== undefined && write) throw new Error('--write takes a full run: docs/performance.md holds every scenario');
  const fleet = await startFleet({ nginx: true });
  // Every target of the wave pattern; the other scenarios leave out its references (waveOnly).
  const everyTarget = [fleet.upstream, ...fleet.targets];
  const all = everyTarget.filter((t) => t.waveOnly !== true);
  const agents = new Map(everyTarget.map((t) => [t.name, new http.Agent({ keepAlive: true, maxSockets: 64 })]));
  const out: string[] = [];
  const say = (line = '') => {
    out.push(line);
    process.stdout.write(`${line}\n`);
  };
  const goals: Array<[string, boolean, string]> = [];
  try {
    // Warm every path up (JIT, sockets) before anything is measured.
    for (const t of everyTarget) await runLoad(t.url, { name: 'warm', requests: 200, concurrency: 16, tokens: 32, ttftMs: 0, gapMs: 0 }, agents.get(t.name)!);

    const results = new Map<string, Map<string, Rep[]>>();
    // What infermeter counted as failures during each scenario's measured repetitions.
    const proxyCounted = new Map<string, Map<string, string[]>>();
    const counting = fleet.targets.filter((t) => t.metricsUrl !== undefined);
    const scenarios = memoryOnly ? [] : SCENARIOS.filter((s) => only === undefined || s.name === only);
    for (const scenario of scenarios) {
      const byTarget = new Map<string, Rep[]>(all.map((t) => [t.name, []]));
      // One unmeasured repetition first: a scenario's own paths (a lone chunk per turn, many per
      // read) are not warm after the others', and CPU per event falls by a third over the first
      // repetitions of the throughput scenario (measured: 2.7 to 1.5 µs).
      for (const t of all) await runLoad(t.url, scenario, agents.get(t.name)!);
      const before = await Promise.all(counting.map((t) => failureCounters(t.metricsUrl!)));
      for (let rep = 0; rep < scenario.reps; rep++) {
        const order = all.map((_, i) => all[(i + rep) % all.length]!);
        for (const t of order) byTarget.get(t.name)!.push(await measure(t, scenario, agents.get(t.name)!));
      }
      results.set(scenario.name, byTarget);
      const after = await Promise.all(counting.map((t) => failureCounters(t.metricsUrl!)));
      proxyCounted.set(scenario.name, new Map(counting.map((t, i) => [t.name, counted(before[i]!, after[i]!)])));
    }

    say(`## Results (${new Date().toISOString().slice(0, 10)})`);
    say();
    for (const scenario of scenarios) {
      const byTarget = results.get(scenario.name)!;
      const direct = byTarget.get('direct')!;
      // The Node floor: per repetition, the mean of two processes running the same head-at-once
      // pass-through, so that one process's luck (its cores, its JIT) does not set the bar; how
      // far apart the two are is the run's resolution.
      const pass = byTarget.get(FLOOR)!;
      const control = byTarget.get(CONTROL)!;
      const node = pass.map((r, i) => meanRep(r, control[i]!));
      const nginx = byTarget.get('nginx');
      const added = (reps: Rep[], pick: (r: Rep) => number) => median(reps.map((r, i) => pick(r) - pick(direct[i]!)));
      const m = (reps: Rep[], pick: (r: Rep) => number) => median(reps.map(pick));
      say(
        `### ${scenario.name}: ${scenario.requests} requests, concurrency ${scenario.concurrency}, ${scenario.tokens} tokens, TTFT ${scenario.ttftMs} ms, ${scenario.gapMs} ms between tokens; median of ${scenario.reps} interleaved repetitions`,
      );
      say();
      say(
        '| target | TTFT p50 ms | TTFT p99 ms | added TTFT p50 ms | added TTFT p99 ms | e2e p50 ms | added e2e p50 ms | events/s | × direct | CPU µs/event | × floor | × nginx | errors |',
      );
      say('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
      for (const t of all) {
        const reps = byTarget.get(t.name)!;
        const cpu = m(reps, (r) => r.cpuUsPerEvent);
        const nodeCpu = m(node, (r) => r.cpuUsPerEvent);
        const nginxCpu = nginx === undefined ? Number.NaN : m(nginx, (r) => r.cpuUsPerEvent);
        say(
          `| ${t.name} | ${f(m(reps, (r) => r.ttftP50))} | ${f(m(reps, (r) => r.ttftP99))} | ${
            t === fleet.upstream
              ? '-'
              : f(
                  added(reps, (r) => r.ttftP50),
                  3,
                )
          } | ${
            t === fleet.upstream
              ? '-'
              : f(
                  added(reps, (r) => r.ttftP99),
                  3,
                )
          } | ${f(m(reps, (r) => r.e2eP50))} | ${
            t === fleet.upstream
              ? '-'
              : f(
                  added(reps, (r) => r.e2eP50),
                  3,
                )
          } | ${f(
            m(reps, (r) => r.eventsPerSecond),
            0,
          )} | ${f(m(reps, (r) => r.eventsPerSecond) / m(direct, (r) => r.eventsPerSecond))} | ${f(cpu)} | ${t.pids().length === 0 ? '-' : f(cpu / nodeCpu)} | ${t.pids().length === 0 || nginx === undefined ? '-' : f(cpu / nginxCpu)} | ${reps.reduce((a, r) => a + r.errors, 0)} |`,
        );
      }
      say();
      // Every failure, classified: the client's view (load.ts) and what infermeter counted.
      const failed: string[] = [];
      for (const t of all) {
        const kinds = new Map<string, number>();
        for (const r of byTarget.get(t.name)!) for (const [kind, n] of r.failures) kinds.set(kind, (kinds.get(kind) ?? 0) + n);
        if (kinds.size > 0) failed.push(`${t.name}: ${[...kinds].map(([kind, n]) => `${n} × ${kind}`).join('; ')}`);
      }
      for (const [name, rose] of proxyCounted.get(scenario.name)!)
        if (rose.length > 0) failed.push(`${name} counted: ${rose.map((r) => `\`${r}\``).join(', ')}`);
      say(failed.length === 0 ? 'Errors: none at the client, none counted by infermeter.' : `Errors: ${failed.join('. ')}.`);
      say();
      const apart = (pick: (r: Rep) => number) => Math.abs(added(pass, pick) - added(control, pick));
      say(
        `Node floor (× floor): the mean of the head-at-once pass-through and its control, a second process of the same code. The two differ by ${f(
          apart((r) => r.ttftP50),
          3,
        )} ms in added TTFT p50, ${f(
          apart((r) => r.e2eP50),
          3,
        )} ms in added e2e p50 and ${f(Math.abs(m(pass, (r) => r.cpuUsPerEvent) / m(control, (r) => r.cpuUsPerEvent) - 1) * 100, 1)} % in CPU per event: what this run can resolve.`,
      );
      say();
      const inf = byTarget.get('infermeter')!;
      const undici = byTarget.get(UNDICI);
      const nodeCpu = m(node, (r) => r.cpuUsPerEvent);
      const cpu = m(inf, (r) => r.cpuUsPerEvent);
      const cpuApart = `the two floor processes: ${f(Math.abs(m(pass, (r) => r.cpuUsPerEvent) / m(control, (r) => r.cpuUsPerEvent) - 1) * 100, 1)} % apart`;
      const undiciCpu = undici === undefined ? '' : `; undici pass-through ${f(m(undici, (r) => r.cpuUsPerEvent) / nodeCpu)}x`;
      // The issue's "Done when", each read against the head-at-once floor of the same run.
      if (['latency', 'latency, include_usage', 'throughput', 'throughput, include_usage'].includes(scenario.name))
        goals.push([
          `${scenario.name}: CPU per event (chunk) at or below the floor's`,
          cpu <= nodeCpu,
          `${f(cpu)} µs vs ${f(nodeCpu)} µs: ${f(cpu / nodeCpu)}x (${cpuApart}${undiciCpu})`,
        ]);
      if (scenario.name === 'latency') {
        const a = added(inf, (r) => r.ttftP50);
        const b = added(node, (r) => r.ttftP50);
        goals.push([
          `latency (32 streams): added TTFT p50 within 0.1 ms of the floor's`,
          a - b <= 0.1,
          `${f(a, 3)} ms vs ${f(b, 3)} ms: ${f(a - b, 3)} ms apart (the two floor processes: ${f(
            apart((r) => r.ttftP50),
            3,
          )} ms${
            undici === undefined
              ? ''
              : `; undici pass-through ${f(
                  added(undici, (r) => r.ttftP50),
                  3,
                )} ms`
          })`,
        ]);
        const p99 = added(inf, (r) => r.ttftP99);
        goals.push([
          `latency: added TTFT p99 at most 1.5 ms`,
          p99 <= 1.5,
          `${f(p99, 3)} ms (the floor: ${f(
            added(node, (r) => r.ttftP99),
            3,
          )} ms)`,
        ]);
      }
      if (scenario.name === 'round trip') {
        const a = added(inf, (r) => r.e2eP50);
        const b = added(node, (r) => r.e2eP50);
        goals.push([
          `round trip, kept alive: added time at most 1.1x the floor's`,
          a <= 1.1 * b,
          `${f(a, 3)} ms vs ${f(b, 3)} ms: ${f(a / b)}x (the two floor processes: ${f(
            apart((r) => r.e2eP50),
            3,
          )} ms apart${undici === undefined ? '' : `; undici pass-through ${f(added(undici, (r) => r.e2eP50) / b)}x`})`,
        ]);
      }
      if (scenario.name === 'throughput') {
        const ratio = m(inf, (r) => r.eventsPerSecond) / m(direct, (r) => r.eventsPerSecond);
        goals.push([
          `throughput: at least 0.85x direct's events/s`,
          ratio >= 0.85,
          `${f(ratio)}x (the floor ${f(m(node, (r) => r.eventsPerSecond) / m(direct, (r) => r.eventsPerSecond))}x)`,
        ]);
        if (nginx !== undefined) {
          const nginxCpu = m(nginx, (r) => r.cpuUsPerEvent);
          goals.push([`throughput: CPU per event at most 1.25x nginx's`, cpu <= 1.25 * nginxCpu, `${f(cpu)} µs vs ${f(nginxCpu)} µs (${f(cpu / nginxCpu)}x)`]);
        }
        const log = m(byTarget.get('infermeter + access log')!, (r) => r.cpuUsPerEvent);
        goals.push([`throughput: the access log adds no measurable CPU per event (within 5 %)`, log <= cpu * 1.05, `${f(log)} µs vs ${f(cpu)} µs`]);
      }
    }

    if (!memoryOnly && (only === undefined || only === 'wave')) await waveScenario(everyTarget, fleet.tmp, say, goals);

    if (!skipMemory) {
      // Memory must stay flat: after a warm-up that brings the process to its steady state under
      // this load, the same 100 000 requests and concurrent long streams again must not raise
      // the resident set. The warm-up is the measured sequence itself, repeated until a round
      // raises the resident set by less than 2 MB: glibc keeps the pages of the highest
      // footprint a round reached (its peak of buffers for 1000 streams varies with scheduling
      // by tens of MB), so one round is not always the plateau; a leak never settles, and shows
      // as a warm-up that stops at its bound without. The Node floor runs the same, for scale.
      const mb = (b: number) => b / (1024 * 1024);
      const streams = quick ? 200 : 1000;
      const many = quick ? 20_000 : 100_000;
      const settledMb = 2;
      const maxRounds = 5;
      const oneToken: Scenario = { name: 'memory', requests: 10_000, concurrency: 32, tokens: 1, ttftMs: 0, gapMs: 0 };
      const long = (tokens: number): Scenario => ({ name: 'long', requests: streams, concurrency: streams, tokens, ttftMs: 0, gapMs: 0 });
      say(`### memory`);
      say();
      say(
        `Warm-up: ${many.toLocaleString('en')} one-token requests (concurrency 32), then ${streams} concurrent 4k-token streams, repeated until a round raises the resident set by less than ${settledMb} MB (at most ${maxRounds} rounds; the RSS after each round is listed). Then the same again, measured. RSS from /proc, MB. The last column: the resident set once glibc has handed back the free pages it kept (malloc_trim(0), called in the process through gdb, after everything else): memory the process had freed, not memory it holds.`,
      );
      say();
      say(
        '| target | warm-up rounds (RSS after each) | after warm-up | after the requests | 30 % into the long streams | 90 % into them | after them | growth after warm-up | after them, free pages returned |',
      );
      say('|---|---|---|---|---|---|---|---|---|');
      // With --memory-only, the builds compared (BENCH_COMPARE) too: memory before and after a
      // change in one run (a full run keeps its length: a build takes minutes here).
      const compared = memoryOnly ? fleet.targets.filter((x) => x.name.startsWith('infermeter @ ')).map((x) => x.name) : [];
      for (const name of ['infermeter', ...compared, FLOOR]) {
        const t = fleet.targets.find((x) => x.name === name)!;
        const agent = new http.Agent({ keepAlive: true, maxSockets: streams + 32 });
        const warmRss: number[] = [];
        do {
          for (let done = 0; done < many; done += 10_000) await runLoad(t.url, oneToken, agent);
          await runLoad(t.url, long(4096), agent);
          warmRss.push(rssBytes(t.pids()));
        } while (warmRss.length < maxRounds && (warmRss.length < 2 || mb(warmRss.at(-1)! - warmRss.at(-2)!) >= settledMb));
        const settled = warmRss.length >= 2 && mb(warmRss.at(-1)! - warmRss.at(-2)!) < settledMb;
        const steady = warmRss.at(-1)!;
        for (let done = 0; done < many; done += 10_000) await runLoad(t.url, oneToken, agent);
        const afterMany = rssBytes(t.pids());
        const samples: number[] = [];
        const sampler = setInterval(() => samples.push(rssBytes(t.pids())), 250);
        await runLoad(t.url, long(4096), agent);
        clearInterval(sampler);
        const afterLong = rssBytes(t.pids());
        const early = samples[Math.floor(samples.length * 0.3)] ?? afterLong;
        const late = samples[Math.floor(samples.length * 0.9)] ?? afterLong;
        const growth = Math.max(afterMany, afterLong) - steady;
        // Last, since it changes the resident set it reads.
        const trimmed = t.pids().length === 1 ? trimmedRssBytes(t.pids()[0]!) : undefined;
        say(
          `| ${name} | ${warmRss.length}${settled ? '' : ', not settled'} (${warmRss.map((b) => f(mb(b), 1)).join(', ')}) | ${f(mb(steady), 1)} | ${f(mb(afterMany), 1)} | ${f(mb(early), 1)} | ${f(mb(late), 1)} | ${f(mb(afterLong), 1)} | ${f(mb(growth), 1)} | ${trimmed === undefined ? 'n/a (gdb missing or not allowed to attach)' : f(mb(trimmed), 1)} |`,
        );
        if (name === 'infermeter') {
          goals.push([
            `memory: the warm-up settles (a round raises RSS by less than ${settledMb} MB within ${maxRounds} rounds; a leak would not)`,
            settled,
            `${warmRss.length} rounds`,
          ]);
          goals.push([
            `memory: RSS after ${many.toLocaleString('en')} requests within 10 MB of the steady state after warm-up`,
            mb(afterMany - steady) <= 10,
            `${f(mb(afterMany - steady), 1)} MB`,
          ]);
          goals.push([
            `memory: RSS after ${streams} concurrent 4k-token streams within 10 MB of the steady state`,
            mb(afterLong - steady) <= 10,
            `${f(mb(afterLong - steady), 1)} MB`,
          ]);
          goals.push([`memory: no growth with stream length (90 % vs 30 % into 4k-token streams)`, mb(late - early) <= 10, `${f(mb(late - early), 1)} MB`]);
        }
        agent.destroy();
      }
      say();
    }

    // In a child with infermeter's node flags, as infermeter runs it (not in this process).
    const render = renderWithFlags();
    say(`### /metrics render`);
    say();
    say(
      `100 models, MindIE and AOM dialects, every family, with infermeter's node flags: ${f(render.ms, 2)} ms per render (median of 25), ${Math.round(render.bytes / 1024)} KiB.`,
    );
    say();
    goals.push(['/metrics render with 100 models under 5 ms', render.ms < 5, `${f(render.ms)} ms`]);

    say('### Goals');
    say();
    say('| goal | met | measured |');
    say('|---|---|---|');
    for (const [goal, met, measured] of goals) say(`| ${goal} | ${met ? 'PASS' : '**MISS**'} | ${measured} |`);
    say();

    if (write && !memoryOnly) {
      say('### Where the CPU goes (throughput scenario, `npm run bench:profile`)');
      say();
      say(await profileThroughput('throughput', 10));
    }

    if (write) {
      const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.versions.node}, ${execSync('nginx -v 2>&1').toString().trim()}`;
      // Only the run's own part is replaced, from the machine line to the first section after the
      // results: the prose around it lives in the doc alone.
      const file = new URL('../docs/performance.md', import.meta.url);
      const doc = readFileSync(file, 'utf8');
      const start = doc.indexOf('\nMachine: ');
      const end = doc.indexOf('\n## Reading the goals');
      if (start === -1 || end === -1 || end < start)
        throw new Error('docs/performance.md: no "Machine:" line before a "## Reading the goals" section to put the run between');
      writeFileSync(file, `${doc.slice(0, start + 1)}Machine: ${machine}${quick ? ' (quick run)' : ''}.\n\n${out.join('\n')}\n${doc.slice(end)}`);
    }
  } finally {
    for (const a of agents.values()) a.destroy();
    await fleet.stop();
  }
}

/**
 * The wave pattern (bench/wave.ts: vLLM's benchmark client at a fixed concurrency, 32 streams
 * ending together and the next 32 arriving at once), clients without include_usage, every target
 * interleaved: the client's TTFT over direct's at the waves after the first, and the arrival
 * blind spot (tcpdump) of the infermeter that writes an access log.
 */
async function waveScenario(all: readonly Target[], tmp: string, say: (line?: string) => void, goals: Array<[string, boolean, string]>): Promise<void> {
  const reps = quick ? 1 : 3;
  const waves = quick ? 3 : 6;
  // Whether this process may capture on loopback (root or CAP_NET_RAW): a short trial.
  let canCapture = tcpdumpAvailable();
  if (canCapture) {
    try {
      await stopCapture(await capture(`${tmp}/trial.pcap`, [9]));
    } catch {
      canCapture = false;
    }
  }
  const ttft = new Map<string, number[]>(all.map((t) => [t.name, []]));
  const blind = new Map<string, number[]>(all.map((t) => [t.name, []]));
  let failed = 0;
  for (let rep = 0; rep < reps; rep++) {
    const order = all.map((_, i) => all[(i + rep) % all.length]!);
    for (const t of order) {
      const r = await wave(t.url, t.name, waves, tmp, { includeUsage: false, ...(canCapture && t.log !== undefined ? { log: t.log } : {}) });
      ttft.get(t.name)!.push(...r.ttftMs);
      blind.get(t.name)!.push(...r.blindMs);
      failed += r.failed;
    }
  }
  const p = (name: string, q: number) => percentile(ttft.get(name)!, q);
  const d50 = p('direct', 50);
  const d99 = p('direct', 99);
  const node50 = (p(FLOOR, 50) + p(CONTROL, 50)) / 2 - d50;
  const node99 = (p(FLOOR, 99) + p(CONTROL, 99)) / 2 - d99;
  say(
    `### wave: ${WAVE.concurrency} lanes × ${waves} waves, ${WAVE.shape.tokens} tokens, TTFT ${WAVE.shape.ttftMs} ms, ${WAVE.shape.gapMs} ms between tokens, no include_usage; ${reps} interleaved repetitions, waves 2 on pooled`,
  );
  say();
  say(
    `Each lane sends its next stream the moment its last ended, as vLLM's benchmark client does at a fixed concurrency: 32 streams end together and 32 requests arrive at once. TTFT is the client's; the blind spot is the request's first byte on the client-facing port (tcpdump) to the t0 infermeter logged (through its TTFB: the wire's head minus the request's first byte, minus the logged TTFB), for the target with an access log. \`${HOLDING}\` (this pattern only, information) is the bare pipe that holds the response head until the first body bytes, where the floor writes it when the upstream's arrives, as infermeter must.`,
  );
  say();
  say('| target | TTFT p50 ms | TTFT p99 ms | added TTFT p50 ms | added TTFT p99 ms | blind spot p50 ms | blind spot p99 ms |');
  say('|---|---|---|---|---|---|---|');
  for (const t of all) {
    const b = blind.get(t.name)!;
    const spot =
      b.length === 0
        ? t.log === undefined
          ? '- | -'
          : 'n/a (no capture: tcpdump missing or not allowed) | n/a'
        : `${f(percentile(b, 50), 3)} | ${f(percentile(b, 99), 3)}`;
    const isDirect = t.name === 'direct';
    say(
      `| ${t.name} | ${f(p(t.name, 50))} | ${f(p(t.name, 99))} | ${isDirect ? '-' : f(p(t.name, 50) - d50, 3)} | ${isDirect ? '-' : f(p(t.name, 99) - d99, 3)} | ${spot} |`,
    );
  }
  say();
  say(failed === 0 ? 'Errors: none at the client.' : `Errors: ${failed} requests failed at the client.`);
  say();
  const inf50 = p('infermeter', 50) - d50;
  const inf99 = p('infermeter', 99) - d99;
  const apart = (q: number) => Math.abs(p(FLOOR, q) - p(CONTROL, q));
  const others = (q: number, direct: number) =>
    [UNDICI, HOLDING]
      .filter((name) => ttft.has(name))
      .map((name) => `; ${name}: ${f(p(name, q) - direct, 3)} ms`)
      .join('');
  goals.push([
    `wave: added TTFT p50 within 1 ms of the floor's`,
    inf50 - node50 <= 1,
    `${f(inf50, 3)} ms vs ${f(node50, 3)} ms (the two floor processes: ${f(apart(50), 3)} ms apart${others(50, d50)})`,
  ]);
  goals.push([
    `wave: added TTFT p99 at most the floor's + 1 ms`,
    inf99 <= node99 + 1,
    `${f(inf99, 3)} ms vs ${f(node99, 3)} ms (the two floor processes: ${f(apart(99), 3)} ms apart${others(99, d99)})`,
  ]);
  const spots = blind.get('infermeter + access log') ?? [];
  if (spots.length > 0)
    goals.push([
      `wave: arrival blind spot p99 at most 5 ms (tcpdump)`,
      percentile(spots, 99) <= 5,
      `${f(percentile(spots, 99), 3)} ms (p50 ${f(percentile(spots, 50), 3)} ms)`,
    ]);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
