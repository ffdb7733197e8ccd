// npm run bench:goodput: the outside judge of infermeter's goodput. One run sends scripted
// streams through infermeter (its own process, SLO classes per model from an SLO file) and, in
// this process, reads each one the way vLLM's benchmark client does, then applies vLLM's
// goodput check to the client's own view of the same requests; infermeter's count (its
// /metrics) and the judge's are printed side by side, with how often the two verdicts agree
// request by request (paired by X-Request-Id through infermeter's access log) and how much
// later the client read TTFT and the end than infermeter did.
//
// Ported from vLLM (Apache-2.0), faithfully, as comments mark:
// - the client: vllm/benchmarks/lib/endpoint_request_func.py, async_request_openai_chat_completions
//   and StreamedResponseHandler (commit 3aee4a4f4c4d1a2a7af3ebdb88c768e459e6c602): st before the
//   POST; messages split on "\n\n", "data:" lines; ttft at the first message with `choices`;
//   most_recent_timestamp at every message but [DONE]; output_tokens from `usage`; latency =
//   most_recent_timestamp - st; success on HTTP 200.
// - the check: calculate_metrics' goodput part (benchmarks/benchmark_serving.py, later
//   vllm/benchmarks/serve.py): for a successful output, tpot = (latency - ttft) / (output_len - 1)
//   when output_len > 1, else 0; good when `slo_ms / 1000 >= value` for every configured SLO.
//   One deviation: vLLM counts output_len with the model's tokenizer when usage is missing;
//   the bench's upstream always reports usage, so the tokenizer is never needed.
//
// Scenarios (200 streams each, concurrency 32, loopback only): `far` (TTFT 50 ms, 10 ms gaps,
// SLO ttft:500 tpot:50: every verdict must agree); `mode` (TTFT 200 ms, 5 ms gaps, SLO
// ttft:205 tpot:6: the SLO on the distribution's mode, where the client's later reading flips
// verdicts); then `mode` again through a second infermeter with INFERMETER_SLO_CLIENT_ALLOWANCE
// set to the p50 of the first run's client-minus-infermeter differences. Each infermeter gets a
// warm-up of 32 streams first. `--quick`: 64 streams.
import http from 'node:http';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ChildProcess } from 'node:child_process';
import { benchHeaders, percentile } from './load.ts';
import { INFERMETER_FLAGS, infermeterEnv, startNode, startUpstream } from './targets.ts';

const quick = process.argv.includes('--quick');
const REQUESTS = quick ? 64 : 200;
const CONCURRENCY = 32;
const TOKENS = 32;
const here = (name: string) => fileURLToPath(new URL(name, import.meta.url));

interface Scenario {
  readonly model: string;
  readonly slo: Readonly<Record<'ttft' | 'tpot' | 'e2el', number | undefined>>;
  readonly sloText: string;
  readonly ttftMs: number;
  readonly gapMs: number;
}

const SCENARIOS: readonly Scenario[] = [
  { model: 'far', slo: { ttft: 500, tpot: 50, e2el: undefined }, sloText: 'ttft:500 tpot:50', ttftMs: 50, gapMs: 10 },
  { model: 'mode', slo: { ttft: 205, tpot: 6, e2el: undefined }, sloText: 'ttft:205 tpot:6', ttftMs: 200, gapMs: 5 },
];

/** vLLM's RequestFuncOutput, the fields calculate_metrics reads. */
interface Output {
  readonly id: string;
  success: boolean;
  latency: number; // seconds
  ttft: number; // seconds
  outputTokens: number;
}

/** vLLM's StreamedResponseHandler.add_chunk: complete "data:" messages of the SSE buffer. */
function createHandler(): (chunk: string) => string[] {
  let buffer = '';
  return (chunk) => {
    const messages: string[] = [];
    if (chunk === '') return messages;
    buffer += chunk;
    let at: number;
    while ((at = buffer.indexOf('\n\n')) >= 0) {
      const message = buffer.slice(0, at).trim();
      buffer = buffer.slice(at + 2);
      for (const line of message.split(/\r?\n/)) if (line.startsWith('data:')) messages.push(line);
    }
    if (buffer.startsWith('data:')) {
      const content = buffer.slice(5).trim();
      if (content === '[DONE]') {
        messages.push(buffer.trim());
        buffer = '';
      } else if (content !== '') {
        try {
          JSON.parse(content);
          messages.push(buffer.trim());
          buffer = '';
        } catch {
          // incomplete JSON: wait for more
        }
      }
    }
    return messages;
  };
}

