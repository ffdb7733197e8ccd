// /metrics render time with 100 models and every family (MindIE and AOM dialects), in process.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createRequestTimer } from '../src/measure/request-timer.ts';
import { createMetrics } from '../src/metrics/metrics.ts';
import { median } from './load.ts';
import { INFERMETER_FLAGS } from './targets.ts';

export async function renderMillis(models = 100): Promise<{ ms: number; bytes: number }> {
  let now = 0;
  const metrics = createMetrics({
    clock: () => now,
    throughputWindowSeconds: 10,
    version: 'bench',
    dialects: ['mindie', 'aom'],
    buckets: {},
    aom: { periodSeconds: 30, labels: { service_id: 'bench', source: 'bench' } },
    container: {
      paths: { cgroupRoot: '/sys/fs/cgroup', procRoot: '/proc' },
      hostCpus: 2,
      hostMemoryBytes: 1,
      gpu: false,
      npu: false,
      run: async () => undefined,
      now: () => now,
    },
  });
  for (let m = 0; m < models; m++) {
    for (let r = 0; r < 5; r++) {
      const timer = createRequestTimer('chat', () => now, metrics.sink);
      timer.identify(`model-${m}`, true);
      timer.responseHeaders(200, true);
      for (let t = 0; t < 8; t++) {
        now += 7;
        timer.tokenEvent();
      }
      timer.usage({ promptTokens: 100 + r, completionTokens: 8 });
      timer.responseFinished();
      timer.close(r !== 4);
    }
  }
  now += 31_000; // an AOM period ends: its gauges render too
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < 30; i++) {
    const t0 = performance.now();
    const text = await metrics.render();
    times.push(performance.now() - t0);
    bytes = text.length;
  }
  metrics.close();
  return { ms: median(times.slice(5)), bytes };
}

/** The third of three renderMillis(100) in this process (the first is still warming up the JIT). */
async function third(): Promise<{ ms: number; bytes: number }> {
  let last = { ms: 0, bytes: 0 };
  for (let i = 0; i < 3; i++) last = await renderMillis(100);
  return last;
}

/**
 * The render as infermeter runs it: the third of three in a child process with the flags
 * infermeter runs with (INFERMETER_FLAGS, or BENCH_INFERMETER_FLAGS to try others, as the bench's
 * targets take them). The young generation's size alone moves it threefold.
 */
export function renderWithFlags(flags = process.env.BENCH_INFERMETER_FLAGS ?? INFERMETER_FLAGS): { ms: number; bytes: number } {
  const child = spawnSync(process.execPath, [...flags.split(' ').filter(Boolean), fileURLToPath(import.meta.url)], {
    env: { ...process.env, BENCH_RENDER_CHILD: '1' },
    encoding: 'utf8',
  });
  if (child.status !== 0) throw new Error(`the render with infermeter's flags failed: ${child.stderr}`);
  return JSON.parse(child.stdout) as { ms: number; bytes: number };
}

// `npm run bench:render`: the same render in this process (Node's default young generation) and
// as infermeter runs it (renderWithFlags).
if (import.meta.main) {
  if (process.env.BENCH_RENDER_CHILD === '1') process.stdout.write(JSON.stringify(await third()));
  else {
    const own = await third();
    const flags = process.env.BENCH_INFERMETER_FLAGS ?? INFERMETER_FLAGS;
    const flagged = renderWithFlags(flags);
    process.stdout.write(
      `/metrics render, 100 models, ${Math.round(own.bytes / 1024)} KiB: ${own.ms.toFixed(2)} ms without flags, ${flagged.ms.toFixed(2)} ms with ${flags} (median of 25 renders each)\n`,
    );
  }
}
