// Whether infermeter runs inside a container, and the evidence, for a start-time warning (a
// loopback address is unreachable through a published port). Read from the same roots the AOM
// container sampler reads (procfs, and the filesystem's root for the engines' marker files):
// Docker's /.dockerenv, Podman's /run/.containerenv, Kubernetes' service variables, the
// `container` variable systemd-nspawn and Podman set, or a container runtime's path in
// /proc/self/cgroup (v1 and v2 without a cgroup namespace).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ContainerProbe {
  /** The filesystem's root (default /). */
  readonly root: string;
  /** Where procfs is mounted (default /proc). */
  readonly procRoot: string;
  readonly env: Readonly<Record<string, string | undefined>>;
}

const RUNTIME_PATH = /\/(docker|kubepods|containerd|libpod|crio|lxc|actions_job)[/.-]/;

/** The evidence that this process runs in a container, or undefined when none is found. */
export function containerEvidence({ root, procRoot, env }: ContainerProbe): string | undefined {
  for (const marker of ['.dockerenv', 'run/.containerenv']) if (existsSync(join(root, marker))) return `/${marker}`;
  if (env.KUBERNETES_SERVICE_HOST !== undefined && env.KUBERNETES_SERVICE_HOST !== '') return 'KUBERNETES_SERVICE_HOST is set';
  if (env.container !== undefined && env.container !== '') return `container=${env.container}`;
  let cgroup = '';
  try {
    cgroup = readFileSync(join(procRoot, 'self/cgroup'), 'utf8');
  } catch {
    return undefined;
  }
  const m = RUNTIME_PATH.exec(cgroup);
  return m === null ? undefined : `/proc/self/cgroup names ${m[1]}`;
}
