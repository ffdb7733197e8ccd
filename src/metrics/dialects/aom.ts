// ModelArts AOM names (spec: "Viewing Performance Metrics of a Real-Time Service on AOM"):
// Table 1's histograms in milliseconds and tokens, Table 2's gauges over a collection period and
// container resource gauges, with Table 3/4's service labels. Same measurement as every other
// dialect: this module only maps names, units and labels.
import { availableParallelism, totalmem } from 'node:os';
import type { Registry } from '@prometheus-io/client';
import type { RequestSample } from '../../measure/sample.ts';
import { bucketsFor, type BucketTable } from '../exposition/buckets.ts';
import { runTool } from '../container/accelerators.ts';
import { createContainerSampler, onPath, type ContainerReading, type ContainerSamplerOptions } from '../container/container-sampler.ts';
import { registerDerived, registerHistogram, type MetricValue } from '../exposition/families.ts';
import { createPeriodWindow } from '../windows/period-window.ts';
import type { MeasurementState } from '../state/recorder.ts';
import type { Dialect, DialectContext } from './dialect.ts';

const MODEL = 'model_name';

/** 2xx, 4xx, 5xx...; a client that left before any status was sent counts as 4xx (nginx's 499). */
function codeClass(status: number): string {
  return status >= 100 && status <= 599 ? `${Math.floor(status / 100)}xx` : '4xx';
}

interface Extremes {
  count: number; // observations (for per-token figures: tokens)
  sum: number;
  min: number;
  max: number;
}

const extremes = (): Extremes => ({ count: 0, sum: 0, min: Number.POSITIVE_INFINITY, max: Number.NEGATIVE_INFINITY });

function add(e: Extremes, value: number, weight = 1): void {
  e.count += weight;
  e.sum += value * weight;
  if (value < e.min) e.min = value;
  if (value > e.max) e.max = value;
}

interface ModelPeriod {
  readonly requests: Map<string, number>; // by code|method|path
  tokens: number;
  readonly firstToken: Extremes;
  readonly perToken: Extremes; // TPOT, token-weighted average, min/max over requests
  readonly tokenLatency: Extremes; // time per token including the first, likewise
}

type Period = Map<string, ModelPeriod>;

/** The AOM settings of the configuration (INFERMETER_AOM_*). */
export interface AomOptions {
  /** Collection period of the AOM period gauges and container metrics, in seconds. */
  readonly periodSeconds: number;
  /** service_id, group_id, project_id, instance_name, service_name (those set) and source. */
  readonly labels: Readonly<Record<string, string>>;
}

/** The AOM dialect's own options. */
export interface AomDialectOptions {
  readonly aom: AomOptions;
  /** Sources of the container metrics; tests pass fixture trees and a fake nvidia-smi. */
  readonly container?: ContainerSamplerOptions | undefined;
}

/** Default buckets of the AOM histograms (INFERMETER_BUCKETS_<FAMILY> overrides them). */
export const AOM_BUCKETS = {
  // ModelArts AOM (milliseconds, tokens): the spec names upper limits of 3.7K (request cost) and
  // 110K (the others); the last finite bounds reach past them so that the top is resolved.
  infer_service_request_cost: [10, 25, 50, 100, 250, 500, 1000, 2000, 3700, 5000, 10000, 20000, 30000, 60000, 120000, 300000],
  infer_service_first_token_cost: [5, 10, 25, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500, 10000, 20000, 30000, 60000, 110000],
  infer_service_per_token_cost: [1, 2, 5, 10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200, 300, 500, 1000, 2500, 110000],
  infer_service_input_token_quantity: [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 110000, 131072],
  infer_service_output_token_quantity: [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 110000, 131072],
} as const satisfies BucketTable;

