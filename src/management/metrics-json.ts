// GET /metrics-json (spec: MindIE's "EndPoint management-plane metrics, JSON format"): the
// average TTFT and TBT in milliseconds over the last N requests, the requests waiting and
// processing, and the free KV-cache blocks where an engine reports them, in the spec's exact
// shape: {"resultType":"vector","result":[{"metric":[{__name__, job, instance}],"value":"..."}]}.
import { attributeInFlight, inFlightNow, inFlightTotals } from '../metrics/state/in-flight.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { chargebackOf } from '../chargeback/start.ts';

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

  // Waiting and processing: the sums of num_requests_waiting / running (in-flight.ts), where
  // MindIE's own figures, when read, stand for the engine's (one model: all of them).
  const mindie = engine?.mindieJson;
  const own = mindie?.waiting !== undefined || mindie?.processing !== undefined;
  const inFlight = own
    ? attributeInFlight(metrics.state.models.values(), {
        running: mindie.processing === undefined ? undefined : new Map([['', mindie.processing]]),
        waiting: mindie.waiting === undefined ? undefined : new Map([['', mindie.waiting]]),
      })
    : inFlightNow(metrics.state.models.values(), engine);
  const { waiting, running: processing } = inFlightTotals(inFlight);

  const result = [
    entry('TTFT', ttftMs ?? 0),
    entry('TBT', tbtMs ?? 0),
    entry('waitingInferRequestNum', waiting),
    entry('processingInferRequestNum', processing),
  ];
  // Free blocks only where an engine tells them: never a made-up value.
  const remain = engine?.mindieJson?.remainBlocks ?? engine?.remainBlocks;
  if (remain !== undefined) result.push(entry('remainBlocks', remain));
  // Goodput (INFERMETER_SLO): after the spec's entries; the attainment only once a request was judged.
  const goodput = metrics.recentGoodput();
  if (goodput !== undefined) {
    result.push(entry('goodputRequestsPerSecond', goodput.requestsPerSecond), entry('goodputTokensPerSecond', goodput.tokensPerSecond));
    if (goodput.attainment !== undefined) result.push(entry('goodputAttainment', goodput.attainment));
  }
  // Chargeback (INFERMETER_PRICES_FILE): the cost so far in nano-units of the prices' currency, all of it and its idle share.
  const cost = chargebackOf(metrics)?.costByTenant();
  if (cost !== undefined) {
    let total = 0n;
    for (const nanos of cost.values()) total += nanos;
    result.push({ ...entry('costNanos', 0), value: total.toString() }, { ...entry('idleCostNanos', 0), value: (cost.get('idle') ?? 0n).toString() });
  }
  return { resultType: 'vector', result };
}
