// npm run bench:llamacpp: infermeter in front of a real llama.cpp llama-server, every scenario of
// bench/llamacpp/scenarios.ts sent directly and through infermeter, and the tables of
// docs/real-engines.md printed: requests, token sums and TTFT / TPOT / e2e means from the client,
// from llama.cpp's own timings and from infermeter. Needs LLAMA_SERVER (a llama-server binary you
// built) and LLAMA_MODEL (a GGUF: bench/llamacpp/tiny-gguf.py writes a small random one);
// LLAMA_THREADS (default 2); LLAMA_CPP_REF names the source in the header (a build from a source
// archive prints no commit). Loopback only; every scenario is a fixed number of requests, each
// with a timeout.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ask } from './llamacpp/client.ts';
import {
  cellName,
  cellsOfHabits,
  connectionsTable,
  marginLines,
  resendLines,
  ROUNDS,
  runCell,
  spreadLines,
  type ConnectionCell,
  type WayResult,
} from './llamacpp/connections.ts';
import { llamaFromEnv, startLlamaServer } from './llamacpp/llama-server.ts';
import { accessLines, requestsTable, runScenario, SCENARIOS, seriesSums, timesTable, type Row } from './llamacpp/scenarios.ts';
import { INFERMETER_FLAGS, infermeterEnv, startNode } from './targets.ts';

const CLIENT_MODEL = 'gpt-4o-mini'; // what clients ask for; llama.cpp serves any name as its one model
const SERVED = 'tiny.gguf';

const found = llamaFromEnv();
if (typeof found === 'string') {
  console.error(
    `bench:llamacpp: ${found}. Build llama.cpp's llama-server yourself, following llama.cpp's own build instructions, and set both (docs/real-engines.md).`,
  );
  process.exit(2);
}
const threads = Number(process.env.LLAMA_THREADS ?? '2');
const version = spawnSync(found.binary, ['--version'], { encoding: 'utf8' });
const versionLine =
  process.env.LLAMA_CPP_REF ??
  `${version.stdout}${version.stderr}`
    .split('\n')
    .find((l) => l.startsWith('version:'))
    ?.replace('version: ', 'build ') ??
  'build unknown';

