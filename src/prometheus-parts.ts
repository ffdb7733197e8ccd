// The parts of @prometheus-io/client infermeter uses, loaded from their own files: the client's
// index also loads its push gateway (https, zlib), its cluster aggregator and, through the
// process CPU counters of collectDefaultMetrics, OpenTelemetry's API (51 modules) for exemplars
// infermeter never asks of them. Loading the index cost about 70 ms of CPU against 7 ms for
// these files (Node's compile cache filled), 10 to 15 ms on every start of infermeter and of each
// of its workers. The client has no exports map, so the files are reachable;
// test/unit/prometheus-parts.test.ts checks that each is the very class the index exports and
// that the process families are the ones collectDefaultMetrics registers, in its order.
// Required at the first call: the configuration reads the dialect table, so the healthcheck and
// --help load modules that use these, and need none of them.
import { createRequire } from 'node:module';
import type * as Client from '@prometheus-io/client';

export interface PrometheusParts {
  readonly Registry: typeof Client.Registry;
  readonly Counter: typeof Client.Counter;
  readonly Gauge: typeof Client.Gauge;
  readonly Summary: typeof Client.Summary;
  /** Registers the process families of `collectDefaultMetrics` (its defaults) in `registry`, in its order. */
  readonly collectProcessMetrics: (registry: Client.Registry) => void;
}

const require = createRequire(import.meta.url);
const lib = (file: string): unknown => require(`@prometheus-io/client/lib/${file}.js`);

/** collectDefaultMetrics' modules after its CPU counters, in its order (lib/defaultMetrics.js). */
const PROCESS_METRICS = [
  'processStartTime',
  'osMemoryHeap',
  'processOpenFileDescriptors',
  'processMaxFileDescriptors',
  'eventLoopLag',
  'eventLoopUtilization',
  'processResources',
  'processHandles',
  'processRequests',
  'heapSizeAndUsed',
  'heapSpacesSizeAndUsed',
  'version',
  'gc',
];

let parts: PrometheusParts | undefined;

export function prometheus(): PrometheusParts {
  if (parts !== undefined) return parts;
  const Counter = lib('counter') as typeof Client.Counter;
  type Register = (registry: Client.Registry, config: object) => void;
  const collectProcessMetrics = (registry: Client.Registry): void => {
    cpuCounters(Counter, registry);
    const config = { register: registry, eventLoopMonitoringPrecision: 10 };
    for (const name of PROCESS_METRICS) (lib(`metrics/${name}`) as Register)(registry, config);
  };
  parts = {
    Registry: lib('registry') as typeof Client.Registry,
    Counter,
    Gauge: lib('gauge') as typeof Client.Gauge,
    Summary: lib('summary') as typeof Client.Summary,
    collectProcessMetrics,
  };
  return parts;
}

/** The client's process CPU counters (lib/metrics/processCpuTotal.js) without exemplars: the same names, help and values. */
function cpuCounters(Counter: typeof Client.Counter, registry: Client.Registry): void {
  let last = process.cpuUsage();
  const registers = [registry];
  const user = new Counter({
    name: 'process_cpu_user_seconds_total',
    help: 'Total user CPU time spent in seconds.',
    registers,
    // This family's collect sets all three, as the client's does: it is rendered first.
    collect() {
      const now = process.cpuUsage();
      const userMicros = now.user - last.user;
      const systemMicros = now.system - last.system;
      last = now;
      user.inc(userMicros / 1e6);
      system.inc(systemMicros / 1e6);
      total.inc((userMicros + systemMicros) / 1e6);
    },
  });
  const system = new Counter({ name: 'process_cpu_system_seconds_total', help: 'Total system CPU time spent in seconds.', registers });
  const total = new Counter({ name: 'process_cpu_seconds_total', help: 'Total user and system CPU time spent in seconds.', registers });
}
