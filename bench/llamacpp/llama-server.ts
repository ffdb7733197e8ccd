// Starts a llama.cpp llama-server the caller built (LLAMA_SERVER) on a GGUF (LLAMA_MODEL) on a
// free loopback port, and waits until it answers /health. infermeter commits no llama.cpp code or
// build: bench/llamacpp.ts and test/integration/llamacpp.test.ts run against one you have.
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from '../targets.ts';

export interface LlamaServer {
  readonly url: string;
  readonly child: ChildProcess;
  /** What the server printed (its log), for a failure message. */
  log(): string;
  stop(): Promise<void>;
}

export interface LlamaServerOptions {
  readonly binary: string;
  readonly model: string;
  /** Parallel slots (-np); the context (-c) is shared among them. */
  readonly slots?: number;
  readonly context?: number;
  readonly threads?: number;
  /** The name /v1/models lists (--alias). */
  readonly alias?: string;
}

/** LLAMA_SERVER and LLAMA_MODEL, or why they cannot be used. */
export function llamaFromEnv(env: NodeJS.ProcessEnv = process.env): { binary: string; model: string } | string {
  const binary = env.LLAMA_SERVER;
  const model = env.LLAMA_MODEL;
  if (binary === undefined || binary === '') return 'LLAMA_SERVER (the path of a llama.cpp llama-server binary) is not set';
  if (model === undefined || model === '') return 'LLAMA_MODEL (the path of a GGUF model, e.g. one written by bench/llamacpp/tiny-gguf.py) is not set';
  return { binary, model };
}

export async function startLlamaServer(options: LlamaServerOptions): Promise<LlamaServer> {
  const port = await freePort();
  const args = [
    '-m',
    options.model,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '-np',
    String(options.slots ?? 4),
    '-c',
    String(options.context ?? 4096),
    '-t',
    String(options.threads ?? 2),
    '--metrics',
    // A prompt longer than a slot's context is refused (an in-stream `error:` line), not shifted.
    '--no-context-shift',
    ...(options.alias === undefined ? [] : ['--alias', options.alias]),
  ];
  const child = spawn(options.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const keep = (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  // Ready when /health answers 200 (503 while the model loads); bounded: 600 tries, 100 ms apart.
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`llama-server exited with ${child.exitCode}: ${log}`);
    try {
      const res = await fetch(`${url}/health`);
      await res.body?.cancel();
      if (res.status === 200) return { url, child, log: () => log, stop };
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await stop();
  throw new Error(`llama-server did not become ready within 60 s: ${log}`);
}
