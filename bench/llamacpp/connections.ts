// The connections table of the real-engine run (issue 29): the same client habits sent directly
// to llama-server and through infermeter (one instance per upstream connection policy), side by
// side in one run, rounds interleaved: a connection per request (curl, most scripts) and a
// kept-alive pool, streamed and not, one at a time and above the engine's HTTP threads. p50 /
// p90 / max of the client's whole request, and how many took over 1 s; and the margins of
// issue 29's Done-when checked for the default policy.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { ask, type Answer } from './client.ts';
import { prompt } from './scenarios.ts';

export interface ConnectionCell {
  readonly habit: 'fresh' | 'kept-alive';
  readonly stream: boolean;
  readonly concurrency: number;
  readonly requests: number;
}

const CONNECTION_CELLS: readonly ConnectionCell[] = (['fresh', 'kept-alive'] as const).flatMap((habit) =>
  [false, true].flatMap((stream) => [
    { habit, stream, concurrency: 1, requests: 30 },
    { habit, stream, concurrency: 8, requests: 48 },
  ]),
);

/** The cells of LLAMA_BENCH_HABITS (`fresh`, `kept-alive`, or both, the default). */
export function cellsOfHabits(habits = process.env.LLAMA_BENCH_HABITS ?? 'fresh,kept-alive'): ConnectionCell[] {
  const wanted = habits.split(',').filter(Boolean);
  return CONNECTION_CELLS.filter((c) => wanted.includes(c.habit));
}

export const cellName = (c: ConnectionCell): string =>
  `${c.habit === 'fresh' ? 'connection per request' : 'kept-alive pool'}, ${c.stream ? 'streamed' : 'not streamed'}, c${c.concurrency}`;

/** One way of a cell: what the clients saw. */
export interface WayResult {
  readonly times: number[];
  failed: number;
  /** Requests the kept-alive client sent again after its reused connection failed before any answer. */
  resent: number;
  /** Each request the kept-alive client sent again: its first try, the re-send, and the connection each used. */
  readonly resends: Resend[];
  /** Every request that succeeded: its id, its time, its connection (to find the ones infermeter re-sent). */
  readonly answers: Array<{ id: string; ms: number; connection: Answer['connection'] }>;
  /** The kernel's listen-queue overflows (TcpExt ListenOverflows, the whole machine's) during this way's rounds. */
  overflows: number;
  /** Each round's own p90 and max (ms), for the spread. */
  readonly rounds: Array<{ p50: number | undefined; p90: number | undefined; max: number | undefined; failed: number }>;
}

/** Rounds per cell (LLAMA_BENCH_ROUNDS, default 2), each of half a cell's `requests`: more rounds for a p90 or a max within noise. */
interface Resend {
  readonly id: string;
  /** ms from the first send to its failure, and that connection. */
  readonly failedAfterMs: number;
  readonly first: Answer['connection'];
  /** The re-send's own ms and connection (a new one's connect time included). */
  readonly againMs: number | undefined;
  readonly again: Answer['connection'];
}

/** TcpExt ListenOverflows of /proc/net/netstat (SYNs a full listen queue dropped), or undefined off Linux. */
function listenOverflows(): number | undefined {
  try {
    const lines = readFileSync('/proc/net/netstat', 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('TcpExt:'));
    const names = lines[0]!.split(' ');
    const values = lines[1]!.split(' ');
    const at = names.indexOf('ListenOverflows');
    return at < 0 ? undefined : Number(values[at]);
  } catch {
    return undefined;
  }
}

export const ROUNDS = Number(process.env.LLAMA_BENCH_ROUNDS ?? '2');
/** llama.cpp's keep-alive idle timeout (cpp-httplib's 5 s), and a margin. */
const ENGINE_IDLE_MS = 5500;
const MAX_TOKENS = 8;

/** A cell sent to every base, `ROUNDS` interleaved rounds (the order rotated each round). */
export async function runCell(
  bases: ReadonlyArray<{ name: string; url: string }>,
  cell: ConnectionCell,
  model: string,
  key: string,
): Promise<Map<string, WayResult>> {
  const out = new Map<string, WayResult>(bases.map((b) => [b.name, { times: [], failed: 0, resent: 0, resends: [], answers: [], overflows: 0, rounds: [] }]));
  const perRound = Math.ceil(cell.requests / 2);
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < bases.length; k++) {
      const base = bases[(k + round) % bases.length]!;
      const agent = cell.habit === 'fresh' ? new http.Agent({ keepAlive: false }) : new http.Agent({ keepAlive: true, maxSockets: cell.concurrency });
      try {
        const into = out.get(base.name)!;
        const overflowsBefore = listenOverflows();
        // The request id without spaces: infermeter logs a client's id only when it is printable
        // ASCII without them (else its own), and its access log names the requests it re-sent.
        const answers = await sendMany(base.url, cell, perRound, model, `${key}-${base.name.replace(/[^\x21-\x7e]/g, '_')}-${round}`, agent, (r) => {
          into.resent++;
          into.resends.push(r);
        });
        const overflowsAfter = listenOverflows();
        if (overflowsBefore !== undefined && overflowsAfter !== undefined) into.overflows += overflowsAfter - overflowsBefore;
        const times: number[] = [];
        let failed = 0;
        for (const a of answers) {
          if (a.status === 200 && a.complete && a.e2eMs !== undefined) {
            times.push(a.e2eMs);
            into.answers.push({ id: a.requestId, ms: a.e2eMs, connection: a.connection });
          } else failed++;
        }
        into.times.push(...times);
        into.failed += failed;
        into.rounds.push({ p50: quantile(times, 0.5), p90: quantile(times, 0.9), max: times.length === 0 ? undefined : Math.max(...times), failed });
      } finally {
        agent.destroy();
      }
      // The engine keeps a thread for each connection until it closes or idles 5 s: a way that
      // left idle connections (the `pool` policy) would hold threads into the next way.
      await new Promise((resolve) => setTimeout(resolve, ENGINE_IDLE_MS));
    }
  }
  return out;
}

