// Child processes a test starts: killed in teardown if still running, and their output read whole.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));

/**
 * A child's environment: only PATH and `env`, and the suite's compile cache, NODE_COMPILE_CACHE,
 * where `npm test` set one (it changes nothing but load time: a node started under a shell, npm
 * or prlimit gets it too).
 */
export function childEnv(env: Readonly<Record<string, string | undefined>>): Record<string, string | undefined> {
  const cache = process.env.NODE_COMPILE_CACHE;
  return { PATH: process.env.PATH ?? '', ...(cache === undefined ? {} : { NODE_COMPILE_CACHE: cache }), ...env };
}

/** `node` (this one by default) running `args`, with `childEnv(env)`; killed at the test's end. */
export function spawnNode(
  t: TestContext,
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  node = process.execPath,
): ChildProcessWithoutNullStreams {
  const child = spawn(node, args, { env: childEnv(env) });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return child;
}

/**
 * The command (src/cli.ts) on ports the system picks, the engine's metrics not read, and `env`
 * (its upstream, its workers, the feature under test); killed at the test's end.
 */
export function spawnCli(t: TestContext, env: Readonly<Record<string, string | undefined>>): ChildProcessWithoutNullStreams {
  return spawnNode(t, [CLI], {
    INFERMETER_PORT: '0',
    INFERMETER_MANAGEMENT_PORT: '0',
    INFERMETER_METRICS_PORT: '0',
    INFERMETER_UPSTREAM_METRICS: 'off',
    ...env,
  });
}

/** Resolves with the first line of `stream` (from now on) that matches. */
export function lineMatching(stream: NodeJS.ReadableStream, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString();
      const line = buffered.split('\n').find((l) => pattern.test(l));
      if (line === undefined) return;
      stream.off('data', onData);
      resolve(line);
    };
    stream.on('data', onData);
    stream.once('end', () => reject(new Error(`stream ended without ${pattern}: ${buffered}`)));
  });
}

/** All of a stream's text, once it ends. */
export async function collect(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream) text += chunk.toString();
  return text;
}
