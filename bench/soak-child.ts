// infermeter as npm start runs it (src/cli.ts, unchanged), plus a way for the soak test
// (bench/soak.ts) to read its heap: started with an IPC channel and --expose-gc, this process
// answers the message {type: 'memory', id} with process.memoryUsage() right after a full
// collection, and the bytes V8 uses for compiled code and bytecode then (its code and trusted
// spaces), which grow for a while as more functions are optimised.
// Nothing here touches infermeter's code; it only adds a message handler before importing it.
// If the parent goes away (its end of the channel closes), this process leaves too.
import { getHeapSpaceStatistics } from 'node:v8';

interface MemoryRequest {
  readonly type: 'memory';
  readonly id: number;
}

const gc = (globalThis as { gc?: () => void }).gc;

process.on('message', (m: MemoryRequest) => {
  if (m?.type !== 'memory' || process.send === undefined) return;
  const before = process.memoryUsage();
  gc?.();
  const after = process.memoryUsage();
  let code = 0;
  for (const space of getHeapSpaceStatistics()) if (/code|trusted/.test(space.space_name)) code += space.space_used_size;
  process.send({ type: 'memory', id: m.id, gc: gc !== undefined, before, after, code });
});
process.on('disconnect', () => process.exit(0));

await import('../src/cli.ts');
