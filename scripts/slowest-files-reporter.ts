// A node:test reporter, beside the spec reporter in `npm test` (scripts/test.ts): at the end of
// the run, the ten test files that took longest, so that a file that doubles is seen. A file's
// time is its own process's, from start to end, as the runner reports it (the `test:complete`
// of the file itself, nesting 0, named by its path); a file run in the runner's own process
// (`--test-isolation=none`) has none, so the sum of its top-level tests is shown instead.
import { writeFileSync } from 'node:fs';
import { relative } from 'node:path';

type Event = { type: string; data: { name?: string; file?: string; nesting?: number; details?: { duration_ms?: number } } };

const LINGER_MS = 5000;

export default async function* slowestFiles(source: AsyncIterable<Event>): AsyncGenerator<string> {
  const whole = new Map<string, number>();
  const summed = new Map<string, number>();
  for await (const event of source) {
    if (event.type !== 'test:complete') continue;
    const { name, file, nesting, details } = event.data;
    const ms = details?.duration_ms;
    if (nesting !== 0 || !file || ms === undefined) continue;
    if (name !== undefined && file.endsWith(name)) whole.set(file, ms);
    else summed.set(file, (summed.get(file) ?? 0) + ms);
  }
  const times = new Map(summed);
  for (const [file, ms] of whole) times.set(file, ms);
  // Under npm test (scripts/test.ts), each run's times go to the file it names, and it lists the
  // slowest of all its runs at once.
  if (process.env.TEST_FILE_TIMES !== undefined) {
    writeFileSync(process.env.TEST_FILE_TIMES, JSON.stringify(Object.fromEntries([...times].map(([file, ms]) => [relative(process.cwd(), file), ms]))));
    return;
  }
  if (times.size === 0) return;
  // TEST_SLOWEST_FILES=N shows N files instead of ten (to see where a suite's time goes).
  const shown = Number(process.env.TEST_SLOWEST_FILES ?? 10) || 10;
  const slowest = [...times].sort((a, b) => b[1] - a[1]).slice(0, shown);
  const total = [...times.values()].reduce((a, b) => a + b, 0);
  let out = `\nThe slowest ${slowest.length} of ${times.size} test files (${(total / 1000).toFixed(1)} s of file time in all):\n`;
  for (const [file, ms] of slowest) out += `${(ms / 1000).toFixed(1).padStart(8)} s  ${relative(process.cwd(), file)}\n`;
  // A file's process that outlives its tests by seconds (its start-up aside: about a second,
  // more on a busy machine) holds a handle its tests left open (a timer, a socket, a child):
  // its time is then mostly waiting for that handle's end.
  const lingered = [...whole].map(([file, ms]) => [file, ms - (summed.get(file) ?? ms)] as const).filter(([, extra]) => extra > LINGER_MS);
  if (lingered.length > 0) {
    out += `Files whose process outlived their tests by over ${LINGER_MS / 1000} s (start-up included; a handle left open?):\n`;
    for (const [file, extra] of lingered) out += `${(extra / 1000).toFixed(1).padStart(8)} s  ${relative(process.cwd(), file)}\n`;
  }
  yield out;
}
