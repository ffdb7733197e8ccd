// npm run bench: infermeter side by side with no proxy, a bare Node pass-through and nginx, in
// one run, interleaved (the order rotates every repetition), medians over repetitions, because
// these machines are noisy. `--quick` for a shorter run; `--write` puts the table in
// docs/performance.md; BENCH_COMPARE=<another checkout> adds that build as one more target, to
// measure a change before and after in one run. Loopback only; every loop is bounded in count.
import http from 'node:http';
import { execSync } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { writeFileSync } from 'node:fs';
import { startFleet, type Target } from './targets.ts';
import { median, percentile, runLoad, type Scenario } from './load.ts';
import { cpuSeconds, rssBytes } from './proc.ts';
import { renderMillis } from './render.ts';
import { profileThroughput } from './profile.ts';

const quick = process.argv.includes('--quick');
const write = process.argv.includes('--write');
const skipMemory = process.argv.includes('--no-memory');
const memoryOnly = process.argv.includes('--memory-only');

const SCENARIOS: ReadonlyArray<Scenario & { reps: number }> = [
  // Repetitions: the medians of these paired runs are what the goals are read from; the
  // machine's noise between runs is tens of percent, so the short scenarios get many.
  { name: 'latency', requests: quick ? 64 : 192, concurrency: 32, tokens: 128, ttftMs: 50, gapMs: 10, reps: quick ? 2 : 9 },
  { name: 'throughput', requests: quick ? 32 : 128, concurrency: 16, tokens: 512, ttftMs: 0, gapMs: 0, reps: quick ? 2 : 11 },
  { name: 'round trip', requests: quick ? 300 : 1500, concurrency: 1, tokens: 1, ttftMs: 0, gapMs: 0, reps: quick ? 2 : 15 },
];

interface Rep {
  ttftP50: number;
  ttftP99: number;
  e2eP50: number;
  eventsPerSecond: number;
  cpuUsPerEvent: number;
  errors: number;
}

const f = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

/** The second process of the Node pass-through (targets.ts). */
const CONTROL = 'node pass-through (control)';

function meanRep(a: Rep, b: Rep): Rep {
  return {
    ttftP50: (a.ttftP50 + b.ttftP50) / 2,
    ttftP99: (a.ttftP99 + b.ttftP99) / 2,
    e2eP50: (a.e2eP50 + b.e2eP50) / 2,
    eventsPerSecond: (a.eventsPerSecond + b.eventsPerSecond) / 2,
    cpuUsPerEvent: (a.cpuUsPerEvent + b.cpuUsPerEvent) / 2,
    errors: a.errors + b.errors,
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
  };
}

