// The primary of INFERMETER_WORKERS > 1: forks the workers (node:cluster; they share the data
// port), keeps the one set of metrics fed by their batched events, serves the management and
// metrics ports, and restarts a worker that dies, saying so in the log and in
// infermeter_worker_restarts_total, with its in-flight requests counted as failed.
import cluster, { type Worker } from 'node:cluster';
import { fileURLToPath } from 'node:url';
import type { Config, Env } from '../config/config.ts';
import { resolveListenAddress } from '../config/listen-addresses.ts';
import { buildMetrics, logStartWarnings, startExport, tenantAliases, type Infermeter, type StartOptions } from '../app.ts';
import { startManagement } from '../management/start-management.ts';
import { startLedger } from '../ledger/ledger.ts';
import { monotonicClock } from '../measure/clock.ts';
import { startPrices } from '../chargeback/start.ts';
import { addReadings, type LoopDelayReading } from '../metrics/own/loop-delay.ts';
import type { ProcessReading } from '../metrics/own/process-families.ts';
import type { HeldBodyBytes } from '../metrics/own/proxy-families.ts';
import { upstreamReadiness, withReadinessNews } from '../management/upstream-readiness.ts';
import { startedFields } from '../started-fields.ts';
import { createWorkerReceiver, type PrimaryMessage, type WorkerMessage, type WorkerReceiver } from './bus.ts';

const WORKER_MAIN = fileURLToPath(new URL('./worker-main.ts', import.meta.url)).replace(/\.ts$/, import.meta.url.endsWith('.ts') ? '.ts' : '.js');
const FLUSH_TIMEOUT_MS = 1000;

export interface ClusterInfermeter extends Infermeter {
  /** Process ids of the live workers (tests kill one). */
  workerPids(): number[];
  /** Entries of the live workers' in-flight tables (tests: bounded by the model label cap). */
  trackedModels(): number;
  /** Resolves when `n` workers have been started since the beginning (restarts included). */
  workersStarted(n: number): Promise<void>;
}

