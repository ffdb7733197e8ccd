// Run by `npm test` (scripts/test.ts) before the suite's processes start: loads the modules that
// nearly every one of them loads (infermeter's sources, through the app and the command's
// modules, and the test helpers) and writes them to Node's compile cache (NODE_COMPILE_CACHE).
// Without it, in a clean clone the first processes, started side by side, each compile the same
// modules, and an infermeter that a test kills never writes what it compiled: the suite took
// 130 s with the cache empty at its start against 110 s with it filled. Only modules that do
// nothing when loaded (not src/cli.ts, which starts the command, nor a cluster worker's main).
import { readdirSync } from 'node:fs';
import { flushCompileCache } from 'node:module';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const dir = (folder: string) =>
  readdirSync(join(root, folder))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(root, folder, f));
for (const file of [join(root, 'src', 'app.ts'), ...dir('src/cli'), ...dir('test/helpers')]) await import(file);
flushCompileCache();
