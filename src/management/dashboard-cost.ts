// The dashboard's cost column (chargeback, INFERMETER_PRICES_FILE): each tenant's cost since the
// start, `idle` included, as exact decimals of the prices' currency.
import { nanosText } from '../chargeback/decimal.ts';
import { chargebackOf } from '../chargeback/start.ts';

export interface DashboardCost {
  readonly currency: string;
  readonly tenants: Readonly<Record<string, string>>;
}

/** The tenants' cost so far, when prices are configured. */
export function costData(metrics: object): { cost?: DashboardCost } {
  const chargeback = chargebackOf(metrics);
  if (chargeback === undefined) return {};
  const tenants: Record<string, string> = {};
  for (const [tenant, nanos] of chargeback.costByTenant()) tenants[tenant] = nanosText(nanos);
  return { cost: { currency: chargeback.currency(), tenants } };
}
