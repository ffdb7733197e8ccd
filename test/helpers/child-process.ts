// Child processes a test starts: killed in teardown if still running, and their output read whole.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import type { TestContext } from 'node:test';

/**
 * `node` (this one by default) running `args`, with only PATH and `env` (and the suite's compile
 * cache, NODE_COMPILE_CACHE, where `npm test` set one: it changes nothing but load time); killed
 * at the test's end.
 */
export function spawnNode(
  t: TestContext,
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  node = process.execPath,
): ChildProcessWithoutNullStreams {
  const cache = process.env.NODE_COMPILE_CACHE;
  const child = spawn(node, args, { env: { PATH: process.env.PATH ?? '', ...(cache === undefined ? {} : { NODE_COMPILE_CACHE: cache }), ...env } });
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
