// One process: the composition root (start/root.ts) with the data plane in this process,
// reporting straight to the measurement. Used by the CLI, the demo and the tests alike, so what
// the tests exercise is what runs. With INFERMETER_WORKERS > 1 the same root runs with the data
// plane in workers: see cluster/primary.ts.
import type { Config } from './config/config.ts';
import { monotonicClock } from './measure/clock.ts';
import { startDataSide, type DataSide } from './start/data-side.ts';
import type { StartOptions } from './start/measurement.ts';
import { startRoot, type DataParts, type Infermeter } from './start/root.ts';

export type { Infermeter } from './start/root.ts';
export type { StartOptions } from './start/measurement.ts';

/** What a test reads of the data plane in this process. */
type InProcess = Required<Pick<Infermeter, 'dataServer' | 'dataPlane'>>;

/** One process: data plane, metrics and management together. */
export function startInfermeter(config: Config, options: StartOptions): Promise<Infermeter & InProcess> {
  return startRoot(config, options, inProcess(config, options));
}

/** The data plane in this process, sharing the measurement's tenant aliases, prices and ledger. */
function inProcess(config: Config, options: StartOptions): DataParts<InProcess> {
  let side: DataSide | undefined;
  return {
    readings: { connections: () => side?.plane.connections() ?? 0, heldBodyBytes: () => side?.plane.heldBodyBytes() ?? { request: 0, answer: 0 } },
    async start(measurement) {
      const data = await startDataSide(config, options.log, options.clock ?? monotonicClock, {
        sink: measurement.metrics.sink,
        events: measurement.events,
        ledger: measurement.ledger,
        aliases: measurement.aliases,
        prices: measurement.prices,
        lifecycleViolation: options.lifecycleViolation,
        staleRaceMs: options.staleRaceMs,
        dialectTable: options.dialectTable,
        apiTable: options.apiTable,
      });
      side = data;
      return {
        dataUrl: data.url,
        exposed: { dataServer: data.plane.server, dataPlane: data.plane },
        // The measurement's aliases and prices are this data plane's: reloaded there.
        reloadTenantAliases() {},
        reloadPrices() {},
        reopenAccessLog: data.reopenAccessLog,
        drain: () => data.drain(config.limits.drainTimeoutMs),
        close: data.close,
      };
    },
  };
}