export async function startClusterPrimary(config: Config, env: Env, options: StartOptions & { readonly workers: number }): Promise<ClusterInfermeter> {
  const { log } = options;
  logStartWarnings(config, log);
  // The workers bind the data port: a host they would refuse is refused here, before any starts
  // (a worker that failed would be restarted again and again).
  await resolveListenAddress(config.host, config.security.allowAllZeroIp || config.hostDefaulted, 'INFERMETER_HOST');
  const connections = new Map<number, number>();
  const receivers = new Map<number, WorkerReceiver>();
  // The primary keeps the tenant labels: the aliased names are always admitted.
  const aliases = tenantAliases(config, log);
  // Each live worker's event-loop delay from its last flush; the last of workers gone, kept so
  // that the cumulative family never goes back when one is restarted.
  const loopDelays = new Map<number, LoopDelayReading>();
  let retiredLoopDelay = addReadings([]);
  // Each live worker's held bytes from its last flush (a scrape asks every worker for one).
  const held = new Map<number, HeldBodyBytes>();
  // Each live worker's process families from its last flush, by its slot (1 to N: a restarted
  // worker takes the slot of the one it replaces, so the `worker` label stays bounded).
  const processReadings = new Map<number, ProcessReading>();
  // The primary answers /ready: it follows the upstream from the workers' news (over the bus),
  // the engine scraper's and its own probe.
  const readiness = upstreamReadiness(config, log, options.clock ?? monotonicClock);
  const metrics = buildMetrics(
    config,
    options,
    {
      connections: () => {
        let n = 0;
        for (const c of connections.values()) n += c;
        return n;
      },
      heldBodyBytes: () => {
        let request = 0;
        let answer = 0;
        for (const h of held.values()) {
          request += h.request;
          answer += h.answer;
        }
        return { request, answer };
      },
    },
    aliases,
    () => addReadings([retiredLoopDelay, ...loopDelays.values()]),
    readiness,
    () => [...processReadings].sort(([a], [b]) => a - b).map(([slot, reading]) => [String(slot), reading] as const),
  );
  // The cost families are the primary's (every worker's requests reach its recorder); each worker prices its own records.
  const prices = startPrices(config, log, { metrics, clock: options.clock ?? monotonicClock });
  // One ledger whatever the worker count: the workers' records cross the bus to this spool.
  const ledger = config.usage === undefined ? undefined : startLedger(config.usage, metrics.registry, log);
  const events = withReadinessNews(metrics.proxy, readiness);
  // The primary holds the measurements, so it exports them; before the first worker starts.
  const otlp = await startExport(config, metrics, log);
  cluster.setupPrimary({ exec: WORKER_MAIN, serialization: 'advanced', silent: false });

  let stopping = false;
  let started = 0;
  const startWaiters: Array<{ n: number; resolve: () => void }> = [];
  const flushWaiters = new Map<number, () => void>();
  let seq = 0;
  let resolveFirstListening!: (url: string) => void;
  const firstListening = new Promise<string>((resolve) => (resolveFirstListening = resolve));

  const fork = (slot: number): Worker => {
    const worker = cluster.fork({ ...env });
    const receiver = createWorkerReceiver(metrics.sink, events, metrics.modelLabel, metrics.tenantLabel, ledger?.append);
    receivers.set(worker.id, receiver);
    worker.on('message', (m: WorkerMessage) => {
      if (m.t === 'events') {
        receiver.receive(m.events);
        connections.set(worker.id, m.connections);
      } else if (m.t === 'flushed') {
        if (m.loopDelay !== undefined) loopDelays.set(worker.id, m.loopDelay);
        if (m.held !== undefined) held.set(worker.id, m.held);
        if (m.process !== undefined) processReadings.set(slot, m.process);
        flushWaiters.get(m.seq)?.();
      } else if (m.t === 'listening') {
        started++;
        for (const w of startWaiters.splice(0)) started >= w.n ? w.resolve() : startWaiters.push(w);
        resolveFirstListening(m.url);
      }
    });
    worker.on('exit', (code, signal) => {
      connections.delete(worker.id);
      held.delete(worker.id);
      receivers.delete(worker.id);
      const lastDelay = loopDelays.get(worker.id);
      if (lastDelay !== undefined) retiredLoopDelay = addReadings([retiredLoopDelay, lastDelay]);
      loopDelays.delete(worker.id);
      // A dead worker's process series go with it.
      processReadings.delete(slot);
      const lost = receiver.lost();
      if (stopping) return;
      metrics.proxy.workerRestarted(lost);
      log.warn('worker exited; starting another', { pid: worker.process.pid, code: code ?? undefined, signal: signal ?? undefined, requests_lost: lost });
      fork(slot);
    });
    return worker;
  };

  const workers = (): Worker[] => Object.values(cluster.workers ?? {}).filter((w): w is Worker => w?.isConnected() === true);

  /** Every live worker sends what it has batched before a scrape is answered. */
  const flushAll = async (): Promise<void> => {
    const live = workers();
    await Promise.all(
      live.map(
        (w) =>
          new Promise<void>((resolve) => {
            const id = ++seq;
            const timer = setTimeout(done, FLUSH_TIMEOUT_MS);
            function done(): void {
              clearTimeout(timer);
              flushWaiters.delete(id);
              resolve();
            }
            flushWaiters.set(id, done);
            try {
              w.send({ t: 'flush', seq: id } satisfies PrimaryMessage);
            } catch {
              done();
            }
          }),
      ),
    );
  };

  for (let i = 1; i <= options.workers; i++) fork(i);
  const dataUrl = await firstListening;
  await new Promise<void>((resolve) => startWaiters.push({ n: options.workers, resolve }));
  const management = await startManagement(config, metrics, dataUrl, flushAll, readiness);
  metrics.start();
  management.setReady(true);
  log.info('infermeter started', { ...startedFields(config, dataUrl, management), workers: options.workers });

  return {
    dataUrl,
    managementUrl: management.managementUrl,
    metricsUrl: management.metricsUrl,
    metrics,
    workerPids: () => workers().map((w) => w.process.pid!),
    trackedModels: () => [...receivers.values()].reduce((n, r) => n + r.tracked, 0),
    workersStarted: (n) => (started >= n ? Promise.resolve() : new Promise((resolve) => startWaiters.push({ n, resolve }))),
    reloadTenantAliases() {
      if (aliases === undefined) return;
      aliases.reload();
      for (const w of workers()) w.send({ t: 'reloadTenants' } satisfies PrimaryMessage);
    },
    reloadSlo: () => void metrics.goodput?.policy.reload(),
    reloadPrices() {
      prices?.book.reload();
      for (const w of workers()) w.send({ t: 'reloadPrices' } satisfies PrimaryMessage);
    },
    reopenAccessLog() {
      for (const w of workers()) w.send({ t: 'reopenAccessLog' } satisfies PrimaryMessage);
    },
    drain: () => close(),
    close: () => close(),
  };

  /** Not ready at once; the workers drain (up to the drain timeout) and flush; then the primary closes. */
  async function close(): Promise<void> {
    stopping = true;
    management.setReady(false);
    readiness?.close();
    await flushAll();
    await Promise.all(
      workers().map(
        (w) =>
          new Promise<void>((resolve) => {
            w.once('exit', () => resolve());
            w.send({ t: 'drain', timeoutMs: config.limits.drainTimeoutMs } satisfies PrimaryMessage);
            setTimeout(() => w.process.kill('SIGKILL'), config.limits.drainTimeoutMs + 5000).unref();
          }),
      ),
    );
    aliases?.close();
    prices?.book.close();
    metrics.close();
    await management.close();
    await ledger?.close();
    await otlp?.close();
  }
}
