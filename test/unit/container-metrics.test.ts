import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it, type TestContext } from 'node:test';
import { parseNpuList, parseNpuUsages, parseNvidiaSmi, type RunTool } from '../../src/metrics/container/accelerators.ts';
import { readCgroup } from '../../src/metrics/container/cgroup.ts';
import { createContainerSampler, onPath } from '../../src/metrics/container/container-sampler.ts';

const FIXTURES = fileURLToPath(new URL('../../fixtures/container/', import.meta.url));
const MiB = 1024 * 1024;
const fixture = (name: string) => readFileSync(join(FIXTURES, name), 'utf8');

/** A writable copy of a fixture tree, removed after the test. */
function tree(t: TestContext, name: string): { cgroupRoot: string; procRoot: string; root: string } {
  const root = mkdtempSync(join(tmpdir(), 'infermeter-cgroup-'));
  cpSync(join(FIXTURES, name), root, { recursive: true });
  t.after(() => rmSync(root, { recursive: true, force: true, maxRetries: 5 }));
  return { root, cgroupRoot: join(root, 'sys/fs/cgroup'), procRoot: join(root, 'proc') };
}

const noTools: RunTool = async () => undefined;

describe('cgroup readers', () => {
  it('reads cgroup v2: CPU time, quota, working set and limit', async (t) => {
    const paths = tree(t, 'cgroup-v2');
    assert.deepEqual(await readCgroup(paths), {
      version: 2,
      cpuSeconds: 5,
      cpuLimitCores: 2,
      memoryBytes: 1024 * MiB - 256 * MiB,
      memoryLimitBytes: 4096 * MiB,
    });
  });

  it('reads cgroup v1, falling back to the controller root, with no memory limit', async (t) => {
    const paths = tree(t, 'cgroup-v1');
    assert.deepEqual(await readCgroup(paths), {
      version: 1,
      cpuSeconds: 2,
      cpuLimitCores: 1.5,
      memoryBytes: 512 * MiB - 64 * MiB,
      memoryLimitBytes: undefined,
    });
  });

  it('gives nothing where there is no cgroup', async (t) => {
    const root = mkdtempSync(join(tmpdir(), 'infermeter-empty-'));
    t.after(() => rmSync(root, { recursive: true, force: true, maxRetries: 5 }));
    assert.equal(await readCgroup({ cgroupRoot: root, procRoot: root }), undefined);
  });
});

describe('container sampler', () => {
  it('computes cores, utilisation and network rates between two samples (v2 limits)', async (t) => {
    const paths = tree(t, 'cgroup-v2');
    let now = 0;
    const sampler = createContainerSampler({ paths, hostCpus: 8, hostMemoryBytes: 16384 * MiB, gpu: false, npu: false, run: noTools, now: () => now });
    await sampler.sample();
    assert.deepEqual(sampler.latest(), { memoryUsedMegabytes: 768, memoryUtilPercent: 18.75 }, 'levels at once, no rates yet');
    // 10 s later: 15 s more CPU time (1.5 cores of the 2 allowed), 2 MB in and 1 MB out.
    writeFileSync(join(paths.cgroupRoot, 'cpu.stat'), 'usage_usec 20000000\n');
    const dev = readFileSync(join(paths.procRoot, 'net/dev'), 'utf8').replace('eth0: 1000000', 'eth0: 3000000').replace('   500000  ', '  1500000  ');
    writeFileSync(join(paths.procRoot, 'net/dev'), dev);
    now = 10_000;
    await sampler.sample();
    assert.deepEqual(sampler.latest(), {
      cpuUsedCores: 1.5,
      cpuUtilPercent: 75,
      memoryUsedMegabytes: 768,
      memoryUtilPercent: 18.75,
      networkReceiveBytesPerSecond: 200_000,
      networkTransmitBytesPerSecond: 100_000,
    });
  });

  it('uses the host as the 100 % mark where the cgroup sets no limit (v1)', async (t) => {
    const paths = tree(t, 'cgroup-v1');
    let now = 0;
    const sampler = createContainerSampler({ paths, hostCpus: 4, hostMemoryBytes: 4096 * MiB, gpu: false, npu: false, run: noTools, now: () => now });
    await sampler.sample();
    writeFileSync(join(paths.cgroupRoot, 'cpuacct/cpuacct.usage'), '7000000000\n');
    now = 5_000;
    await sampler.sample();
    const r = sampler.latest();
    assert.equal(r.cpuUsedCores, 1);
    assert.equal(r.cpuUtilPercent, (1 / 1.5) * 100, 'the CFS quota is the limit');
    assert.equal(r.memoryUsedMegabytes, 448);
    assert.equal(r.memoryUtilPercent, (448 / 4096) * 100, 'no memory limit: the host memory');
  });

  it('reads GPUs from nvidia-smi and NPUs from npu-smi', async (t) => {
    const paths = tree(t, 'cgroup-v2');
    const calls: string[] = [];
    const run: RunTool = async (command, args) => {
      calls.push(`${command} ${args.join(' ')}`);
      if (command === 'nvidia-smi') return fixture('nvidia-smi.csv');
      if (args.join(' ') === 'info -l') return fixture('npu-smi-info-l.txt');
      return fixture(`npu-smi-usages-${args.at(-1)}.txt`);
    };
    const sampler = createContainerSampler({ paths, hostCpus: 8, hostMemoryBytes: 1, gpu: true, npu: true, run, now: () => 0 });
    await sampler.sample();
    assert.deepEqual(sampler.latest().gpu, { utilPercent: 30, memoryUsedMegabytes: 12288, memoryTotalMegabytes: 163840 });
    assert.deepEqual(sampler.latest().npu, { utilPercent: 50, memoryUsedMegabytes: 32768, memoryTotalMegabytes: 65536 });
    assert.ok(calls.includes('nvidia-smi --query-gpu=utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits'));
  });

  it('a tool that fails gives no reading rather than zeros', async (t) => {
    const paths = tree(t, 'cgroup-v2');
    const sampler = createContainerSampler({ paths, hostCpus: 8, hostMemoryBytes: 1, gpu: true, npu: true, run: noTools, now: () => 0 });
    await sampler.sample();
    assert.equal(sampler.latest().gpu, undefined);
    assert.equal(sampler.latest().npu, undefined);
  });
});

describe('accelerator output parsers', () => {
  it('parse the documented shapes and refuse unusable values', () => {
    assert.equal(parseNvidiaSmi('[N/A], 100, 200\n'), undefined);
    assert.equal(parseNvidiaSmi(''), undefined);
    assert.deepEqual(parseNpuList(fixture('npu-smi-info-l.txt')), [0, 1]);
    assert.deepEqual(parseNpuUsages(fixture('npu-smi-usages-0.txt')), { util: 40, used: 8192, total: 32768 });
    assert.equal(parseNpuUsages('NPU ID : 0\n'), undefined);
  });

  it('finds executables on the PATH', () => {
    assert.equal(onPath('sh'), true);
    assert.equal(onPath('surely-not-a-command-here'), false);
  });
});