/** vLLM's async_request_openai_chat_completions, on node:http (aiohttp's iter_any: each read as it comes). */
function vllmChatRequest(url: string, agent: http.Agent, model: string, id: string, s: Scenario): Promise<Output> {
  const payload = JSON.stringify({
    model,
    messages: [{ role: 'user', content: 'Judge the goodput.' }],
    max_completion_tokens: TOKENS,
    stream: true,
    stream_options: { include_usage: true },
  });
  return new Promise((resolve) => {
    const output: Output = { id, success: false, latency: 0, ttft: 0, outputTokens: 0 };
    let ttft = 0;
    const st = performance.now() / 1000;
    let mostRecent = st;
    const add = createHandler();
    const req = http.request(
      new URL('/v1/chat/completions', url),
      {
        method: 'POST',
        agent,
        headers: benchHeaders(payload, { tokens: TOKENS, ttftMs: s.ttftMs, gapMs: s.gapMs }, id),
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          res.on('end', () => resolve(output));
          return;
        }
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          for (const message of add(chunk)) {
            if (message.startsWith(':')) continue;
            const data = message.slice(5).trim();
            if (data === '[DONE]') continue;
            const timestamp = performance.now() / 1000;
            const parsed = JSON.parse(data) as { choices?: unknown[]; usage?: { completion_tokens?: number } };
            if (parsed.choices !== undefined && parsed.choices.length > 0) {
              if (ttft === 0) {
                ttft = timestamp - st;
                output.ttft = ttft;
              }
            } else if (parsed.usage !== undefined) {
              output.outputTokens = parsed.usage.completion_tokens ?? 0;
            }
            mostRecent = timestamp;
          }
        });
        res.on('end', () => {
          output.success = true;
          output.latency = mostRecent - st;
          resolve(output);
        });
        res.on('error', () => resolve(output));
      },
    );
    req.on('error', () => resolve(output));
    req.end(payload);
  });
}

/**
 * calculate_metrics' goodput check: is one output good under `slo` (ms)? `allowanceMs` (0 for
 * the judge) is added to each figure after tpot is computed, as INFERMETER_SLO_CLIENT_ALLOWANCE
 * is by infermeter.
 */
function vllmGood(o: Output, slo: Scenario['slo'], allowanceMs = { ttft: 0, tpot: 0, e2el: 0 }): boolean {
  if (!o.success) return false;
  const outputLen = o.outputTokens;
  const tpot = outputLen > 1 ? (o.latency - o.ttft) / (outputLen - 1) : 0;
  const checks: Array<[number | undefined, number, number]> = [
    [slo.ttft, o.ttft, allowanceMs.ttft],
    [slo.tpot, tpot, allowanceMs.tpot],
    [slo.e2el, o.latency, allowanceMs.e2el],
  ];
  return checks.every(([s, r, a]) => s === undefined || s / 1000 >= (a === 0 ? r : r + a / 1000));
}

interface Logged {
  readonly request_id: string;
  readonly ttft_ms?: number;
  readonly e2e_ms?: number;
  readonly completion_tokens?: number;
}

