// Loaded into a child infermeter (`node --expose-gc --import` this): on SIGUSR2 it collects
// the garbage and prints one line, `memory <JSON>`, with what is still live (heap and buffers)
// and the RSS. A bound on live memory after a full collection does not depend on when the
// collector would have run by itself, nor on the machine's speed.
process.on('SIGUSR2', () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
  const m = process.memoryUsage();
  const peakRss = process.resourceUsage().maxRSS * 1024;
  process.stdout.write(`memory ${JSON.stringify({ rss: m.rss, peakRss, heapUsed: m.heapUsed, arrayBuffers: m.arrayBuffers, external: m.external })}\n`);
});