async function main(): Promise<void> {
  const fleet = await startFleet({ nginx: true });
  const all = [fleet.upstream, ...fleet.targets];
  const agents = new Map(all.map((t) => [t.name, new http.Agent({ keepAlive: true, maxSockets: 64 })]));
  const out: string[] = [];
  const say = (line = '') => {
    out.push(line);
    process.stdout.write(`${line}\n`);
  };
  const goals: Array<[string, boolean, string]> = [];
  try {
    // Warm every path up (JIT, sockets) before anything is measured.
    for (const t of all) await runLoad(t.url, { name: 'warm', requests: 200, concurrency: 16, tokens: 32, ttftMs: 0, gapMs: 0 }, agents.get(t.name)!);

    const results = new Map<string, Map<string, Rep[]>>();
    const scenarios = memoryOnly ? [] : SCENARIOS;
    for (const scenario of scenarios) {
      const byTarget = new Map<string, Rep[]>(all.map((t) => [t.name, []]));
      for (let rep = 0; rep < scenario.reps; rep++) {
        const order = all.map((_, i) => all[(i + rep) % all.length]!);
        for (const t of order) byTarget.get(t.name)!.push(await measure(t, scenario, agents.get(t.name)!));
      }
      results.set(scenario.name, byTarget);
    }

    say(`## Results (${new Date().toISOString().slice(0, 10)})`);
    say();
    for (const scenario of scenarios) {
      const byTarget = results.get(scenario.name)!;
      const direct = byTarget.get('direct')!;
      // The Node floor: per repetition, the mean of two processes running the same pass-through,
      // so that one process's luck (its cores, its JIT) does not set the bar; how far apart the
      // two are is the run's resolution.
      const pass = byTarget.get('node pass-through')!;
      const control = byTarget.get(CONTROL)!;
      const node = pass.map((r, i) => meanRep(r, control[i]!));
      const nginx = byTarget.get('nginx');
      const added = (reps: Rep[], pick: (r: Rep) => number) => median(reps.map((r, i) => pick(r) - pick(direct[i]!)));
      const m = (reps: Rep[], pick: (r: Rep) => number) => median(reps.map(pick));
      say(`### ${scenario.name}: ${scenario.requests} requests, concurrency ${scenario.concurrency}, ${scenario.tokens} tokens, TTFT ${scenario.ttftMs} ms, ${scenario.gapMs} ms between tokens; median of ${scenario.reps} interleaved repetitions`);
      say();
      say('| target | TTFT p50 ms | TTFT p99 ms | added TTFT p50 ms | added TTFT p99 ms | e2e p50 ms | added e2e p50 ms | events/s | × direct | CPU µs/event | × node | × nginx | errors |');
      say('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
      for (const t of all) {
        const reps = byTarget.get(t.name)!;
        const cpu = m(reps, (r) => r.cpuUsPerEvent);
        const nodeCpu = m(node, (r) => r.cpuUsPerEvent);
        const nginxCpu = nginx === undefined ? Number.NaN : m(nginx, (r) => r.cpuUsPerEvent);
        say(
          `| ${t.name} | ${f(m(reps, (r) => r.ttftP50))} | ${f(m(reps, (r) => r.ttftP99))} | ${t === fleet.upstream ? '-' : f(added(reps, (r) => r.ttftP50), 3)} | ${t === fleet.upstream ? '-' : f(added(reps, (r) => r.ttftP99), 3)} | ${f(m(reps, (r) => r.e2eP50))} | ${t === fleet.upstream ? '-' : f(added(reps, (r) => r.e2eP50), 3)} | ${f(m(reps, (r) => r.eventsPerSecond), 0)} | ${f(m(reps, (r) => r.eventsPerSecond) / m(direct, (r) => r.eventsPerSecond))} | ${f(cpu)} | ${t.pids().length === 0 ? '-' : f(cpu / nodeCpu)} | ${t.pids().length === 0 || nginx === undefined ? '-' : f(cpu / nginxCpu)} | ${reps.reduce((a, r) => a + r.errors, 0)} |`,
        );
      }
      say();
      const apart = (pick: (r: Rep) => number) => Math.abs(added(pass, pick) - added(control, pick));
      say(
        `Node floor (× node): the mean of the pass-through and its control, a second process of the same code. The two differ by ${f(apart((r) => r.ttftP50), 3)} ms in added TTFT p50, ${f(apart((r) => r.e2eP50), 3)} ms in added e2e p50 and ${f(Math.abs(m(pass, (r) => r.cpuUsPerEvent) / m(control, (r) => r.cpuUsPerEvent) - 1) * 100, 1)} % in CPU per event: what this run can resolve.`,
      );
      say();
      const inf = byTarget.get('infermeter')!;
      if (scenario.name === 'latency') {
        const a = added(inf, (r) => r.ttftP50);
        const b = added(node, (r) => r.ttftP50);
        goals.push([`latency: added TTFT p50 within 0.1 ms of the Node pass-through's`, a - b <= 0.1, `${f(a, 3)} ms vs ${f(b, 3)} ms (${f(a - b, 3)} ms apart)`]);
        const p99 = added(inf, (r) => r.ttftP99);
        goals.push([`latency: added TTFT p99 at most 1.5 ms`, p99 <= 1.5, `${f(p99, 3)} ms`]);
      }
      if (scenario.name === 'round trip') {
        const a = added(inf, (r) => r.e2eP50);
        const b = added(node, (r) => r.e2eP50);
        goals.push([`round trip: added time within 1.2x the Node pass-through's`, a <= 1.2 * b, `${f(a, 3)} ms vs ${f(b, 3)} ms (${f(a / b)}x)`]);
      }
      if (scenario.name === 'throughput') {
        const ratio = m(inf, (r) => r.eventsPerSecond) / m(direct, (r) => r.eventsPerSecond);
        goals.push([`throughput: at least 0.85x direct's events/s`, ratio >= 0.85, `${f(ratio)}x`]);
        const cpu = m(inf, (r) => r.cpuUsPerEvent);
        const nodeCpu = m(node, (r) => r.cpuUsPerEvent);
        goals.push([`throughput: CPU per event no more than the Node pass-through's`, cpu <= nodeCpu, `${f(cpu)} µs vs ${f(nodeCpu)} µs (${f(cpu / nodeCpu)}x)`]);
        if (nginx !== undefined) {
          const nginxCpu = m(nginx, (r) => r.cpuUsPerEvent);
          goals.push([`throughput: CPU per event within 1.5x nginx's`, cpu <= 1.5 * nginxCpu, `${f(cpu)} µs vs ${f(nginxCpu)} µs (${f(cpu / nginxCpu)}x)`]);
        }
        const log = m(byTarget.get('infermeter + access log')!, (r) => r.cpuUsPerEvent);
        goals.push([`throughput: the access log adds no measurable CPU per event (within 5 %)`, log <= cpu * 1.05, `${f(log)} µs vs ${f(cpu)} µs`]);
      }
    }

    if (!skipMemory) {
      // Memory must stay flat: after a warm-up with the same kinds of load (so that V8's heap
      // and Node's pools have grown to what this load needs), 100 000 more requests and then
      // concurrent long streams must not raise the resident set. The Node floor runs the same
      // sequence, for scale.
      const mb = (b: number) => b / (1024 * 1024);
      const streams = quick ? 200 : 1000;
      const many = quick ? 20_000 : 100_000;
      const oneToken: Scenario = { name: 'memory', requests: 10_000, concurrency: 32, tokens: 1, ttftMs: 0, gapMs: 0 };
      const long = (tokens: number): Scenario => ({ name: 'long', requests: streams, concurrency: streams, tokens, ttftMs: 0, gapMs: 0 });
      say(`### memory`);
      say();
      say(`Warm-up: 10 000 one-token requests (concurrency 32), then ${streams} concurrent 4k-token streams. Then the same again, measured: ${many.toLocaleString('en')} one-token requests, then ${streams} concurrent 4k-token streams. RSS from /proc, MB.`);
      say();
      say('| target | after warm-up | after the requests | 30 % into the long streams | 90 % into them | after them | growth after warm-up |');
      say('|---|---|---|---|---|---|---|');
      for (const name of ['infermeter', 'node pass-through']) {
        const t = fleet.targets.find((x) => x.name === name)!;
        const agent = new http.Agent({ keepAlive: true, maxSockets: streams + 32 });
        await runLoad(t.url, oneToken, agent);
        await runLoad(t.url, long(4096), agent);
        const steady = rssBytes(t.pids());
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
        say(`| ${name} | ${f(mb(steady), 1)} | ${f(mb(afterMany), 1)} | ${f(mb(early), 1)} | ${f(mb(late), 1)} | ${f(mb(afterLong), 1)} | ${f(mb(growth), 1)} |`);
        if (name === 'infermeter') {
          goals.push([`memory: RSS after ${many.toLocaleString('en')} requests within 10 MB of the steady state after warm-up`, mb(afterMany - steady) <= 10, `${f(mb(afterMany - steady), 1)} MB`]);
          goals.push([`memory: RSS after ${streams} concurrent 4k-token streams within 10 MB of the steady state`, mb(afterLong - steady) <= 10, `${f(mb(afterLong - steady), 1)} MB`]);
          goals.push([`memory: no growth with stream length (90 % vs 30 % into 4k-token streams)`, mb(late - early) <= 10, `${f(mb(late - early), 1)} MB`]);
        }
        agent.destroy();
      }
      say();
    }

    const render = await renderMillis(100);
    say(`### /metrics render`);
    say();
    say(`100 models, MindIE and AOM dialects, every family: ${f(render.ms, 2)} ms per render (median of 25), ${Math.round(render.bytes / 1024)} KiB.`);
    say();
    goals.push(['/metrics render with 100 models under 5 ms', render.ms < 5, `${f(render.ms)} ms`]);

    say('### Goals');
    say();
    say('| goal | met | measured |');
    say('|---|---|---|');
    for (const [goal, met, measured] of goals) say(`| ${goal} | ${met ? 'yes' : '**no**'} | ${measured} |`);
    say();

    if (write && !memoryOnly) {
      say('### Where the CPU goes (throughput scenario, `npm run bench:profile`)');
      say();
      say(await profileThroughput());
    }

    if (write) {
      const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.versions.node}, ${execSync('nginx -v 2>&1').toString().trim()}`;
      writeFileSync(new URL('../docs/performance.md', import.meta.url), `${HEADER}\nMachine: ${machine}${quick ? ' (quick run)' : ''}.\n\n${out.join('\n')}\n${FOOTER}`);
    }
  } finally {
    for (const a of agents.values()) a.destroy();
    await fleet.stop();
  }
}

const HEADER = `# Performance

Produced by \`npm run bench -- --write\` (bench/run.ts). Every target is measured in the same
run, interleaved (the order rotates each repetition), with medians over repetitions, because
these machines are noisy: the simulated upstream directly ("direct"), a bare Node pass-through
(node:http piping with keep-alive) in two processes, whose mean is the Node floor and whose
difference is what the run can resolve, http-proxy-3 alone, infermeter with all measurement on (MindIE
and AOM dialects, usage injection, engine scraping), the same with its access log writing to a
file, and nginx (\`proxy_buffering off\`, one worker) as the native floor. The load client,
the upstream and the proxy share the machine's cores, so ratios, not absolute figures, are
what a run says. TTFT is measured by the client: from sending the request to the first body
bytes. CPU per event is the proxy process's CPU time over the events it forwarded: the
scheduler's per-thread count in /proc (nanoseconds; 10 ms ticks where the kernel does not show
it).
`;
const FOOTER = `
## Reading the goals

The issue's goals, and what bounds those this machine does not meet (figures above are from one
run; runs vary by tens of percent, which is why every comparison is within one run):

- **Throughput at 0.85× direct.** Out of reach for any Node proxy here: the load client, the
  upstream and the proxy share two cores, and the bare Node pass-through itself delivers about
  half of direct's events per second. infermeter runs at 0.8–0.9× the Node floor's rate across runs; nginx,
  native and multi-buffered, is at or above direct.
- **CPU per event no more than the Node pass-through's, within 1.5× nginx's.** infermeter does
  strictly more per event than the pass-through: it reads every event. What it adds was cut to
  what the profile shows: events are cut and classified on the bytes in one pass with no decoding
  and no allocation (\`skim-event.ts\`, a per-stream template that reduces most chunks to two
  native comparisons), one clock read per chunk, and the tap reads a chunk only after Node has
  sent it to the client (Node corks a chunked write until the next tick; reading in the same tick
  had delayed every chunk by its parse: 17 µs to the first byte of a one-token answer). The rest of the time is Node's own HTTP machinery (parsing the upstream's response,
  \`writev\` to the client) and http-proxy-3, which alone costs about 1.1–1.25× the bare
  pass-through. nginx spends 0.3–0.5 µs per event; Node's per-chunk stream path alone costs
  several times that, so 1.5× nginx is out of reach for a Node process.
- **Added TTFT in the latency scenario.** 32 streams get their first token at the same instant;
  one thread forwards them one after another, so the last waits for the others. The Node floor
  itself adds 1.5 to 4.5 ms at p99 in this burst across runs; 1.5 ms at p99 is out of reach for a
  single-threaded proxy on this machine (nginx: about 0.2 to 1 ms). At p50, infermeter's
  per-request work (holding the body to decide on usage injection, the timer, the tap, the
  dialects' observations) puts it from about 0.1 ms to a millisecond above the floor. That is
  what the per-request cost predicts: the request in the middle of a burst of 32 waits for about
  16 others, and infermeter spends 20 to 30 µs more CPU per request than the floor, so 0.3 to
  0.5 ms. The round
  trip at concurrency 1 is between 1.1× and 1.9× the floor's added time across runs: infermeter
  spends 58 to 70 µs of CPU per one-token request where the bare pass-through spends 32 to 50 µs
  and http-proxy-3 alone about 40 µs. Side by side, with switches made for the measurement: the
  tap costs about 11 µs per one-token request, and sending the upstream's headers as they arrive
  (as nginx does; the Node pass-through holds them until the first body byte) about 9 µs; with
  both off, and usage injection, the engine scrape and the total timeout off too, infermeter was
  within 3 µs of http-proxy-3 alone. Usage injection, the engine scrape, the AOM dialect or the
  total timeout alone moves it less than the run-to-run noise of about ±10 µs. Sending a held
  request body in one \`end()\` instead of through a Readable saved about 6 µs (lower in 7 of 7
  paired repetitions), and reading each chunk after Node has sent it about 4 µs and 17 µs to the
  first byte. Tried and dropped: reading each chunk after the
  current round of I/O (setImmediate), so that no stream's forwarding waits for another's
  parsing. Side by side in one run, it gained nothing (TTFT p99 60.5 and 61.0 ms with it, 58.3
  and 58.4 ms without, over two runs; p50 unchanged).
- **Memory.** No leak: the V8 heap after
  a collection stays between 13 and 20 MB, with no upward trend, however many requests went through (checked in process with
  --expose-gc, \`npm run bench:heap\`). What the resident set does under 1000 concurrent 4k-token streams varies from run
  to run of the same build (from under 1 MB to over 100 MB above the warm-up's level, after a
  warm-up with the same load, and the Node floor's more: 190.9 MB in a run where infermeter's
  grew 112.8 MB; four memory-only runs on one day gave 34.0 and 3.6 MB for the current build,
  7.8 and 14.0 MB for the build before the dashboard and the vLLM and OpenTelemetry dialects:
  noise, not a trend). That is the working set of the load, which glibc keeps after it is freed.
  Growth with stream length (30 % to 90 % into the streams) is 0.0 to 0.1 MB in most runs; in the
  run where it was 11.6 MB, the Node floor grew by 94 MB over the same span; the 10 MB goal is met in some runs and not in others. Two changes bound it:
  a partial event is copied instead of keeping its whole socket read buffer alive (before that,
  1000 streams held tens of MB of read buffers), and infermeter runs with
  \`--max-semi-space-size=8\` (the bin's shebang, \`npm start\`, the image), which caps V8's young
  generation: without it the resident set grew by 140 to 410 MB under the same load and stayed
  there, for about 3 % more CPU in garbage collection (compare the GC share in the profile with
  the flag and without). The Node floor, run with Node's defaults, grows by 70 to 200 MB.
- **/metrics render** stays far under 5 ms: our families render their own text with label
  strings built once per series.
`;

main().catch((error: unknown) => {
  process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
