// The primary of INFERMETER_WORKERS > 1: the composition root (start/root.ts) with the data
// plane in workers. It forks the workers (node:cluster; they share the data port), feeds the one
// measurement from their batched calls (bus.ts), and restarts a worker that dies, saying so in
// the log and in infermeter_worker_restarts_total, with its in-flight requests counted as failed.
import cluster, { type Worker } from 'node:cluster';
import { fileURLToPath } from 'node:url';
import type { Config, Env } from '../config/config.ts';
import { resolveListenAddress } from '../config/listen-addresses.ts';
import type { Logger } from '../log.ts';
import { addReadings, type LoopDelayReading } from '../metrics/own/loop-delay.ts';
import type { ProcessReading } from '../metrics/own/process-families.ts';
import type { HeldBodyBytes } from '../metrics/own/proxy-families.ts';
import type { Measurement, StartOptions } from '../start/measurement.ts';
import { startRoot, type DataParts, type Infermeter } from '../start/root.ts';
import { createWorkerReceiver, type PrimaryMessage, type WorkerMessage, type WorkerReceiver } from './bus.ts';

const WORKER_MAIN = fileURLToPath(new URL('./worker-main.ts', import.meta.url)).replace(/\.ts$/, import.meta.url.endsWith('.ts') ? '.ts' : '.js');
const FLUSH_TIMEOUT_MS = 1000;

interface Workers {
  /** Process ids of the live workers (tests kill one). */
  workerPids(): number[];
  /** Entries of the live workers' in-flight tables (tests: bounded by the model label cap). */
  trackedModels(): number;
  /** Resolves when `n` workers have been started since the beginning (restarts included). */
  workersStarted(n: number): Promise<void>;
}

export type ClusterInfermeter = Infermeter & Workers;

export function startClusterPrimary(config: Config, env: Env, options: StartOptions & { readonly workers: number }): Promise<ClusterInfermeter> {
  return startRoot(config, options, inWorkers(config, env, options.log, options.workers));
}

/** The data plane in `count` workers, each reporting over the bus to the primary's measurement. */
function inWorkers(config: Config, env: Env, log: Logger, count: number): DataParts<Workers> {
  const connections = new Map<number, number>();
  const receivers = new Map<number, WorkerReceiver>();
  // Each live worker's event-loop delay from its last flush; the last of workers gone, kept so
  // that the cumulative family never goes back when one is restarted.
  const loopDelays = new Map<number, LoopDelayReading>();
  let retiredLoopDelay = addReadings([]);
  // Each live worker's held bytes from its last flush (a scrape asks every worker for one).
  const held = new Map<number, HeldBodyBytes>();
  // Each live worker's process families from its last flush, by its slot (1 to N: a restarted
  // worker takes the slot of the one it replaces, so the `worker` label stays bounded).
  const processReadings = new Map<number, ProcessReading>();
  let stopping = false;
  let started = 0;
  const startWaiters: Array<{ n: number; resolve: () => void }> = [];
  const flushWaiters = new Map<number, () => void>();
  let seq = 0;

  const workers = (): Worker[] => Object.values(cluster.workers ?? {}).filter((w): w is Worker => w?.isConnected() === true);
  const tell = (m: PrimaryMessage): void => {
    for (const w of workers()) w.send(m);
  };

  /** Every live worker sends what it has batched before a scrape is answered. */
  const flushAll = async (): Promise<void> => {
    await Promise.all(
      workers().map(
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

  /** Not ready already; the workers flush, drain (up to the drain timeout) and exit. */
  const stop = async (): Promise<void> => {
    stopping = true;
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
  };

  const forker = (m: Measurement, listening: (url: string) => void) => {
    const { metrics, events, ledger } = m;
    const fork = (slot: number): Worker => {
      const worker = cluster.fork({ ...env });
      const receiver = createWorkerReceiver(metrics.sink, events, metrics.modelLabel, metrics.tenantLabel, ledger?.append);
      receivers.set(worker.id, receiver);
      worker.on('message', (msg: WorkerMessage) => {
        if (msg.t === 'events') {
          receiver.receive(msg.events);
          connections.set(worker.id, msg.connections);
        } else if (msg.t === 'flushed') {
          if (msg.loopDelay !== undefined) loopDelays.set(worker.id, msg.loopDelay);
          if (msg.held !== undefined) held.set(worker.id, msg.held);
          if (msg.process !== undefined) processReadings.set(slot, msg.process);
          flushWaiters.get(msg.seq)?.();
        } else if (msg.t === 'listening') {
          started++;
          for (const w of startWaiters.splice(0)) started >= w.n ? w.resolve() : startWaiters.push(w);
          listening(msg.url);
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
    return fork;
  };

  const sum = (values: Iterable<HeldBodyBytes>): HeldBodyBytes => {
    let request = 0;
    let answer = 0;
    for (const h of values) {
      request += h.request;
      answer += h.answer;
    }
    return { request, answer };
  };
  return {
    readings: {
      connections: () => [...connections.values()].reduce((a, b) => a + b, 0),
      heldBodyBytes: () => sum(held.values()),
      workersLoopDelay: () => addReadings([retiredLoopDelay, ...loopDelays.values()]),
      workersProcess: () => [...processReadings].sort(([a], [b]) => a - b).map(([slot, reading]) => [String(slot), reading] as const),
    },
    async start(measurement) {
      // The workers bind the data port: a host they would refuse is refused here, before any starts
      // (a worker that failed would be restarted again and again).
      await resolveListenAddress(config.host, config.security.allowAllZeroIp || config.hostDefaulted, 'INFERMETER_HOST');
      cluster.setupPrimary({ exec: WORKER_MAIN, serialization: 'advanced', silent: false });
      let firstUrl!: (url: string) => void;
      const first = new Promise<string>((resolve) => (firstUrl = resolve));
      const fork = forker(measurement, firstUrl);
      for (let i = 1; i <= count; i++) fork(i);
      const dataUrl = await first;
      await new Promise<void>((resolve) => startWaiters.push({ n: count, resolve }));
      return {
        dataUrl,
        beforeScrape: flushAll,
        startedFields: { workers: count },
        exposed: {
          workerPids: () => workers().map((w) => w.process.pid!),
          trackedModels: () => [...receivers.values()].reduce((n, r) => n + r.tracked, 0),
          workersStarted: (n) => (started >= n ? Promise.resolve() : new Promise((resolve) => startWaiters.push({ n, resolve }))),
        },
        // The primary's aliases and prices were reloaded: each worker reads its own again.
        reloadTenantAliases: () => tell({ t: 'reloadTenants' }),
        reloadPrices: () => tell({ t: 'reloadPrices' }),
        reopenAccessLog: () => tell({ t: 'reopenAccessLog' }),
        drain: stop,
        close: stop,
      };
    },
  };
}
