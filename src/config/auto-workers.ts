// INFERMETER_WORKERS=auto: one worker per CPU the process may use. availableParallelism() counts
// the host's cores (and the CPU affinity mask), not a container's CPU quota: under
// `--cpus 0.5` on a 64-core host it says 64. Like Go's runtime and the JVM, the quota is read
// from the cgroup, rounded up (half a CPU is still one worker), and never above the cores.
import type { CpuQuota } from '../metrics/container/cgroup.ts';

export interface AutoWorkers {
  readonly workers: number;
  /** What the count came from, for the start line. */
  readonly from: string;
}

/** Workers for `auto`, at most `max`: the quota rounded up (at least 1) when there is one, else the cores. */
export function autoWorkers(hostCpus: number, quota: CpuQuota | undefined, max: number): AutoWorkers {
  const cores = Math.max(1, hostCpus);
  if (quota === undefined) return { workers: Math.min(max, cores), from: `${cores} CPU${cores === 1 ? '' : 's'} of the host (no cgroup CPU quota)` };
  const workers = Math.min(max, cores, Math.max(1, Math.ceil(quota.cores - 1e-9)));
  return {
    workers,
    from: `CPU quota of ${Number(quota.cores.toFixed(3))} CPU from ${quota.source}${workers === cores && quota.cores > cores ? `, capped at the host's ${cores} CPUs` : ''}`,
  };
}
