// Limits and timeouts (Config.limits): the label cap on models, the concurrency limit, the
// client, upstream and end-to-end timeouts and the drain. Their types, ranges and defaults are
// the rows of group `limits` in the variables table; DEFAULT_LIMITS is what those rows give for
// an empty environment (the data plane's when it is given none).
import { groupDefaults, type GroupValues } from './variables/variable-table.ts';
import { CONFIGURATION_TABLE } from './variables.ts';

export type Limits = GroupValues<typeof CONFIGURATION_TABLE, 'limits'>;

export const DEFAULT_LIMITS = groupDefaults(CONFIGURATION_TABLE, 'limits') as Limits;
