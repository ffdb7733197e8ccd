// The container's CPU time and memory from its cgroup: v2 (unified) first, v1 as the fallback,
// with the cgroup's limits as the 100 % mark (or undefined where the cgroup sets none).
// The process's own cgroup path is taken from /proc/self/cgroup; inside a container that path
// often does not exist in its mount namespace, so the controller's root is tried next.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export interface CgroupReading {
  readonly version: 1 | 2;
  /** Cumulative CPU time of the cgroup, in seconds. */
  readonly cpuSeconds: number | undefined;
  /** CPU limit in cores (quota / period), undefined when unlimited. */
  readonly cpuLimitCores: number | undefined;
  /** Memory in use, as the working set: usage minus inactive file cache (what kubelet reports). */
  readonly memoryBytes: number | undefined;
  /** Memory limit in bytes, undefined when unlimited. */
  readonly memoryLimitBytes: number | undefined;
}

export interface CgroupPaths {
  /** Where cgroupfs is mounted (default /sys/fs/cgroup). */
  readonly cgroupRoot: string;
  /** Where procfs is mounted (default /proc). */
  readonly procRoot: string;
}

// v1 reports "no limit" as a page-aligned LONG_MAX; anything this large is no limit.
const UNLIMITED_BYTES = 2 ** 60;

async function text(path: string): Promise<string | undefined> {
  try {
    return (await readFile(path, 'utf8')).trim();
  } catch {
    return undefined;
  }
}

async function firstText(dirs: readonly string[], file: string): Promise<string | undefined> {
  for (const dir of dirs) {
    const t = await text(join(dir, file));
    if (t !== undefined) return t;
  }
  return undefined;
}

function num(t: string | undefined): number | undefined {
  if (t === undefined || !/^-?\d+$/.test(t)) return undefined;
  return Number(t);
}

function statField(stat: string | undefined, key: string): number | undefined {
  if (stat === undefined) return undefined;
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(stat);
  return m === null ? undefined : Number(m[1]);
}

/** Controller -> path in the hierarchy, from /proc/self/cgroup ("" is the v2 unified entry). */
async function ownPaths(procRoot: string): Promise<Map<string, string>> {
  const paths = new Map<string, string>();
  const t = await text(join(procRoot, 'self/cgroup'));
  for (const line of t?.split('\n') ?? []) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (m === null) continue;
    for (const controller of m[1]!.split(',')) paths.set(controller, m[2]!);
  }
  return paths;
}

export async function readCgroup({ cgroupRoot, procRoot }: CgroupPaths): Promise<CgroupReading | undefined> {
  const own = await ownPaths(procRoot);
  if ((await text(join(cgroupRoot, 'cgroup.controllers'))) !== undefined) {
    const dirs = [join(cgroupRoot, own.get('') ?? '/'), cgroupRoot];
    const usec = statField(await firstText(dirs, 'cpu.stat'), 'usage_usec');
    const max = (await firstText(dirs, 'cpu.max'))?.split(/\s+/);
    const quota = max?.[0] === undefined || max[0] === 'max' ? undefined : Number(max[0]);
    const period = Number(max?.[1] ?? 100000);
    const current = num(await firstText(dirs, 'memory.current'));
    const inactive = statField(await firstText(dirs, 'memory.stat'), 'inactive_file') ?? 0;
    const limit = await firstText(dirs, 'memory.max');
    return {
      version: 2,
      cpuSeconds: usec === undefined ? undefined : usec / 1e6,
      cpuLimitCores: quota === undefined || !(period > 0) ? undefined : quota / period,
      memoryBytes: current === undefined ? undefined : Math.max(0, current - inactive),
      memoryLimitBytes: limit === undefined || limit === 'max' ? undefined : unlimitedAsUndefined(num(limit)),
    };
  }
  const v1 = (controller: string, mount: string): string[] => [join(cgroupRoot, mount, own.get(controller) ?? '/'), join(cgroupRoot, mount)];
  const cpuacct = [...v1('cpuacct', 'cpuacct'), ...v1('cpuacct', 'cpu,cpuacct')];
  const cpu = [...v1('cpu', 'cpu'), ...v1('cpu', 'cpu,cpuacct')];
  const memory = v1('memory', 'memory');
  const usageNs = num(await firstText(cpuacct, 'cpuacct.usage'));
  const quota = num(await firstText(cpu, 'cpu.cfs_quota_us'));
  const period = num(await firstText(cpu, 'cpu.cfs_period_us'));
  const usage = num(await firstText(memory, 'memory.usage_in_bytes'));
  const inactive = statField(await firstText(memory, 'memory.stat'), 'total_inactive_file') ?? 0;
  if (usageNs === undefined && usage === undefined) return undefined;
  return {
    version: 1,
    cpuSeconds: usageNs === undefined ? undefined : usageNs / 1e9,
    cpuLimitCores: quota === undefined || quota < 0 || period === undefined || period <= 0 ? undefined : quota / period,
    memoryBytes: usage === undefined ? undefined : Math.max(0, usage - inactive),
    memoryLimitBytes: unlimitedAsUndefined(num(await firstText(memory, 'memory.limit_in_bytes'))),
  };
}