const tmp = mkdtempSync(join(tmpdir(), 'infermeter-llamacpp-'));
const accessLog = join(tmp, 'access.log');
const server = await startLlamaServer({ ...found, slots: 4, context: 4096, threads, alias: SERVED });
let infermeter: ChildProcess | undefined;
const others: ChildProcess[] = [];
const ROUNDS_NOTE = `chat, max_tokens 8, each cell sent in ${ROUNDS} interleaved rounds to each way (the order rotated, 5.5 s between ways so that no way's idle connections hold the engine's threads into the next), the client's whole request timed`;
try {
  const meta = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: Array<{ id: string; meta?: { n_params?: number } }> };
  // Warm-up: the first prompts of a fresh server are slow (allocation); not part of any scenario.
  for (let i = 0; i < 4; i++)
    await ask(server.url, {
      api: 'chat',
      stream: false,
      includeUsage: false,
      prompt: `warm-up ${i}`,
      maxTokens: 8,
      model: CLIENT_MODEL,
      requestId: `warm-${i}`,
    });

  const cli = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
  const env = {
    ...infermeterEnv(server.url),
    INFERMETER_DIALECTS: 'mindie,vllm',
    INFERMETER_ACCESS_LOG: accessLog,
    INFERMETER_UPSTREAM_METRICS_INTERVAL_SECONDS: '1',
  };
  const started = await startNode(cli, [], env, /"infermeter started"/, 'stderr', INFERMETER_FLAGS.split(' '));
  infermeter = started.child;
  const urls = JSON.parse(started.line) as { data: string; metrics: string };
  const metricsText = async () => (await fetch(new URL('/metrics', urls.metrics))).text();

  // The connections table: the same client habits directly and through infermeter under each
  // upstream connection policy (the extra instances do not scrape the engine).
  const policies: Array<{ name: string; url: string; metrics: string }> = [{ name: 'infermeter (mirror)', url: urls.data, metrics: urls.metrics }];
  for (const policy of (process.env.LLAMA_BENCH_POLICIES ?? 'pool').split(',').filter(Boolean)) {
    const extra = await startNode(
      cli,
      [],
      { ...infermeterEnv(server.url), INFERMETER_UPSTREAM_METRICS: 'off', INFERMETER_UPSTREAM_CONNECTIONS: policy },
      /"infermeter started"/,
      'stderr',
      INFERMETER_FLAGS.split(' '),
    );
    others.push(extra.child);
    const at = JSON.parse(extra.line) as { data: string; metrics: string };
    policies.push({ name: `infermeter (${policy})`, url: at.data, metrics: at.metrics });
  }
  const retriesBefore = await Promise.all(
    policies.map(async (p) => seriesSums(await (await fetch(new URL('/metrics', p.metrics))).text()).get('infermeter_upstream_retries_total') ?? 0),
  );
  // The control: a bare TCP relay (bench/tcp-relay.ts: a connection upstream per client
  // connection, bytes copied, nothing parsed). A margin it misses too is the extra hop and
  // process on this machine's cores, not infermeter's own doing.
  const relay = await startNode(fileURLToPath(new URL('./tcp-relay.ts', import.meta.url)), [server.url], {}, /"port"/, 'stdout');
  others.push(relay.child);
  const relayUrl = `http://127.0.0.1:${(JSON.parse(relay.line) as { port: number }).port}`;
  const bases = [{ name: 'direct', url: server.url }, ...policies.map((p) => ({ name: p.name, url: p.url })), { name: 'relay', url: relayUrl }];
  const cells: Array<{ cell: ConnectionCell; ways: Map<string, WayResult> }> = [];
  // The machine's load around the table: margins of 5 to 100 ms mean little on a busy one.
  const loadBefore = loadavg()[0]!;
  // LLAMA_BENCH_ONLY=scenarios: the scenario tables alone.
  const connectionCells = process.env.LLAMA_BENCH_ONLY === 'scenarios' ? [] : cellsOfHabits();
  for (const [k, cell] of connectionCells.entries()) {
    cells.push({ cell, ways: await runCell(bases, cell, CLIENT_MODEL, `k${k}`) });
    console.error(
      `done: ${cellName(cell)}\n${connectionsTable(
        cells.slice(-1),
        bases.map((b) => b.name),
      )}`,
    );
  }
  const retries = await Promise.all(
    policies.map(
      async (p, i) =>
        (seriesSums(await (await fetch(new URL('/metrics', p.metrics))).text()).get('infermeter_upstream_retries_total') ?? 0) - retriesBefore[i]!,
    ),
  );

  console.log(
    `Connections: ${ROUNDS_NOTE}; llama-server's HTTP threads: max(slots + 2, cores - 1) = ${Math.max(4 + 2, cpus().length - 1)}; load average ${loadBefore.toFixed(1)} before, ${loadavg()[0]!.toFixed(1)} after\n`,
  );
  console.log(
    connectionsTable(
      cells,
      bases.map((b) => b.name),
    ),
  );
  console.log('');
  console.log(
    spreadLines(
      cells,
      bases.map((b) => b.name),
    ).join('\n'),
  );
  console.log('');
  console.log(
    `Re-sent on a fresh upstream connection during the connections table (stale race): ${policies.map((p, i) => `${p.name} ${retries[i]}`).join(', ')}\n`,
  );
  // The requests infermeter (mirror, the instance with the access log) sent again upstream.
  await new Promise((resolve) => setTimeout(resolve, 200)); // the log's 100 ms batch
  const resentByMirror = new Set<string>();
  for (const line of readFileSync(accessLog, 'utf8').split('\n')) {
    if (line === '') continue;
    const record = JSON.parse(line) as { request_id?: string; resent?: string };
    if (record.resent !== undefined && record.request_id !== undefined) resentByMirror.add(record.request_id.replace(/-again$/, ''));
  }
  console.log("Re-sent requests, per cell and way (the client's own re-sends, and the ones infermeter re-sent), and slow connects:");
  console.log(
    resendLines(
      cells,
      bases.map((b) => b.name),
      new Map([['infermeter (mirror)', resentByMirror]]),
    ).join('\n'),
  );
  console.log('');
  console.log("Issue 29's margins, infermeter's default (mirror) against direct, the bare TCP relay the control:");
  console.log(marginLines(cells, 'direct', 'infermeter (mirror)', 'relay').join('\n'));
  console.log('');

  const rows: Row[] = [];
  // LLAMA_BENCH_ONLY=connections: the connections table alone.
  const scenarios = process.env.LLAMA_BENCH_ONLY === 'connections' ? [] : SCENARIOS;
  for (const [k, scenario] of scenarios.entries()) {
    const direct = await runScenario(server.url, scenario, `d${k}`, CLIENT_MODEL);
    const before = seriesSums(await metricsText());
    // While it runs, the in-flight gauges are read every 100 ms (concurrency above 1 only).
    let clientInFlight = 0;
    let max = 0;
    let excess = 0;
    let polling = scenario.concurrency > 1;
    const poller = (async () => {
      while (polling) {
        const sums = seriesSums(await metricsText());
        const seen = (sums.get('num_requests_running') ?? 0) + (sums.get('num_requests_waiting') ?? 0);
        max = Math.max(max, seen);
        excess = Math.max(excess, seen - clientInFlight);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const proxied = await runScenario(urls.data, scenario, `p${k}`, CLIENT_MODEL, (n) => (clientInFlight = n));
    polling = false;
    await poller;
    const log = await accessLines(
      accessLog,
      proxied.map((a) => a.requestId),
    );
    const after = seriesSums(await metricsText());
    const metrics = new Map([...after].map(([name, v]) => [name, v - (before.get(name) ?? 0)]));
    rows.push({ scenario, direct, proxied, log, metrics, inFlightSeen: scenario.concurrency > 1 ? { max, excess } : undefined });
    console.error(`done: ${scenario.name}`);
  }

  console.log(
    `llama.cpp llama-server ${versionLine}, ${SERVED} (${meta.data[0]?.meta?.n_params ?? '?'} parameters, random weights), 4 slots, context 4096, ${threads} threads, CPU (${cpus()[0]?.model ?? 'unknown'}, ${cpus().length} cores); clients ask for model "${CLIENT_MODEL}", one connection per request; ${new Date().toISOString()}\n`,
  );
  console.log(requestsTable(rows));
  console.log('');
  console.log(timesTable(rows));
} finally {
  for (const child of others) {
    if (child.exitCode !== null) continue;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
  if (infermeter !== undefined && infermeter.exitCode === null) {
    const exited = new Promise((resolve) => infermeter!.once('exit', resolve));
    infermeter.kill('SIGTERM');
    await exited;
  }
  await server.stop();
  rmSync(tmp, { recursive: true, force: true });
}
