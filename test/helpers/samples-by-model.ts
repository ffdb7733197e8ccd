// The finished samples of a proxy, by model name: the routing differential tests give each
// spelling a model of its own and wait for its sample, or name the spellings never metered.
import type { Infermeter } from '../../src/app.ts';
import type { RequestSample } from '../../src/measure/sample.ts';

export interface SamplesByModel {
  readonly samples: ReadonlyMap<string, RequestSample>;
  /** Resolves once a sample of `model` finished. */
  arrived(model: string): Promise<void>;
  /** Waits for one sample per entry; past `boundMs`, rejects naming the targets never metered (as `what`). */
  allArrived(served: ReadonlyArray<{ readonly target: string; readonly model: string }>, boundMs?: number, what?: string): Promise<void>;
}

export function samplesByModel(app: Pick<Infermeter, 'metrics'>): SamplesByModel {
  const samples = new Map<string, RequestSample>();
  const waiting = new Map<string, () => void>();
  app.metrics.addObserver({
    finished(s) {
      samples.set(s.model, s);
      waiting.get(s.model)?.();
    },
  });
  const arrived = (model: string): Promise<void> => (samples.has(model) ? Promise.resolve() : new Promise<void>((resolve) => waiting.set(model, resolve)));
  return {
    samples,
    arrived,
    async allArrived(served, boundMs = 20_000, what = 'served as inference') {
      let bound: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          Promise.all(served.map(({ model }) => arrived(model))),
          new Promise((_, reject) => {
            bound = setTimeout(() => {
              const missing = served.filter((s) => !samples.has(s.model)).map((s) => s.target);
              reject(new Error(`${what}, never metered: ${missing.join(' ')}`));
            }, boundMs);
          }),
        ]);
      } finally {
        clearTimeout(bound);
      }
    },
  };
}
