// `infermeter sim [--port N] [--host H]`: the simulated model server on its own, so that a
// newcomer can put infermeter in front of "a model server" without one. It serves what the
// demo's does (chat completions, completions, the Responses API, embeddings, /v1/models and a
// vLLM-style /metrics) until SIGINT/SIGTERM.
import { resolveListenAddress } from '../config/listen-addresses.ts';
import { startSimServer } from '../sim/model-server.ts';
import { SIM_MODELS, simTimings } from '../sim/sim-defaults.ts';

const SIM_DEFAULT_PORT = 8000;

export interface SimArguments {
  readonly host: string;
  readonly port: number;
}

/** `infermeter sim --help`. */
const SIM_HELP = [
  'infermeter sim [--port N] [--host H]: a simulated OpenAI-compatible model server',
  '  (chat completions, completions, the Responses API, embeddings, /v1/models, /metrics)',
  '',
  `  --port N   the port to listen on (default ${SIM_DEFAULT_PORT}; 0 picks a free one)`,
  '  --host H   the address to listen on (default 127.0.0.1; every address needs INFERMETER_ALLOW_ALL_ZERO_IP=1)',
  '',
  'Ctrl+C (SIGINT) or SIGTERM stops it.',
  '',
].join('\n');

/** Parses `--port N`, `--host H` (or `--port=N`), or `--help`; a message on anything else. */
export function parseSimArguments(args: readonly string[]): SimArguments | { readonly error: string } | { readonly help: string } {
  let host = '127.0.0.1';
  let port = SIM_DEFAULT_PORT;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--help' || arg === '-h') return { help: SIM_HELP };
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg : arg.slice(0, eq);
    if (name !== '--port' && name !== '--host') return { error: `unknown argument ${JSON.stringify(arg)}: infermeter sim takes --port N and --host H` };
    const value = eq === -1 ? args[++i] : arg.slice(eq + 1);
    if (value === undefined || value === '') return { error: `${name} needs a value` };
    if (name === '--host') host = value;
    else if (/^\d{1,5}$/.test(value) && Number(value) <= 65535) port = Number(value);
    else return { error: `--port expects an integer port from 0 to 65535 (0 picks a free port), got ${JSON.stringify(value)}` };
  }
  return { host, port };
}

/**
 * Starts the server and prints its URL; resolves with a function that stops it. A host that
 * listens on every address is refused, as the proxy refuses it, unless `allowAll`
 * (INFERMETER_ALLOW_ALL_ZERO_IP=1).
 */
export async function runSim(args: SimArguments, out: NodeJS.WritableStream, allowAll = false): Promise<() => Promise<void>> {
  const host = await resolveListenAddress(args.host, allowAll, '--host');
  const sim = await startSimServer({ models: SIM_MODELS, ...simTimings() }, host, args.port);
  out.write(
    [
      'infermeter sim: a simulated OpenAI-compatible model server',
      `  url     ${sim.url}  (models: ${SIM_MODELS.join(', ')})`,
      `  next    INFERMETER_UPSTREAM=${sim.url} npx infermeter   (clients then use http://127.0.0.1:1025/v1)`,
      'Ctrl+C stops it.',
      '',
    ].join('\n'),
  );
  return () => sim.close();
}
