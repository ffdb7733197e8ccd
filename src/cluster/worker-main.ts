// A worker of INFERMETER_WORKERS > 1: the data plane on the shared port, its measurement sent
// to the primary in batches. Reads the same environment as the primary.
import { buildDataPlane, dataPolicy, drainAndSay, tenantAliases } from '../app.ts';
import { loadConfig } from '../config/config.ts';
import { createLogger } from '../log.ts';
import { listen, urlOf } from '../management/listen.ts';
import { monotonicClock } from '../measure/clock.ts';
import { createLoopDelayMonitor } from '../metrics/own/loop-delay.ts';
import { createUsageWriter } from '../ledger/ledger.ts';
import { startPrices } from '../chargeback/start.ts';
import { processMetrics } from '../metrics/own/process-families.ts';
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
const aliases = tenantAliases(config, log);
// This worker's usage records: its own start id and sequence, written by the primary's spool.
// Its records priced at the prices in use (the file read again on the primary's word, or when it changes).
const prices = startPrices(config, log);
const usage = config.usage === undefined ? undefined : createUsageWriter(config.usage.source, bus.ledger.append, Date.now, prices?.recordPrice);
const { dataPlane, accessLog } = buildDataPlane(config, log, monotonicClock, bus.sink, bus.events, undefined, aliases, undefined, usage);
connections = () => dataPlane.connections();

const address = await listen(dataPlane.server, config.host, config.port, dataPolicy(config));
send({ t: 'listening', url: urlOf(address, config.security.dataTls === undefined ? 'http' : 'https') });

process.on('message', (m: PrimaryMessage) => {
  if (m.t === 'flush') {
    bus.flush();
    // This worker's process families too (read asynchronously; the primary waits up to its flush timeout).
    const delay = loopDelay.read();
    const held = dataPlane.heldBodyBytes();
    void own.read().then(
      (reading) => send({ t: 'flushed', seq: m.seq, loopDelay: delay, held, process: reading }),
      () => send({ t: 'flushed', seq: m.seq, loopDelay: delay, held }),
    );
  } else if (m.t === 'reloadTenants') {
    aliases?.reload();
  } else if (m.t === 'reloadPrices') {
    prices?.book.reload();
  } else if (m.t === 'reopenAccessLog') {
    accessLog?.reopen();
  } else if (m.t === 'drain') {
    void drainAndSay(dataPlane, m.timeoutMs, log).then(async () => {
      bus.flush();
      await accessLog?.close();
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
