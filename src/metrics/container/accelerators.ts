// GPU and NPU usage from the vendors' tools, where they exist: nvidia-smi's CSV query
// interface, and Huawei's npu-smi (`info -l` for the devices, `info -t usages -i <id>` per
// device, "Key : value" lines). Values are summed (memory) or averaged (utilisation) over the
// container's devices. A tool that is missing or fails gives no reading, never zeros.
import { execFile } from 'node:child_process';

export interface AcceleratorReading {
  /** Average utilisation over the devices, percent. */
  readonly utilPercent: number;
  readonly memoryUsedMegabytes: number;
  readonly memoryTotalMegabytes: number;
}

/** Runs a tool and resolves its stdout, or undefined when it is missing, fails or times out. */
export type RunTool = (command: string, args: readonly string[]) => Promise<string | undefined>;

export const runTool: RunTool = (command, args) =>
  new Promise((resolve) => {
    execFile(command, args, { timeout: 5000, maxBuffer: 1024 * 1024, encoding: 'utf8' }, (error, stdout) => {
      resolve(error === null ? stdout : undefined);
    });
  });

const NVIDIA_SMI_ARGS = ['--query-gpu=utilization.gpu,memory.used,memory.total', '--format=csv,noheader,nounits'] as const;

/** Parses `nvidia-smi --query-gpu=utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits`. */
export function parseNvidiaSmi(output: string): AcceleratorReading | undefined {
  const rows: number[][] = [];
  for (const line of output.split('\n')) {
    if (line.trim() === '') continue;
    const fields = line.split(',').map((f) => Number(f.trim()));
    if (fields.length !== 3 || fields.some((f) => !Number.isFinite(f))) return undefined; // "[N/A]" and the like
    rows.push(fields);
  }
  return combine(rows.map(([util, used, total]) => ({ util: util!, used: used!, total: total! })));
}

export async function readNvidia(run: RunTool): Promise<AcceleratorReading | undefined> {
  const out = await run('nvidia-smi', NVIDIA_SMI_ARGS);
  return out === undefined ? undefined : parseNvidiaSmi(out);
}

/** NPU ids from `npu-smi info -l` ("NPU ID : 0" lines). */
export function parseNpuList(output: string): number[] {
  return [...output.matchAll(/^\s*NPU ID\s*:\s*(\d+)\s*$/gm)].map((m) => Number(m[1]));
}

/** One device from `npu-smi info -t usages -i <id>`: AI Core usage and HBM capacity and usage. */
export function parseNpuUsages(output: string): { util: number; used: number; total: number } | undefined {
  const field = (key: string): number | undefined => {
    const m = new RegExp(`^\\s*${key.replace(/[()%]/g, '\\$&')}\\s*:\\s*([\\d.]+)\\s*$`, 'm').exec(output);
    return m === null ? undefined : Number(m[1]);
  };
  const util = field('Aicore Usage Rate(%)');
  const total = field('HBM Capacity(MB)');
  const rate = field('HBM Usage Rate(%)');
  if (util === undefined || total === undefined || rate === undefined) return undefined;
  return { util, used: (total * rate) / 100, total };
}

export async function readNpu(run: RunTool): Promise<AcceleratorReading | undefined> {
  const list = await run('npu-smi', ['info', '-l']);
  if (list === undefined) return undefined;
  const devices: Array<{ util: number; used: number; total: number }> = [];
  for (const id of parseNpuList(list)) {
    const out = await run('npu-smi', ['info', '-t', 'usages', '-i', String(id)]);
    const d = out === undefined ? undefined : parseNpuUsages(out);
    if (d === undefined) return undefined;
    devices.push(d);
  }
  return combine(devices);
}

function combine(devices: ReadonlyArray<{ util: number; used: number; total: number }>): AcceleratorReading | undefined {
  if (devices.length === 0) return undefined;
  let util = 0;
  let used = 0;
  let total = 0;
  for (const d of devices) {
    util += d.util;
    used += d.used;
    total += d.total;
  }
  return { utilPercent: util / devices.length, memoryUsedMegabytes: used, memoryTotalMegabytes: total };
}
