// npm run bench:heap: infermeter in this process (run with --expose-gc) behind the bench
// upstream; after each round of load, a full collection and the heap in use. A leak shows as a
// heap that grows round after round; it must stay flat.
import http from 'node:http';
import { startInfermeter } from '../src/app.ts';
import { loadConfig } from '../src/config/config.ts';
import { silentLogger } from '../src/log.ts';
import { runLoad } from './load.ts';
import { infermeterEnv, startUpstream } from './targets.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc');
const up = await startUpstream();
const app = await startInfermeter(loadConfig(infermeterEnv(up.url)), { log: silentLogger });
const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
const mb = (n: number) => (n / 1048576).toFixed(1);
process.stdout.write('| round | load | heap used after GC, MB | heap total, MB |\n|---|---|---|---|\n');
for (let round = 1; round <= 6; round++) {
  const load = round % 2 === 1 ? { requests: 20_000, concurrency: 32, tokens: 1 } : { requests: 300, concurrency: 300, tokens: 2048 };
  await runLoad(app.dataUrl, { name: 'heap', ttftMs: 0, gapMs: 0, ...load }, agent);
  gc();
  const m = process.memoryUsage();
  process.stdout.write(`| ${round} | ${load.requests} × ${load.tokens} tokens, concurrency ${load.concurrency} | ${mb(m.heapUsed)} | ${mb(m.heapTotal)} |\n`);
}
agent.destroy();
await app.close();
up.child.kill();
