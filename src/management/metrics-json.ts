// GET /metrics-json (spec: MindIE's "EndPoint management-plane metrics, JSON format"): the
// average TTFT and TBT in milliseconds over the last N requests, the requests waiting and
// processing, and the free KV-cache blocks where an engine reports them, in the spec's exact
// shape: {"resultType":"vector","result":[{"metric":[{__name__, job, instance}],"value":"..."}]}.
import type { Metrics } from '../metrics/metrics.ts';

export interface MetricsJsonOptions {
  readonly job: string;
  /** The management address ip:port, known once it listens. */
  readonly instance: () => string;
}

interface Entry {
  readonly metric: ReadonlyArray<{ readonly __name__: string; readonly job: string; readonly instance: string }>;
  readonly value: string;
}

export function metricsJson(metrics: Metrics, options: MetricsJsonOptions): { resultType: 'vector'; result: Entry[] } {
  const { job } = options;
  const instance = options.instance();
  const entry = (name: string, value: number): Entry => ({ metric: [{ __name__: name, job, instance }], value: String(value) });
  const { ttftMs, tbtMs } = metrics.recentAverages();
  const engine = metrics.engineView();

  // Waiting and processing: the engine's when it reports them, else the proxy's in-flight counts.
  let waiting = 0;
  let processing = 0;
  for (const m of metrics.state.models.values()) {
    waiting += m.waiting;
    processing += m.running;
  }
  const total = (family: 'num_requests_waiting' | 'num_requests_running'): number | undefined => {
    const values = engine?.values.get(family);
    if (values === undefined) return undefined;
    let sum = 0;
    for (const v of values.values()) sum += v;
    return sum;
  };
  waiting = engine?.mindieJson?.waiting ?? total('num_requests_waiting') ?? waiting;
  processing = engine?.mindieJson?.processing ?? total('num_requests_running') ?? processing;

  const result = [entry('TTFT', ttftMs ?? 0), entry('TBT', tbtMs ?? 0), entry('waitingInferRequestNum', waiting), entry('processingInferRequestNum', processing)];
  // Free blocks only where an engine tells them: never a made-up value.
  const remain = engine?.mindieJson?.remainBlocks ?? engine?.remainBlocks;
  if (remain !== undefined) result.push(entry('remainBlocks', remain));
  return { resultType: 'vector', result };
}
