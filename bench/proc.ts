// Readings of processes from /proc: CPU time (user + system) and resident memory.
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // CLK_TCK on Linux

/**
 * CPU seconds (user + system) used so far by the processes: the scheduler's own count per thread
 * (`se.sum_exec_runtime` in /proc/<pid>/task/<tid>/sched, nanoseconds), or where the kernel does
 * not show it, /proc/<pid>/stat's utime + stime, in 10 ms ticks: too coarse for a run of a few
 * hundred milliseconds (one tick is 7 µs per request of a 1500-request round trip).
 */
export function cpuSeconds(pids: readonly number[]): number {
  let seconds = 0;
  for (const pid of pids) seconds += schedSeconds(pid) ?? statSeconds(pid);
  return seconds;
}

function schedSeconds(pid: number): number | undefined {
  let ms = 0;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const m = /se\.sum_exec_runtime\s*:\s*([\d.]+)/.exec(readFileSync(`/proc/${pid}/task/${tid}/sched`, 'utf8'));
      if (m === null) return undefined;
      ms += Number(m[1]);
    }
  } catch (error) {
    // A thread that ended between the listing and the read: its time is gone either way.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' && ms > 0) return ms / 1000;
    return undefined;
  }
  return ms / 1000;
}

function statSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces): state is field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND; // utime, stime (fields 14 and 15)
}

/** Resident set size in bytes, summed over the processes. */
export function rssBytes(pids: readonly number[]): number {
  let total = 0;
  for (const pid of pids) {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    total += Number(m?.[1] ?? 0) * 1024;
  }
  return total;
}

/** The children of a process (nginx's workers). */
export function childPids(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === pid) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}

/**
 * The resident set a process keeps after glibc hands its free pages back (malloc_trim(0), called
 * in the process through gdb): what is left is what the process really holds, the difference is
 * memory it freed that the allocator kept. Undefined where gdb is missing or may not attach.
 */
export function trimmedRssBytes(pid: number): number | undefined {
  const r = spawnSync('gdb', ['-p', String(pid), '-batch', '-nx', '-ex', 'call (int)malloc_trim(0)'], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
  if (r.status !== 0 || !/\$1 = [01]/.test(r.stdout.toString())) return undefined;
  return rssBytes([pid]);
}