/**
 * The kept-alive client sends a request again, once, when its connection failed before any
 * answer (the server closed it as it was reused: llama.cpp closes a streamed answer's connection
 * a millisecond after its end, saying keep-alive), as Go's net/http and urllib3 do; timed from
 * the first send. Without it, directly such requests fail at once and drop out of the times
 * (16 of 48 in a run), while through infermeter (which re-sends them itself) they stay in, slow
 * ones among them: the two ways would be compared on different requests.
 */
const CLIENT_RESENDS = process.env.LLAMA_BENCH_CLIENT_RESEND !== '0';

async function sendMany(
  base: string,
  cell: ConnectionCell,
  requests: number,
  model: string,
  key: string,
  agent: http.Agent,
  resent: (r: Resend) => void,
): Promise<Answer[]> {
  const answers: Answer[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < requests) {
      const i = next++;
      const one = {
        api: 'chat',
        stream: cell.stream,
        includeUsage: false,
        prompt: prompt(`${key}-${i}`, i),
        maxTokens: MAX_TOKENS,
        model,
        requestId: `${key}-${i}`,
      } as const;
      const start = performance.now();
      let answer = await ask(base, one, 60_000, agent);
      if (CLIENT_RESENDS && cell.habit === 'kept-alive' && answer.status === 0 && answer.body === '') {
        const before = performance.now() - start;
        const again = await ask(base, { ...one, requestId: `${one.requestId}-again` }, 60_000, agent);
        resent({ id: one.requestId, failedAfterMs: before, first: answer.connection, againMs: again.e2eMs, again: again.connection });
        answer = { ...again, requestId: one.requestId, e2eMs: again.e2eMs === undefined ? undefined : before + again.e2eMs };
      }
      answers[i] = answer;
    }
  };
  await Promise.all(Array.from({ length: cell.concurrency }, worker));
  return answers;
}