async function run(url: string, metricsUrl: string, log: string, s: Scenario, label: string, allowance: { ttft: number; e2el: number } | undefined) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const outputs: Output[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < REQUESTS) {
        const i = next++;
        outputs.push(await vllmChatRequest(url, agent, s.model, `${label}-${i}`, s));
      }
    }),
  );
  agent.destroy();
  // infermeter's count, from its /metrics (the access log is written in batches: wait for every line).
  const metrics = await (await fetch(metricsUrl)).text();
  const infermeterGood = Number(
    new RegExp(`^infermeter_goodput_requests_total\\{model_name="${s.model}",verdict="good"\\} (\\S+)$`, 'm').exec(metrics)?.[1] ?? Number.NaN,
  );
  const logged = new Map<string, Logged>();
  for (let tries = 0; tries < 100 && logged.size < REQUESTS; tries++) {
    logged.clear();
    for (const line of readFileSync(log, 'utf8').split('\n')) {
      if (line === '') continue;
      const r = JSON.parse(line) as Logged;
      if (r.request_id.startsWith(`${label}-`)) logged.set(r.request_id, r);
    }
    if (logged.size < REQUESTS) await new Promise((r) => setTimeout(r, 50));
  }
  const dTtft: number[] = [];
  const dE2e: number[] = [];
  let agree = 0;
  let judgeGood = 0;
  let proxyGoodByPort = 0;
  for (const o of outputs) {
    const good = vllmGood(o, s.slo);
    if (good) judgeGood++;
    const l = logged.get(o.id);
    if (l?.ttft_ms === undefined || l.e2e_ms === undefined) continue;
    dTtft.push(o.ttft * 1000 - l.ttft_ms);
    dE2e.push(o.latency * 1000 - l.e2e_ms);
    // The same port applied to infermeter's own figures (with the allowance it was given): it
    // must count what infermeter counted, request by request.
    const proxyView: Output = { id: o.id, success: true, ttft: l.ttft_ms / 1000, latency: l.e2e_ms / 1000, outputTokens: l.completion_tokens ?? 0 };
    const proxyGood = vllmGood(proxyView, s.slo, { ttft: allowance?.ttft ?? 0, tpot: 0, e2el: allowance?.e2el ?? 0 });
    if (proxyGood) proxyGoodByPort++;
    if (proxyGood === good) agree++;
  }
  return { requests: outputs.length, infermeterGood, judgeGood, proxyGoodByPort, agree, paired: dTtft.length, dTtft, dE2e };
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'infermeter-goodput-'));
  const children: ChildProcess[] = [];
  const flags = (process.env.BENCH_INFERMETER_FLAGS ?? INFERMETER_FLAGS).split(' ').filter(Boolean);
  try {
    const up = await startUpstream();
    children.push(up.child);
    const sloFile = join(tmp, 'slo.json');
    writeFileSync(sloFile, JSON.stringify({ classes: SCENARIOS.map((s) => ({ name: s.model, model: s.model, slo: s.sloText })) }));
    const start = async (name: string, extra: Record<string, string>) => {
      const log = join(tmp, `${name}.log`);
      const env = { ...infermeterEnv(up.url), INFERMETER_SLO_FILE: sloFile, INFERMETER_ACCESS_LOG: log, ...extra };
      const { child, line } = await startNode(here('../src/cli.ts'), [], env, /"infermeter started"/, 'stderr', flags);
      children.push(child);
      child.stderr!.resume();
      const started = JSON.parse(line) as { data: string; metrics: string };
      // Warm-up, as vLLM's benchmark sends a test prompt first: connections and JIT, outside the
      // count (model `warmup` is in no SLO class: not judged).
      const agent = new http.Agent({ keepAlive: false });
      await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => vllmChatRequest(started.data, agent, 'warmup', `warmup-${name}-${i}`, SCENARIOS[0]!)));
      agent.destroy();
      return { url: started.data, metricsUrl: started.metrics, log };
    };
    const plain = await start('infermeter', {});
    console.log(
      `Machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.versions.node}, load average ${loadavg()[0]!.toFixed(2)} at the start.`,
    );
    console.log(
      `${REQUESTS} streams per scenario, concurrency ${CONCURRENCY}, ${TOKENS} tokens each, through infermeter (its own process); the judge: vLLM's benchmark client and goodput check, ported, on this client's own readings.\n`,
    );
    console.log(
      "| scenario | SLO | allowance | requests | infermeter good (/metrics) | the port on infermeter's own figures | vLLM's logic on the client's view: good | verdicts agreeing | client − infermeter TTFT, ms: p50 / p99 | e2e: p50 / p99 |",
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|');
    const row = (s: Scenario, allowance: string, r: Awaited<ReturnType<typeof run>>) =>
      console.log(
        `| ${s.model} (TTFT ${s.ttftMs} ms, gaps ${s.gapMs} ms) | ${s.sloText} | ${allowance} | ${r.requests} | ${r.infermeterGood} | ${r.proxyGoodByPort} | ${r.judgeGood} | ${r.agree} of ${r.paired} | ${percentile(r.dTtft, 50).toFixed(2)} / ${percentile(r.dTtft, 99).toFixed(2)} | ${percentile(r.dE2e, 50).toFixed(2)} / ${percentile(r.dE2e, 99).toFixed(2)} |`,
      );
    let mode: Awaited<ReturnType<typeof run>> | undefined;
    for (const s of SCENARIOS) {
      const r = await run(plain.url, plain.metricsUrl, plain.log, s, s.model, undefined);
      row(s, 'none', r);
      if (s.model === 'mode') mode = r;
    }
    // The allowance a user would set from this measurement: the p50 of the differences, rounded up to 0.1 ms.
    const up01 = (v: number) => Math.max(0, Math.ceil(v * 10) / 10);
    const allowance = { ttft: up01(percentile(mode!.dTtft, 50)), e2el: up01(percentile(mode!.dE2e, 50)) };
    const aligned = await start('infermeter-allowance', { INFERMETER_SLO_CLIENT_ALLOWANCE: `ttft:${allowance.ttft} e2el:${allowance.e2el}` });
    const s = SCENARIOS.find((x) => x.model === 'mode')!;
    row(s, `ttft:${allowance.ttft} e2el:${allowance.e2el}`, await run(aligned.url, aligned.metricsUrl, aligned.log, s, 'aligned', allowance));
    console.log(
      "\n\"the port on infermeter's own figures\": vLLM's check applied to the TTFT, e2e and tokens infermeter logged for each request (plus the allowance): it must equal infermeter's own count. \"verdicts agreeing\": requests whose verdict from infermeter's figures equals the judge's from the client's.",
    );
  } finally {
    for (const c of children) if (c.pid !== undefined && c.exitCode === null) c.kill('SIGTERM');
    rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