export function createAomDialect(registry: Registry, state: MeasurementState, context: DialectContext, options: AomDialectOptions): Dialect {
  const serviceLabels = options.aom.labels;
  const periodMs = options.aom.periodSeconds * 1000;
  const clock = state.clock;
  const periods = createPeriodWindow<Period>(periodMs, () => new Map(), clock());
  // Series continue once seen: a model (and its code/method/path sets) reports 0 in idle periods.
  const knownModels = new Set<string>();
  const knownRequests = new Map<string, Set<string>>(); // model -> request label keys ever seen

  const modelPeriod = (period: Period, model: string): ModelPeriod => {
    let m = period.get(model);
    if (m === undefined) {
      m = { requests: new Map(), tokens: 0, firstToken: extremes(), perToken: extremes(), tokenLatency: extremes() };
      period.set(model, m);
    }
    return m;
  };

  const names: string[] = [];
  const histogram = (name: keyof typeof AOM_BUCKETS, help: string) => {
    names.push(name);
    return registerHistogram(registry, { name, help, buckets: bucketsFor(AOM_BUCKETS, name, context.buckets), labelName: MODEL, constLabels: serviceLabels });
  };
  const requestCost = histogram('infer_service_request_cost', 'Request latency of a real-time service, in milliseconds (successful requests).');
  const firstTokenCost = histogram('infer_service_first_token_cost', 'Time to first token, in milliseconds.');
  const perTokenCost = histogram('infer_service_per_token_cost', 'Latency of each output token after the first, in milliseconds.');
  const inputTokens = histogram('infer_service_input_token_quantity', 'Input tokens of real-time service requests.');
  const outputTokens = histogram('infer_service_output_token_quantity', 'Output tokens of real-time service requests.');

  const gauge = (name: string, help: string, collect: () => MetricValue[]): void => {
    names.push(name);
    registerDerived(registry, { name, help, type: 'gauge', collect });
  };
  const labelled = (labels: Record<string, string>, value: number): MetricValue => ({ value, labels: { ...serviceLabels, ...labels } });

  /** Per model of the published period; models seen before but idle in it get `idle` (or nothing). */
  const perModel = (read: (m: ModelPeriod) => number | undefined, idle: number | undefined) => (): MetricValue[] => {
    const period = periods.published(clock());
    if (period === undefined) return [];
    const values: MetricValue[] = [];
    for (const model of knownModels) {
      const m = period.get(model);
      const value = m === undefined ? idle : read(m);
      if (value !== undefined) values.push(labelled({ [MODEL]: model }, value));
    }
    return values;
  };
  const avg = (e: Extremes) => (e.count === 0 ? undefined : e.sum / e.count);
  const min = (e: Extremes) => (e.count === 0 ? undefined : e.min);
  const max = (e: Extremes) => (e.count === 0 ? undefined : e.max);

  gauge('infer_service_request_total', 'Number of API calls of a real-time service in the last collection period.', () => {
    const period = periods.published(clock());
    if (period === undefined) return [];
    const values: MetricValue[] = [];
    for (const [model, keys] of knownRequests) {
      for (const key of keys) {
        const [code, method, path] = key.split('|') as [string, string, string];
        values.push(labelled({ [MODEL]: model, code, method, path }, period.get(model)?.requests.get(key) ?? 0));
      }
    }
    return values;
  });
  gauge('infer_service_request_connect_count', 'Number of client connections open on the data plane when the metric is collected.', () => [
    labelled({}, context.openConnections()),
  ]);
  gauge(
    'infer_service_token_count',
    'Number of tokens generated in the last collection period.',
    perModel((m) => m.tokens, 0),
  );
  gauge(
    'infer_service_first_token_avg_cost',
    'Average TTFT in the last collection period, in milliseconds.',
    perModel((m) => avg(m.firstToken), undefined),
  );
  gauge(
    'infer_service_first_token_min_cost',
    'Minimum TTFT in the last collection period, in milliseconds.',
    perModel((m) => min(m.firstToken), undefined),
  );
  gauge(
    'infer_service_first_token_max_cost',
    'Maximum TTFT in the last collection period, in milliseconds.',
    perModel((m) => max(m.firstToken), undefined),
  );
  gauge(
    'infer_service_per_token_avg_cost',
    'Average output latency of each token after the first in the last collection period, in milliseconds.',
    perModel((m) => avg(m.perToken), undefined),
  );
  gauge(
    'infer_service_per_token_max_cost',
    'Maximum per-request output latency of each token after the first in the last collection period, in milliseconds.',
    perModel((m) => max(m.perToken), undefined),
  );
  gauge(
    'infer_service_per_token_min_cost',
    'Minimum per-request output latency of each token after the first in the last collection period, in milliseconds.',
    perModel((m) => min(m.perToken), undefined),
  );
  gauge(
    'infer_service_token_latency_avg_cost',
    'Average time consumed by each token, the first included, in the last collection period, in milliseconds.',
    perModel((m) => avg(m.tokenLatency), undefined),
  );
  gauge(
    'infer_service_token_latency_min_cost',
    'Minimum per-request time consumed by each token, the first included, in the last collection period, in milliseconds.',
    perModel((m) => min(m.tokenLatency), undefined),
  );
  gauge(
    'infer_service_token_latency_max_cost',
    'Maximum per-request time consumed by each token, the first included, in the last collection period, in milliseconds.',
    perModel((m) => max(m.tokenLatency), undefined),
  );

  // Container resources, sampled on the collection period.
  const samplerOptions: ContainerSamplerOptions = options.container ?? {
    paths: { cgroupRoot: '/sys/fs/cgroup', procRoot: '/proc' },
    hostCpus: availableParallelism(),
    hostMemoryBytes: totalmem(),
    gpu: onPath('nvidia-smi'),
    npu: onPath('npu-smi'),
    run: runTool,
    now: clock,
  };
  const sampler = createContainerSampler(samplerOptions);
  const resource = (name: string, help: string, read: (r: ContainerReading) => number | undefined): void =>
    gauge(name, help, () => {
      const value = read(sampler.latest());
      return value === undefined ? [] : [labelled({}, value)];
    });
  resource('ma_container_cpu_used_core', 'CPU cores used by the container over the last collection period.', (r) => r.cpuUsedCores);
  resource('ma_container_cpu_util', 'CPU utilization of the container, percent of its CPU limit (or of the host).', (r) => r.cpuUtilPercent);
  resource('ma_container_memory_used_megabytes', 'Memory used by the container (working set), in megabytes (MiB).', (r) => r.memoryUsedMegabytes);
  resource('ma_container_memory_util', 'Memory utilization of the container, percent of its memory limit (or of the host).', (r) => r.memoryUtilPercent);
  resource('ma_container_network_receive_bytes', 'Inbound network throughput of the container, bytes per second.', (r) => r.networkReceiveBytesPerSecond);
  resource('ma_container_network_transmit_bytes', 'Outbound network throughput of the container, bytes per second.', (r) => r.networkTransmitBytesPerSecond);
  if (samplerOptions.gpu) {
    resource('ma_container_gpu_util', "GPU utilization, percent, averaged over the container's GPUs.", (r) => r.gpu?.utilPercent);
    resource('ma_container_gpu_mem_used_megabytes', "GPU memory used over the container's GPUs, in megabytes.", (r) => r.gpu?.memoryUsedMegabytes);
    resource('ma_container_gpu_mem_util', "GPU memory utilization over the container's GPUs, percent.", (r) =>
      r.gpu === undefined ? undefined : (r.gpu.memoryUsedMegabytes / r.gpu.memoryTotalMegabytes) * 100,
    );
  }
  if (samplerOptions.npu) {
    resource('ma_container_npu_util', "NPU (AI Core) utilization, percent, averaged over the container's NPUs.", (r) => r.npu?.utilPercent);
    resource('ma_container_npu_memory_used_megabytes', "NPU memory (HBM) used over the container's NPUs, in megabytes.", (r) => r.npu?.memoryUsedMegabytes);
    resource('ma_container_npu_memory_util', "NPU memory (HBM) utilization over the container's NPUs, percent.", (r) =>
      r.npu === undefined ? undefined : (r.npu.memoryUsedMegabytes / r.npu.memoryTotalMegabytes) * 100,
    );
  }
  const sampleNow = (): void => void sampler.sample().catch(() => undefined);
  sampleNow();
  const timer = setInterval(sampleNow, periodMs);
  timer.unref();

  // The path label: the API's canonical route, so a client-chosen prefix cannot add series.
  const requestKey = (sample: RequestSample): string => `${codeClass(sample.status)}|POST|${context.apis.of(sample.api)?.path ?? sample.api}`;

  return {
    name: 'aom',
    metricNames: names,
    firstOutput(info, ttft) {
      if (ttft === undefined) return;
      knownModels.add(info.model);
      firstTokenCost.observe(info.model, ttft * 1000, 1, info.requestId);
      add(modelPeriod(periods.current(clock()), info.model).firstToken, ttft * 1000);
    },
    finished(sample) {
      const { model } = sample;
      if (sample.e2e !== undefined) requestCost.observe(model, sample.e2e * 1000, 1, sample.requestId);
      if (sample.tpot !== undefined) perTokenCost.observe(model, sample.tpot.seconds * 1000, sample.tpot.tokens, sample.requestId);
      if (sample.promptTokens !== undefined) inputTokens.observe(model, sample.promptTokens);
      if (sample.completionTokens !== undefined) outputTokens.observe(model, sample.completionTokens);

      const key = requestKey(sample);
      knownModels.add(model);
      let keys = knownRequests.get(model);
      if (keys === undefined) knownRequests.set(model, (keys = new Set()));
      keys.add(key);
      const m = modelPeriod(periods.current(clock()), model);
      m.requests.set(key, (m.requests.get(key) ?? 0) + 1);
      m.tokens += sample.completionTokens ?? 0;
      if (sample.tpot !== undefined) add(m.perToken, sample.tpot.seconds * 1000, sample.tpot.tokens);
      // Time per token, the first included: to the last token of a stream, to the end of a
      // non-streamed answer; over completion_tokens, or the token events when usage is missing.
      const n = sample.completionTokens !== undefined && sample.completionTokens > 0 ? sample.completionTokens : sample.tokenEvents;
      const until = sample.streamed ? sample.lastToken : sample.e2e;
      if (until !== undefined && n > 0) add(m.tokenLatency, (until * 1000) / n, n);
    },
    close() {
      clearInterval(timer);
    },
  };
}
