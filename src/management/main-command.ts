// What the container runs, for its HEALTHCHECK: the image's entry point is `node ... dist/cli.js
// [command]`, and `docker run IMAGE sim` makes it the simulator, which listens where its own
// flags say, not on infermeter's management port. The probe is a process of its own, so it reads
// the command line of the container's main process from procfs: PID 1, or under a container's
// init (`docker run --init`: tini) the lowest PID running infermeter's entry point.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The inits of `docker run --init` (tini as docker-init), `podman run --init` (catatonit) and common images. */
const INITS = /(?:^|\/)(?:docker-init|tini|catatonit|dumb-init)$/;
const ENTRY = /(?:^|\/)(?:dist\/cli\.js|src\/cli\.ts|bin\/infermeter\.js)$/;

function argv(procRoot: string, pid: string): string[] | undefined {
  try {
    const args = readFileSync(join(procRoot, pid, 'cmdline'), 'latin1').split('\0');
    if (args.at(-1) === '') args.pop(); // each argument ends with a NUL
    return args;
  } catch {
    return undefined;
  }
}

/** The arguments after infermeter's entry point of the container's main process; undefined where none runs it. */
export function mainCommandArgs(procRoot = '/proc', self = process.pid): string[] | undefined {
  const after = (args: string[] | undefined): string[] | undefined => {
    const i = args?.findIndex((a) => ENTRY.test(a)) ?? -1;
    return i < 0 ? undefined : args!.slice(i + 1);
  };
  const init = argv(procRoot, '1');
  const first = after(init);
  if (first !== undefined) return first;
  // Only under a container's init: on a host, PID 1 is the system's and any other infermeter
  // running there is not the one this probe is about.
  if (!INITS.test(init?.[0] ?? '')) return undefined;
  let pids: number[] = [];
  try {
    pids = readdirSync(procRoot)
      .filter((d) => /^\d+$/.test(d))
      .map(Number)
      .filter((pid) => pid !== self)
      .sort((a, b) => a - b);
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    const args = after(argv(procRoot, String(pid)));
    if (args !== undefined) return args;
  }
  return undefined;
}
