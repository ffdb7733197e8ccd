// infermeter in a child process with the memory probe loaded: its live memory after a full
// collection, and the bytes it has read from its sockets (Linux's /proc/<pid>/io), so a test
// can wait until an attack's bytes were all read before it measures.
import { readFileSync } from 'node:fs';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { spawnNode } from './child-process.ts';

export interface Memory {
  readonly rss: number;
  /** The largest RSS so far. */
  readonly peakRss: number;
  readonly heapUsed: number;
  readonly arrayBuffers: number;
  readonly external: number;
}

export interface MemoryChild {
  readonly dataUrl: string;
  readonly metricsUrl: string;
  /** Live memory after a full collection. */
  memory(): Promise<Memory>;
  /** Bytes the process has read (read(2) and recv(2) included). */
  bytesRead(): number;
  /** How the process ended (code, or signal), or undefined while it runs; with its stderr. */
  exited(): { readonly how: number | string; readonly stderr: string } | undefined;
}

const cli = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
const probe = fileURLToPath(new URL('./memory-probe.ts', import.meta.url));

export async function startMemoryChild(t: TestContext, env: Readonly<Record<string, string>>): Promise<MemoryChild> {
  const child = spawnNode(t, ['--expose-gc', '--import', probe, cli], {
    INFERMETER_PORT: '0',
    INFERMETER_MANAGEMENT_PORT: '0',
    INFERMETER_METRICS_PORT: '0',
    INFERMETER_UPSTREAM_METRICS: 'off',
    ...env,
  });
  let err = '';
  const started = await new Promise<{ data: string; metrics: string }>((resolve, reject) => {
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
      const line = err.split('\n').find((l) => l.includes('"infermeter started"'));
      if (line !== undefined) resolve(JSON.parse(line) as { data: string; metrics: string });
    });
    child.once('exit', (code) => reject(new Error(`infermeter exited with ${code}: ${err}`)));
  });
  let ended: number | string | undefined;
  child.once('exit', (code, signal) => (ended = code ?? signal ?? 'exited'));
  let out = '';
  const waiting: Array<(m: Memory) => void> = [];
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
    let nl: number;
    while ((nl = out.indexOf('\n')) >= 0) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      if (line.startsWith('memory ')) waiting.shift()?.(JSON.parse(line.slice(7)) as Memory);
    }
  });
  return {
    dataUrl: started.data,
    metricsUrl: started.metrics,
    memory() {
      const m = new Promise<Memory>((resolve) => waiting.push(resolve));
      child.kill('SIGUSR2');
      return m;
    },
    exited: () => (ended === undefined ? undefined : { how: ended, stderr: err }),
    bytesRead() {
      const io = readFileSync(`/proc/${child.pid}/io`, 'utf8');
      return Number(/^rchar: (\d+)$/m.exec(io)?.[1] ?? 0);
    },
  };
}

/** Resolves once `condition` holds, checked every `everyMs` (a state another process reaches). */
export async function until(condition: () => boolean, what: () => string, everyMs = 20, limitMs = 120_000): Promise<void> {
  const start = performance.now();
  while (!condition()) {
    if (performance.now() - start > limitMs) throw new Error(`not reached in ${limitMs} ms: ${what()}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
