// Readings of processes from /proc: CPU time (user + system) and resident memory.
import { readFileSync, readdirSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // CLK_TCK on Linux

/** CPU seconds (user + system) used so far by the processes. */
export function cpuSeconds(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces): state is field 3.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
  }
  return ticks / TICKS_PER_SECOND;
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
