// Child processes a test starts: killed in teardown if still running, and their output read whole.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import type { TestContext } from 'node:test';

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

/** All of a stream's text, once it ends. */
export async function collect(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream) text += chunk.toString();
  return text;
}
