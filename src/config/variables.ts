// The configuration's one table: every variable infermeter reads, one row each with its name,
// its default as a value, its parser and range, and its meaning (variable-table.ts says what a
// row is). loadConfig reads the rows and refuses an INFERMETER_* variable that is not here,
// `infermeter --help` prints them, docs/configuration.md's table is checked against them row
// by row, and the data plane's defaults are theirs: adding a variable is adding a row (and the
// code that uses its value). The rows live in three parts, joined here in the documented table's order.
import { METRICS_VARIABLES } from './variables/metrics.ts';
import { PROXY_VARIABLES } from './variables/proxy.ts';
import { SECURITY_AND_LIMITS_VARIABLES } from './variables/security-and-limits.ts';
import { USAGE_VARIABLES } from './variables/usage.ts';
import { variableNames, type Row } from './variables/variable-table.ts';

export const CONFIGURATION_TABLE = [...PROXY_VARIABLES, ...USAGE_VARIABLES, ...SECURITY_AND_LIMITS_VARIABLES, ...METRICS_VARIABLES] as const;

/** The variables of the table, the <FAMILY> pattern left out. */
export const VARIABLE_NAMES: readonly string[] = variableNames(CONFIGURATION_TABLE);

// Kubernetes gives every pod <SERVICE>_SERVICE_HOST, <SERVICE>_PORT_1025_TCP... for each Service
// of its namespace: a Service named infermeter (or infermeter-metrics) puts INFERMETER_* names in
// the environment that nobody typed. They are not mistakes, so they are let through.
const SERVICE_LINK = /^[A-Z0-9_]+_(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?|PORT_\d+_(?:TCP|UDP|SCTP)(?:_PROTO|_PORT|_ADDR)?)$/;

/** An INFERMETER_* variable infermeter does not read, with the closest known name. */
export interface UnknownVariable {
  readonly variable: string;
  readonly closest: string | undefined;
}

/** The INFERMETER_* variables of `env` that `table` does not have (typing mistakes, mostly). */
export function unknownVariables(env: Readonly<Record<string, string | undefined>>, table: readonly Row[] = CONFIGURATION_TABLE): UnknownVariable[] {
  const names = variableNames(table);
  const known = new Set(names);
  // Names matched by a pattern of the table; the pattern's own check validates the rest of the name.
  const patternPrefixes = table.filter((v) => v.name.includes('<')).map((v) => v.name.slice(0, v.name.indexOf('<')));
  const unknown: UnknownVariable[] = [];
  for (const variable of Object.keys(env)) {
    if (!variable.startsWith('INFERMETER_') || known.has(variable) || SERVICE_LINK.test(variable)) continue;
    if (patternPrefixes.some((prefix) => variable.startsWith(prefix))) continue;
    unknown.push({ variable, closest: closestVariable(variable, names) });
  }
  return unknown;
}

/** The known variable nearest to `name` by edit distance, when near enough to be the one meant. */
export function closestVariable(name: string, names: readonly string[] = VARIABLE_NAMES): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const known of names) {
    const d = editDistance(name, known);
    if (d < bestDistance) {
      best = known;
      bestDistance = d;
    }
  }
  // Two edits, or a third of what follows INFERMETER_: beyond that the guess would mislead.
  const own = name.replace(/^INFERMETER_/, '').length;
  return bestDistance <= Math.max(2, Math.floor(own / 3)) ? best : undefined;
}

/** Edits (insert, delete, replace, swap two neighbours) from a to b: optimal string alignment. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [Array.from({ length: b.length + 1 }, (_, j) => j)];
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      let d = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      row[j] = d;
    }
    rows.push(row);
  }
  return rows[a.length]![b.length]!;
}
