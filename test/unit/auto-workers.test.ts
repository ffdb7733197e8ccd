// INFERMETER_WORKERS=auto from the cgroup's CPU quota (fixture trees of cgroup v1 and v2), else
// the host's cores; the real cgroup is tried in test/integration/cpu-quota.test.ts.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { autoWorkers } from '../../src/config/auto-workers.ts';
import { loadConfig } from '../../src/config/config.ts';
import { readCpuQuota } from '../../src/metrics/container/cgroup.ts';

const FIXTURES = fileURLToPath(new URL('../../fixtures/container/', import.meta.url));
const paths = (name: string) => ({ cgroupRoot: join(FIXTURES, name, 'sys/fs/cgroup'), procRoot: join(FIXTURES, name, 'proc') });

describe('the cgroup CPU quota', () => {
  it('reads cgroup v2 cpu.max', () => {
    const quota = readCpuQuota(paths('cgroup-v2'));
    assert.equal(quota?.cores, 2);
    assert.match(quota!.source, /^cgroup v2 cpu\.max 200000 100000 \(.*cpu\.max\)$/);
  });

  it('takes the tightest level of the hierarchy: a parent slice limits its service', () => {
    const quota = readCpuQuota(paths('cgroup-v2-nested'));
    assert.equal(quota?.cores, 0.5);
    assert.match(quota!.source, /system\.slice\/cpu\.max\)$/);
  });

  it('reads cgroup v1 cfs quota / period, from the controller root when the own path is absent', () => {
    const quota = readCpuQuota(paths('cgroup-v1'));
    assert.equal(quota?.cores, 1.5);
    assert.match(quota!.source, /^cgroup v1 cpu\.cfs_quota_us 150000 \/ cpu\.cfs_period_us 100000/);
  });

  it('gives nothing where no level sets a quota (-1, max) or there is no cgroup', () => {
    assert.equal(readCpuQuota(paths('cgroup-v1-unlimited')), undefined);
    assert.equal(readCpuQuota({ cgroupRoot: join(FIXTURES, 'none'), procRoot: join(FIXTURES, 'none') }), undefined);
  });
});

describe('INFERMETER_WORKERS=auto', () => {
  const quota = (cores: number) => ({ cores, source: 'test' });

  it('rounds the quota up, at least one, at most the cores', () => {
    assert.equal(autoWorkers(64, quota(0.5), 256).workers, 1);
    assert.equal(autoWorkers(64, quota(0.01), 256).workers, 1);
    assert.equal(autoWorkers(64, quota(1.5), 256).workers, 2);
    assert.equal(autoWorkers(64, quota(2), 256).workers, 2);
    assert.equal(autoWorkers(2, quota(8), 256).workers, 2);
    assert.equal(autoWorkers(512, undefined, 256).workers, 256);
  });

  it('says which it read', () => {
    assert.equal(autoWorkers(2, undefined, 256).from, '2 CPUs of the host (no cgroup CPU quota)');
    assert.equal(autoWorkers(64, quota(0.5), 256).from, 'CPU quota of 0.5 CPU from test');
    assert.match(autoWorkers(2, quota(8), 256).from, /capped at the host's 2 CPUs/);
  });

  it('is what the configuration reads: one worker under half a CPU, two on a 2-core host without a quota', () => {
    const env = { INFERMETER_WORKERS: 'auto' };
    const half = loadConfig(env, { cpuQuota: () => readCpuQuota(paths('cgroup-v2-nested')), hostCpus: 2 });
    assert.equal(half.workers, 1);
    assert.match(half.workersFrom!, /^CPU quota of 0\.5 CPU from cgroup v2 cpu\.max 50000 100000/);
    const none = loadConfig(env, { cpuQuota: () => undefined, hostCpus: 2 });
    assert.equal(none.workers, 2);
    assert.equal(none.workersFrom, '2 CPUs of the host (no cgroup CPU quota)');
    assert.equal(loadConfig({ INFERMETER_WORKERS: '3' }).workersFrom, undefined);
  });
});
