// Builds measured side by side in one process (bench/body-scan.ts, bench/skim.ts): each build's
// CPU for one round, the builds interleaved round by round (the order alternating, so that none
// always runs first), and the medians and each build's ratio to the first's, round by round.

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** CPU microseconds that `run` takes: not wall time, which on a shared machine counts other processes' turns. */
export function cpuMicros(run: () => void): number {
  const t0 = process.cpuUsage();
  run();
  const t = process.cpuUsage(t0);
  return t.user + t.system;
}

/** `rounds` rounds of each of `measures` (after one warm-up each): the median of each, and of each one's ratio to the first's. */
export function interleaved(measures: ReadonlyArray<() => number>, rounds: number): { medians: number[]; ratios: number[] } {
  for (const measure of measures) measure();
  const times = measures.map(() => [] as number[]);
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? measures.map((_, i) => i) : measures.map((_, i) => measures.length - 1 - i);
    for (const i of order) times[i]!.push(measures[i]!());
  }
  return { medians: times.map(median), ratios: times.slice(1).map((t) => median(t.map((x, r) => x / times[0]![r]!))) };
}