function quantile(values: readonly number[], q: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

const f = (n: number | undefined): string => (n === undefined ? '–' : n.toFixed(1));
const figures = (w: WayResult): string =>
  `${f(quantile(w.times, 0.5))} / ${f(quantile(w.times, 0.9))} / ${f(w.times.length === 0 ? undefined : Math.max(...w.times))} / ${w.times.filter((ms) => ms > 1000).length}${w.failed > 0 ? ` (${w.failed} failed)` : ''}${w.resent > 0 ? ` (${w.resent} re-sent by the client)` : ''}`;

/** The table: one row per cell, a column per way. */
export function connectionsTable(cells: ReadonlyArray<{ cell: ConnectionCell; ways: Map<string, WayResult> }>, ways: readonly string[]): string {
  const out = [
    `| client, answer, concurrency | ${ways.map((w) => `${w}: p50 / p90 / max ms / over 1 s`).join(' | ')} |`,
    `|---|${ways.map(() => '---|').join('')}`,
  ];
  for (const { cell, ways: results } of cells) out.push(`| ${cellName(cell)} | ${ways.map((w) => figures(results.get(w)!)).join(' | ')} |`);
  return out.join('\n');
}

/** Each round's p90 and max per way (ms): the spread a margin is read against. */
export function spreadLines(cells: ReadonlyArray<{ cell: ConnectionCell; ways: Map<string, WayResult> }>, ways: readonly string[]): string[] {
  const lines: string[] = [];
  for (const { cell, ways: results } of cells) {
    const per = ways.map(
      (w) =>
        `${w} ${results
          .get(w)!
          .rounds.map((r) => `${f(r.p90)}/${f(r.max)}${r.failed > 0 ? ` (${r.failed} failed)` : ''}`)
          .join(', ')}`,
    );
    lines.push(`- ${cellName(cell)}, p90/max per round: ${per.join('; ')}`);
  }
  return lines;
}

/**
 * Issue 29's Done-when margins, for `proxied` against `direct`: one line per margin, pass or fail.
 * With a `control` way (the bare TCP relay, which parses nothing), a margin infermeter misses
 * says whether the relay misses it too: then it is the machine (the connection's extra hop and
 * process on the same cores), not infermeter's own doing.
 */
export function marginLines(
  cells: ReadonlyArray<{ cell: ConnectionCell; ways: Map<string, WayResult> }>,
  direct: string,
  proxied: string,
  control?: string,
): string[] {
  const lines: string[] = [];
  const check = (cell: ConnectionCell, what: 'p50' | 'p90' | 'max', margin: number): void => {
    const found = cells.find((c) => c.cell.habit === cell.habit && c.cell.stream === cell.stream && c.cell.concurrency === cell.concurrency);
    if (found === undefined) return;
    const d = found.ways.get(direct)!;
    const pick = (w: WayResult): number | undefined =>
      what === 'max' ? (w.times.length === 0 ? undefined : Math.max(...w.times)) : quantile(w.times, what === 'p50' ? 0.5 : 0.9);
    const dv = pick(d);
    const holds = (w: WayResult): boolean => {
      const v = pick(w);
      return dv !== undefined && v !== undefined && v <= dv + margin && w.failed <= d.failed;
    };
    // The same margin round by round (round k of one way against round k of the other): how often it holds.
    const heldIn = (w: WayResult): string => {
      let held = 0;
      const n = Math.min(d.rounds.length, w.rounds.length);
      for (let k = 0; k < n; k++) {
        const dr = d.rounds[k]![what];
        const pr = w.rounds[k]![what];
        if (dr !== undefined && pr !== undefined && pr <= dr + margin) held++;
      }
      return `held in ${held} of ${n} rounds`;
    };
    const p = found.ways.get(proxied)!;
    const pv = pick(p);
    const ok = holds(p);
    const c = control === undefined ? undefined : found.ways.get(control);
    const verdict = ok ? 'pass' : c === undefined ? 'FAIL' : holds(c) ? 'FAIL (the relay holds it: infermeter)' : 'FAIL (relay misses too: machine)';
    lines.push(
      `- ${cellName(cell)}: ${proxied} ${what === 'p50' ? 'median' : what} ${f(pv)} ms <= ${direct} ${f(dv)} + ${margin} ms${p.failed > d.failed ? ` (and no more failed: ${p.failed} vs ${d.failed})` : ''}: ${verdict} (${heldIn(p)})${c === undefined ? '' : `; ${control} ${f(pick(c))} ms: ${holds(c) ? 'holds' : 'misses'} (${heldIn(c)})`}`,
    );
  };
  for (const habit of ['fresh', 'kept-alive'] as const) {
    check({ habit, stream: false, concurrency: 8, requests: 0 }, 'p90', 10);
    check({ habit, stream: false, concurrency: 8, requests: 0 }, 'max', 100);
    check({ habit, stream: false, concurrency: 1, requests: 0 }, 'p50', 5);
    check({ habit, stream: true, concurrency: 8, requests: 0 }, 'p90', 10);
  }
  return lines;
}

const port = (c: Answer['connection']): string => `:${c.port ?? '?'} ${c.reused ? 'reused' : `new, connect ${f(c.connectMs)} ms`}`;

/**
 * Where the re-sent requests' time went, per cell and way: the client's own re-sends (the first
 * try's failure and the connection it failed on, the re-send's time and connection) and the
 * requests infermeter re-sent on a fresh upstream connection (`resentByProxy`: their ids, from
 * its access log), against the way's median; new connections whose connect took over 900 ms
 * (a SYN dropped by a full listen queue, re-tried by the kernel after 1 s), and the machine's
 * listen-queue overflows during the way.
 */
export function resendLines(
  cells: ReadonlyArray<{ cell: ConnectionCell; ways: Map<string, WayResult> }>,
  ways: readonly string[],
  resentByProxy: ReadonlyMap<string, ReadonlySet<string>> = new Map(),
): string[] {
  const lines: string[] = [];
  for (const { cell, ways: results } of cells) {
    for (const name of ways) {
      const w = results.get(name)!;
      const proxyIds = resentByProxy.get(name) ?? new Set<string>();
      const byProxy = w.answers.filter((a) => proxyIds.has(a.id));
      const slowConnects = w.answers.filter((a) => (a.connection.connectMs ?? 0) > 900).length;
      if (w.resends.length === 0 && byProxy.length === 0 && slowConnects === 0 && w.overflows === 0) continue;
      const median = quantile(w.times, 0.5);
      const parts = [
        `${w.resends.length} re-sent by the client`,
        `${byProxy.length} by infermeter`,
        `${slowConnects} connects over 900 ms`,
        `listen overflows ${w.overflows}`,
        `median ${f(median)} ms`,
      ];
      lines.push(`- ${cellName(cell)}, ${name}: ${parts.join(', ')}`);
      for (const r of w.resends)
        lines.push(`  - client re-sent ${r.id}: failed after ${f(r.failedAfterMs)} ms on ${port(r.first)}; again ${f(r.againMs)} ms on ${port(r.again)}`);
      for (const a of byProxy) lines.push(`  - infermeter re-sent ${a.id}: ${f(a.ms)} ms at the client, on ${port(a.connection)}`);
    }
  }
  return lines;
}
