// Samples the container's resources on the collection period, off the request path: cgroup CPU
// and memory, network bytes from /proc/net/dev, and GPU/NPU usage where the vendor tool exists.
// Rates (CPU cores in use, network bytes per second) are the change between two samples.
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { readNvidia, readNpu, type AcceleratorReading, type RunTool } from './accelerators.ts';
import { readCgroup, readNetDev, type CgroupPaths } from './cgroup.ts';

export interface ContainerReading {
  readonly cpuUsedCores?: number;
  readonly cpuUtilPercent?: number;
  readonly memoryUsedMegabytes?: number;
  readonly memoryUtilPercent?: number;
  readonly networkReceiveBytesPerSecond?: number;
  readonly networkTransmitBytesPerSecond?: number;
  readonly gpu?: AcceleratorReading;
  readonly npu?: AcceleratorReading;
}

export interface ContainerSamplerOptions {
  readonly paths: CgroupPaths;
  /** CPUs of the host: the 100 % mark when the cgroup sets no CPU limit. */
  readonly hostCpus: number;
  /** Memory of the host: the 100 % mark when the cgroup sets no memory limit. */
  readonly hostMemoryBytes: number;
  /** Which vendor tools to ask (decided once at start: where a tool is absent its families are too). */
  readonly gpu: boolean;
  readonly npu: boolean;
  readonly run: RunTool;
  /** Milliseconds, monotonic. */
  readonly now: () => number;
}

export interface ContainerSampler {
  /** Takes a sample now; the gauges read latest(). */
  sample(): Promise<void>;
  latest(): ContainerReading;
}

const MB = 1024 * 1024;

export function createContainerSampler(options: ContainerSamplerOptions): ContainerSampler {
  let previous: { at: number; cpuSeconds: number | undefined; rx: number | undefined; tx: number | undefined } | undefined;
  let latest: ContainerReading = {};

  return {
    latest: () => latest,
    async sample() {
      const at = options.now();
      const [cgroup, net, gpu, npu] = await Promise.all([
        readCgroup(options.paths),
        readNetDev(options.paths.procRoot),
        options.gpu ? readNvidia(options.run) : undefined,
        options.npu ? readNpu(options.run) : undefined,
      ]);
      const reading: { -readonly [K in keyof ContainerReading]: ContainerReading[K] } = {};
      const seconds = previous === undefined ? 0 : (at - previous.at) / 1000;
      const rate = (now: number | undefined, before: number | undefined): number | undefined =>
        now === undefined || before === undefined || seconds <= 0 ? undefined : Math.max(0, now - before) / seconds;

      const cores = rate(cgroup?.cpuSeconds, previous?.cpuSeconds);
      if (cores !== undefined) {
        reading.cpuUsedCores = cores;
        reading.cpuUtilPercent = (cores / (cgroup?.cpuLimitCores ?? options.hostCpus)) * 100;
      }
      if (cgroup?.memoryBytes !== undefined) {
        reading.memoryUsedMegabytes = cgroup.memoryBytes / MB;
        reading.memoryUtilPercent = (cgroup.memoryBytes / (cgroup.memoryLimitBytes ?? options.hostMemoryBytes)) * 100;
      }
      const rx = rate(net?.rx, previous?.rx);
      const tx = rate(net?.tx, previous?.tx);
      if (rx !== undefined) reading.networkReceiveBytesPerSecond = rx;
      if (tx !== undefined) reading.networkTransmitBytesPerSecond = tx;
      if (gpu !== undefined) reading.gpu = gpu;
      if (npu !== undefined) reading.npu = npu;
      previous = { at, cpuSeconds: cgroup?.cpuSeconds, rx: net?.rx, tx: net?.tx };
      latest = reading;
    },
  };
}

/** Whether an executable of that name is on the PATH. */
export function onPath(command: string, path = process.env.PATH ?? ''): boolean {
  for (const dir of path.split(':')) {
    if (dir === '') continue;
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      // not in this directory
    }
  }
  return false;
}
