// One batch of test files (scripts/test.ts) run in this process, one file after another, by
// node:test's run() with isolation 'none', and reported as `node --test` would (the spec
// reporter, then the files' times to TEST_FILE_TIMES). Not `node --test --test-isolation=none`:
// there the process running the tests carries `--test` in its execArgv and the files in its
// argv, and node:cluster forks its workers with both, so a worker ran every file again.
// In-process, the runner ends (its summary, the exit) only when nothing is left on the loop: a
// handle a test left open would hold the batch for good. So once every file's tests have ended,
// a process still alive 10 s later names what it holds and fails.
import { PassThrough } from 'node:stream';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import slowestFiles from './slowest-files-reporter.ts';

const files = JSON.parse(process.env.TEST_GROUP_FILES ?? '[]') as string[];
delete process.env.TEST_GROUP_FILES;
// TEST_LINGER_MS: another grace (test/integration/test-runner.test.ts waits less).
const LINGER_MS = Number(process.env.TEST_LINGER_MS ?? 10_000);
const stream = run({ files, isolation: 'none', timeout: Number(process.env.TEST_TIMEOUT_MS ?? 300_000) });
stream.on('test:fail', () => {
  process.exitCode = 1;
});
// Every file is imported, its top-level tests queued, before the first runs: once as many have
// ended as were queued, the tests are over.
let queued = 0;
let ended = 0;
stream.on('test:enqueue', (data: { nesting: number }) => {
  if (data.nesting === 0) queued++;
});
stream.on('test:complete', (data: { nesting: number }) => {
  if (data.nesting !== 0 || ++ended < queued) return;
  setTimeout(() => {
    process.stdout.write(
      `\nThe tests of ${files.join(', ')} ended ${LINGER_MS / 1000} s ago, and their process still holds: ${process.getActiveResourcesInfo().join(', ')}\n`,
    );
    process.exit(1);
  }, LINGER_MS).unref();
});
stream.pipe(new spec()).pipe(process.stdout);
const events = new PassThrough({ objectMode: true });
stream.pipe(events);
for await (const text of slowestFiles(events)) process.stdout.write(text);
