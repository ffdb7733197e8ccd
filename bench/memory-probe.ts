// Loaded into an infermeter process with --import by bench/stream-memory.ts: its own memory
// (process.memoryUsage(): RSS, V8 heap, external, ArrayBuffers) appended to MEMORY_PROBE_OUT
// as JSON lines every 250 ms, so that RSS growth can be told apart from what the heap and the
// Buffers hold.
import { appendFileSync } from 'node:fs';

const out = process.env.MEMORY_PROBE_OUT;
if (out !== undefined) {
  setInterval(() => {
    const m = process.memoryUsage();
    appendFileSync(
      out,
      `${JSON.stringify({ t: Date.now(), rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers })}\n`,
    );
  }, 250).unref();
}
