// Chargeback's place in a process: the live prices (read again on SIGHUP and when the file
// changes) and, where the metrics are (the one process, or the primary), the cost families fed
// by the recorder. A worker keeps only the prices, for its usage records' cost.
import type { RecordPrice } from '../ledger/usage-event.ts';
import type { Logger } from '../log.ts';
import type { Clock } from '../measure/clock.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { createChargeback, requestCostNanos, type Chargeback } from './chargeback.ts';
import { createPriceBook, type PriceBook } from './price-book.ts';
import type { PricesConfig } from './prices-file.ts';
import type { TenantConfig } from '../tenants/tenant-config.ts';

export interface Prices {
  readonly book: PriceBook;
  /** The usage record's cost and price version. */
  readonly recordPrice: RecordPrice;
  /** The cost families, where the metrics are. */
  readonly chargeback: Chargeback | undefined;
}

// Each metrics' chargeback, for the pages that show its figures (/metrics-json, /dashboard).
const chargebacks = new WeakMap<object, Chargeback>();

/** The chargeback fed by `metrics`, when prices are configured. */
export const chargebackOf = (metrics: object): Chargeback | undefined => chargebacks.get(metrics);

/** Undefined without INFERMETER_PRICES_FILE. `watchIntervalMs`: how often the file is looked at (tests: 0). */
export function startPrices(
  config: { readonly prices: PricesConfig; readonly tenant: Pick<TenantConfig, 'source'> },
  log: Logger,
  metrics?: { readonly metrics: Metrics; readonly clock: Clock },
  watchIntervalMs?: number,
): Prices | undefined {
  const { table, file } = config.prices;
  if (table === undefined) return undefined;
  const book = createPriceBook({ file, initial: table, log, ...(watchIntervalMs === undefined ? {} : { watchIntervalMs }) });
  let chargeback: Chargeback | undefined;
  if (metrics !== undefined) {
    const m = metrics.metrics;
    const cb = createChargeback({
      registry: m.registry,
      book,
      clock: metrics.clock,
      tenants: config.tenant.source.kind !== 'off',
      modelLabel: (model) => m.modelLabel(model),
      tenantLabel: (tenant) => m.tenantLabel(tenant),
    });
    m.addObserver({ started: (raw) => cb.started(raw), finished: (s, raw) => cb.finished(s, raw) });
    chargeback = cb;
    chargebacks.set(m, cb);
  }
  return {
    book,
    recordPrice: (sample) => ({ costNanos: requestCostNanos(book, sample), version: book.table().version }),
    chargeback,
  };
}