function unlimitedAsUndefined(bytes: number | undefined): number | undefined {
  return bytes === undefined || bytes >= UNLIMITED_BYTES ? undefined : bytes;
}

/** Bytes received and sent over every interface but loopback, from /proc/net/dev. */
export async function readNetDev(procRoot: string): Promise<{ rx: number; tx: number } | undefined> {
  const t = await text(join(procRoot, 'net/dev'));
  if (t === undefined) return undefined;
  let rx = 0;
  let tx = 0;
  for (const line of t.split('\n').slice(2)) {
    const m = /^\s*([^:]+):\s*(.*)$/.exec(line);
    if (m === null || m[1]!.trim() === 'lo') continue;
    const fields = m[2]!.trim().split(/\s+/).map(Number);
    rx += fields[0] ?? 0;
    tx += fields[8] ?? 0;
  }
  return { rx, tx };
}

/** The CPU quota a process may use, in cores, and where it was read (for the start line). */
export interface CpuQuota {
  readonly cores: number;
  /** e.g. `cgroup v2 cpu.max 50000 100000 (/sys/fs/cgroup/x)`. */
  readonly source: string;
}

function textSync(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** The process's cgroup directory and every ancestor up to the controller's root (most nested first). */
function ancestry(root: string, own: string | undefined): string[] {
  const dirs: string[] = [];
  let path = own ?? '/';
  for (;;) {
    dirs.push(join(root, path));
    if (path === '/' || path === '') break;
    path = dirname(path);
  }
  return dirs;
}

/**
 * The tightest CPU quota on the process's cgroup and its ancestors (the kernel enforces each),
 * read synchronously: the configuration is read once at start, before anything else runs.
 * cgroup v2's `cpu.max`, else v1's `cpu.cfs_quota_us` / `cpu.cfs_period_us`; undefined when no
 * level sets one. Inside a container the process's own path is often absent from its mount
 * namespace (the container's cgroup is the mount's root): absent levels are skipped.
 */
export function readCpuQuota({ cgroupRoot, procRoot }: CgroupPaths): CpuQuota | undefined {
  const own = new Map<string, string>();
  for (const line of textSync(join(procRoot, 'self/cgroup'))?.split('\n') ?? []) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (m !== null) for (const controller of m[1]!.split(',')) own.set(controller, m[2]!);
  }
  let best: CpuQuota | undefined;
  const consider = (cores: number, source: string): void => {
    if (cores > 0 && Number.isFinite(cores) && (best === undefined || cores < best.cores)) best = { cores, source };
  };
  if (textSync(join(cgroupRoot, 'cgroup.controllers')) !== undefined) {
    for (const dir of ancestry(cgroupRoot, own.get(''))) {
      const max = textSync(join(dir, 'cpu.max'));
      const m = max === undefined ? null : /^(\d+)\s+(\d+)$/.exec(max);
      if (m !== null) consider(Number(m[1]) / Number(m[2]), `cgroup v2 cpu.max ${m[1]} ${m[2]} (${join(dir, 'cpu.max')})`);
    }
    return best;
  }
  for (const mount of ['cpu', 'cpu,cpuacct', 'cpuacct,cpu']) {
    for (const dir of ancestry(join(cgroupRoot, mount), own.get('cpu'))) {
      const quota = num(textSync(join(dir, 'cpu.cfs_quota_us')));
      const period = num(textSync(join(dir, 'cpu.cfs_period_us')));
      if (quota !== undefined && quota > 0 && period !== undefined && period > 0) {
        consider(quota / period, `cgroup v1 cpu.cfs_quota_us ${quota} / cpu.cfs_period_us ${period} (${dir})`);
      }
    }
  }
  return best;
}
