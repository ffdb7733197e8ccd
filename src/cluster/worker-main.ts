// A worker of INFERMETER_WORKERS > 1: the data side of the composition root
// (start/data-side.ts) on the shared port, reporting to the bus (bus.ts) instead of a
// measurement of its own. Reads the same environment as the primary.
import { startPrices } from '../chargeback/start.ts';
import { loadConfig } from '../config/config.ts';
import { createLogger } from '../log.ts';
import { monotonicClock } from '../measure/clock.ts';
import { createLoopDelayMonitor } from '../metrics/own/loop-delay.ts';
import { processMetrics } from '../metrics/own/process-families.ts';
import { startDataSide } from '../start/data-side.ts';
import { tenantAliases } from '../start/measurement.ts';
import { createWorkerBus, type PrimaryMessage, type WorkerMessage } from './bus.ts';

// The SLO classes are the primary's (it judges every request): a worker neither needs nor reads
// their file, so a file broken after the start cannot stop a restarted worker.
const { INFERMETER_SLO_FILE: sloFile, INFERMETER_SLO_CLIENT_ALLOWANCE: _allowance, ...workerEnv } = process.env;
const config = loadConfig(workerEnv, { requireUpstream: true });
const log = createLogger(config.logLevel);
const send = (m: WorkerMessage): void => {
  if (process.connected) process.send!(m);
};
let connections = () => 0;
const bus = createWorkerBus(send, () => connections());
// This worker's event-loop delay, sent with every flush (a scrape asks for one).
const loopDelay = createLoopDelayMonitor();
const own = processMetrics();
// Its own tenant aliases and prices (a request's tenant; its usage records' cost), read again on
// the primary's word or when their file changes; its usage records cross the bus to the
// primary's spool, with its own start id and sequence.
const aliases = tenantAliases(config, log);
const prices = startPrices(config, log);
const data = await startDataSide(config, log, monotonicClock, { sink: bus.sink, events: bus.events, ledger: bus.ledger, aliases, prices });
connections = () => data.plane.connections();
send({ t: 'listening', url: data.url });

process.on('message', (m: PrimaryMessage) => {
  if (m.t === 'flush') {
    bus.flush();
    // This worker's process families too (read asynchronously; the primary waits up to its flush timeout).
    const delay = loopDelay.read();
    const held = data.plane.heldBodyBytes();
    void own.read().then(
      (reading) => send({ t: 'flushed', seq: m.seq, loopDelay: delay, held, process: reading }),
      () => send({ t: 'flushed', seq: m.seq, loopDelay: delay, held }),
    );
  } else if (m.t === 'reloadTenants') {
    aliases?.reload();
  } else if (m.t === 'reloadPrices') {
    prices?.book.reload();
  } else if (m.t === 'reopenAccessLog') {
    data.reopenAccessLog();
  } else if (m.t === 'drain') {
    void data.drain(m.timeoutMs).then(async () => {
      bus.flush();
      await data.close();
      aliases?.close();
      prices?.book.close();
      process.disconnect();
    });
  }
});
// The primary is gone: nothing left to report to.
process.on('disconnect', () => process.exit(0));
// A signal to the whole process group (systemd's default, Ctrl-C in a terminal) reaches the
// workers too: the primary drives the drain, so a worker waits for its message, not the signal.
process.on('SIGTERM', () => {});
process.on('SIGINT', () => {});
// Likewise SIGHUP, which reloads the tenant aliases (the primary tells each worker) and the SLO
// classes (the primary's alone: it judges the requests), and is ignored when there is nothing to
// reload.
process.on('SIGHUP', () => {});
