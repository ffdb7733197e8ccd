// INFERMETER_WORKERS=auto in a real cgroup with a CPU quota: the test (as root) makes a cgroup
// (v2: cpu.max under /sys/fs/cgroup; v1: cpu.cfs_quota_us under the cpu controller), starts
// infermeter inside it and reads its start line. Where no cgroup can be made (not root, a
// read-only cgroupfs) the test says so and skips; under CI that is a failure.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it, type TestContext } from 'node:test';
import { readCpuQuota } from '../../src/metrics/container/cgroup.ts';
import { childEnv } from '../helpers/child-process.ts';

const CLI = fileURLToPath(new URL('../../bin/infermeter.js', import.meta.url));
const ROOT = '/sys/fs/cgroup';

interface TestCgroup {
  readonly dir: string;
  readonly version: 1 | 2;
  setQuota(quotaUs: number, periodUs: number): void;
}

/** A fresh cgroup with the cpu controller, removed after the test; or why none can be made. */
function makeCgroup(cleanups: Array<() => void | Promise<void>>, name: string): TestCgroup | string {
  if (process.getuid?.() !== 0) return 'not running as root';
  const v2 = existsSync(join(ROOT, 'cgroup.controllers'));
  const parent = v2 ? ROOT : ['cpu', 'cpu,cpuacct', 'cpuacct,cpu'].map((m) => join(ROOT, m)).find((d) => existsSync(join(d, 'cpu.cfs_quota_us')));
  if (parent === undefined) return `no cgroup v2 at ${ROOT} and no cgroup v1 cpu controller under it`;
  const dir = join(parent, `${name}-${process.pid}`);
  try {
    if (v2 && !readFileSync(join(ROOT, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('cpu'))
      writeFileSync(join(ROOT, 'cgroup.subtree_control'), '+cpu');
    mkdirSync(dir);
  } catch (error) {
    return `cannot make a cgroup at ${dir}: ${(error as Error).message}`;
  }
  // Removed after what the test started inside (hooks run in the order they were added).
  cleanups.push(async () => {
    // Whatever is still inside (workers that outlive their primary's exit by a moment) is ours:
    // killed by PID, and waited for (polled, with a deadline) until the cgroup is empty.
    const inside = (): string[] => readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
    for (const pid of inside()) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {}
    }
    for (const deadline = Date.now() + 10_000; inside().length > 0; ) {
      if (Date.now() > deadline) throw new Error(`processes ${inside().join(', ')} still in ${dir}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    rmdirSync(dir);
  });
  return {
    dir,
    version: v2 ? 2 : 1,
    setQuota(quotaUs, periodUs) {
      if (v2) writeFileSync(join(dir, 'cpu.max'), `${quotaUs} ${periodUs}`);
      else {
        writeFileSync(join(dir, 'cpu.cfs_period_us'), String(periodUs));
        writeFileSync(join(dir, 'cpu.cfs_quota_us'), String(quotaUs));
      }
    },
  };
}

/** infermeter started inside the cgroup (the shell moves itself in, then execs node); its start line and its stop. */
async function startInside(t: TestContext, cgroup: TestCgroup): Promise<Record<string, unknown>> {
  const child = spawn('/bin/sh', ['-c', 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"', 'sh', cgroup.dir, process.execPath, CLI], {
    env: childEnv({
      INFERMETER_WORKERS: 'auto',
      INFERMETER_UPSTREAM: 'http://127.0.0.1:9',
      INFERMETER_PORT: '0',
      INFERMETER_MANAGEMENT_PORT: '0',
      INFERMETER_METRICS_PORT: '0',
      INFERMETER_UPSTREAM_METRICS: 'off',
    }),
  });
  const exited = once(child, 'exit');
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM'); // drains; workers may outlive it a moment (the cgroup's cleanup waits)
      await exited;
    }
  });
  let text = '';
  let stdout = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  return new Promise((resolve, reject) => {
    child.stderr.on('data', (c: Buffer) => {
      text += c.toString();
      for (const line of text.split('\n')) {
        if (!line.startsWith('{')) continue;
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (parsed.msg === 'infermeter started') resolve(parsed);
      }
    });
    void exited.then(([code]) => reject(new Error(`infermeter exited (${String(code)}) before its start line:\n${text}${stdout}`)));
  });
}

// Each test starts infermeter in a cgroup of its own and waits for its start line: side by side.
describe('INFERMETER_WORKERS=auto in a cgroup with a CPU quota', { concurrency: true }, () => {
  it(`no quota: one worker per core of the host (${availableParallelism()} here)`, async (t) => {
    const cleanups: Array<() => void | Promise<void>> = [];
    const cgroup = makeCgroup(cleanups, 'infermeter-test-noquota');
    if (typeof cgroup === 'string') {
      assert.ok(process.env.CI === undefined, `under CI the cgroup test must run: ${cgroup}`);
      t.skip(`skipped: ${cgroup}`);
      return;
    }
    // The test's own cgroup may have a quota (a CI container): then there is no quota-free place to try.
    const inherited = readCpuQuota({ cgroupRoot: ROOT, procRoot: '/proc' });
    if (inherited !== undefined) {
      for (const c of cleanups) await c();
      t.skip(`skipped: this process runs under a CPU quota already (${inherited.source})`);
      return;
    }
    const starting = startInside(t, cgroup);
    t.after(async () => {
      for (const c of cleanups) await c();
    });
    const started = await starting;
    assert.equal(started.workers, availableParallelism());
    assert.equal(started.workers_from, `${availableParallelism()} CPU${availableParallelism() === 1 ? '' : 's'} of the host (no cgroup CPU quota)`);
  });

  for (const { quota, period, workers } of [
    { quota: 50_000, period: 100_000, workers: 1 },
    { quota: 150_000, period: 100_000, workers: Math.min(2, availableParallelism()) },
  ]) {
    it(`${quota / period} CPU: ${workers} worker${workers === 1 ? '' : 's'}, and the start line says the quota was read`, async (t) => {
      const cleanups: Array<() => void | Promise<void>> = [];
      const cgroup = makeCgroup(cleanups, `infermeter-test-${quota}`);
      if (typeof cgroup === 'string') {
        assert.ok(process.env.CI === undefined, `under CI the cgroup test must run: ${cgroup}`);
        t.skip(`skipped: ${cgroup}`);
        return;
      }
      cgroup.setQuota(quota, period);
      const starting = startInside(t, cgroup); // adds the child's stop to the hooks first
      t.after(async () => {
        for (const c of cleanups) await c();
      });
      const started = await starting;
      assert.equal(started.workers, workers);
      const file = cgroup.version === 2 ? `cpu.max ${quota} ${period}` : `cpu.cfs_quota_us ${quota} / cpu.cfs_period_us ${period}`;
      assert.match(String(started.workers_from), new RegExp(`^CPU quota of ${quota / period} CPU from cgroup v${cgroup.version} ${file} \\(${cgroup.dir}`));
    });
  }
});
