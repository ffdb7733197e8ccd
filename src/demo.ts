// npm run demo (infermeter demo): a simulated model server, infermeter in front of it and a
// little traffic, so that /metrics fills within seconds. Ports come from the usual INFERMETER_*
// variables (defaults 1025/1026/1027); `--duration <seconds>` stops it by itself, SIGINT/SIGTERM
// otherwise. Runs on import: src/cli.ts imports it for `infermeter demo`.
import { startInfermeter, type Infermeter } from './app.ts';
import { describeBindError } from './cli/bind-error.ts';
import { parseDemoArguments } from './cli/demo-arguments.ts';
import { ConfigError, loadConfig, type Config } from './config/config.ts';
import { createLogger } from './log.ts';
import { startSimServer } from './sim/model-server.ts';
import { DEMO_SLO, SIM_MODELS, simTimings } from './sim/sim-defaults.ts';

const MODELS = SIM_MODELS;

/** Traffic the demo sends that fails or is cancelled on purpose, so that every count moves. */
const MISSING_MODEL_EVERY = 12; // the 6th of every 12 asks for a model the server does not have: 404
const GIVE_UP_EVERY = 12; // the 10th of every 12 is abandoned by its client after GIVE_UP_MS
const GIVE_UP_MS = 150;

async function main(): Promise<void> {
  // `node src/demo.ts ...` or `infermeter demo ...`: the flags follow either.
  const argv = process.argv.slice(2);
  const parsed = parseDemoArguments(argv[0] === 'demo' ? argv.slice(1) : argv);
  if ('error' in parsed) {
    process.stderr.write(`infermeter demo: ${parsed.error}\n`);
    process.exit(2);
  }
  const duration = parsed.durationSeconds ?? Number.NaN;
  const sim = await startSimServer({ models: MODELS, ...simTimings() });
  let config: Config;
  try {
    // Goodput on, unless the user set SLOs: the dashboard's SLO met column shows a healthy service.
    const slo = process.env.INFERMETER_SLO === undefined && process.env.INFERMETER_SLO_FILE === undefined ? { INFERMETER_SLO: DEMO_SLO } : {};
    config = loadConfig({ ...process.env, ...slo, INFERMETER_UPSTREAM: sim.url });
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`infermeter demo: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  let app: Infermeter;
  try {
    app = await startInfermeter(config, { log: createLogger('warn') });
  } catch (error) {
    await sim.close();
    const bind = describeBindError(error, config);
    if (bind === undefined) throw error;
    process.stderr.write(`infermeter demo: ${bind}\n`);
    process.exit(1);
  }
  const curl = `curl -N ${app.dataUrl}/v1/chat/completions -H 'content-type: application/json' -d '{"model":"${MODELS[0]}","stream":true,"messages":[{"role":"user","content":"hi"}]}'`;
  process.stdout.write(
    [
      'infermeter demo',
      `  simulated model server  ${sim.url}/v1/models  (models: ${MODELS.join(', ')})`,
      `  proxy, for clients      ${app.dataUrl}/v1/models  (OpenAI clients take the base URL ${app.dataUrl}/v1)`,
      `  metrics (Prometheus)    ${app.metricsUrl ?? 'disabled by MIES_SERVICE_MONITOR_MODE'}`,
      `  live dashboard          ${app.managementUrl}/dashboard`,
      `  health                  ${app.managementUrl}/health`,
      'Try:',
      `  curl -s ${app.metricsUrl} | grep -v '^#'`,
      `  ${curl}`,
      `Sending a little traffic${Number.isFinite(duration) ? ` for ${duration} s` : '; Ctrl+C to stop'}: 4 clients, one request at a time each, streamed and`,
      `  non-streamed, to ${MODELS.join(' and ')}, through chat completions and Anthropic's messages API. On purpose,`,
      `  1 in ${MISSING_MODEL_EVERY} asks for no-such-model (the server answers 404: a failure, the client's) and 1 in ${GIVE_UP_EVERY} is given up`,
      `  by its client after ${GIVE_UP_MS} ms (cancelled), so the clients' 4xx and the cancelled counts grow too.`,
      '',
    ].join('\n'),
  );

  let stopping = false;
  const workers = Array.from({ length: 4 }, (_, i) => traffic(app.dataUrl, i, () => stopping));
  const summary = setInterval(() => void report(app.metricsUrl), 5000);
  const stop = async (): Promise<void> => {
    if (stopping) process.exit(1);
    stopping = true;
    clearInterval(summary);
    await Promise.all(workers);
    await report(app.metricsUrl);
    await app.close();
    await sim.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  if (Number.isFinite(duration)) setTimeout(() => void stop(), duration * 1000);
}

/**
 * One client: mostly good streamed requests, some without usage, a few bad and cancelled ones;
 * every fourth on Anthropic's Messages API.
 */
async function traffic(base: string, worker: number, stopped: () => boolean): Promise<void> {
  for (let n = worker; !stopped(); n++) {
    const model = n % MISSING_MODEL_EVERY === 5 ? 'no-such-model' : MODELS[n % MODELS.length]!; // the upstream answers 404
    const stream = n % 5 !== 2;
    const body = {
      model,
      stream,
      ...(stream && n % 3 !== 1 ? { stream_options: { include_usage: true } } : {}), // some never ask for usage
      max_tokens: 16 + ((n * 13) % 64),
      messages: [{ role: 'user', content: 'Tell me something about metering proxies.' }],
    };
    const anthropic = n % 4 === 3;
    const controller = new AbortController();
    if (n % GIVE_UP_EVERY === 9) setTimeout(() => controller.abort(), GIVE_UP_MS).unref(); // a client that gives up
    try {
      const res = await fetch(`${base}${anthropic ? '/v1/messages' : '/v1/chat/completions'}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(anthropic ? { model, stream, max_tokens: body.max_tokens, messages: body.messages } : body),
        signal: controller.signal,
      });
      await res.arrayBuffer();
    } catch {
      // aborted on purpose, or the demo is stopping
    }
  }
}

async function report(metricsUrl: string | undefined): Promise<void> {
  if (metricsUrl === undefined) return;
  try {
    const text = await (await fetch(metricsUrl)).text();
    const total = (name: string) =>
      text
        .split('\n')
        .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
        .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    const ttftCount = total('time_to_first_token_seconds_count');
    const ttftAvg = ttftCount === 0 ? 0 : total('time_to_first_token_seconds_sum') / ttftCount;
    process.stdout.write(
      `received ${total('request_received_total')}: ${total('request_success_total')} ok, ${total('request_failed_total')} failed, ` +
        `${total('request_cancelled_total')} cancelled; TTFT avg ${ttftAvg.toFixed(3)} s; ` +
        `${total('generation_tokens_total')} tokens generated\n`,
    );
  } catch {
    // the metrics port went away: the demo is stopping
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`infermeter demo: ${(error as Error).message}\n`);
  process.exit(1);
});
