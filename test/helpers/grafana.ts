// What Grafana does with a dashboard's Prometheus queries, for tests that run them: the panels'
// queries (rows' nested panels included), the template variables filled as Grafana fills them
// (query variables from label_values() through Prometheus' label API, custom ones from their
// options, "All" of a multi-value variable as a regex alternation of every value), and the
// built-in $__rate_interval and $__range.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Prometheus } from './prometheus.ts';

export const VLLM_DASHBOARDS_DIR = fileURLToPath(new URL('../../../shared/fixtures/vllm-dashboards/', import.meta.url));

/** For `describe(..., { skip })`: a reason to skip where the dashboards are missing, never under CI. */
export const vllmDashboardsSkip: string | false =
  existsSync(VLLM_DASHBOARDS_DIR) || process.env.CI ? false : `vLLM's dashboards not found at ${VLLM_DASHBOARDS_DIR} (a clone beside ../shared has them)`;

export interface Dashboard {
  readonly file: string;
  readonly json: DashboardJson;
}

interface Panel {
  readonly title?: string;
  readonly panels?: readonly Panel[];
  readonly targets?: ReadonlyArray<{ readonly expr?: string; readonly refId?: string; readonly hide?: boolean }>;
}

interface Variable {
  readonly name: string;
  readonly type: string;
  readonly query?: string | { readonly query?: string };
  readonly includeAll?: boolean;
  readonly multi?: boolean;
  readonly allValue?: string | null;
  readonly current?: { readonly value?: string | readonly string[] };
}

interface DashboardJson {
  readonly panels?: readonly Panel[];
  readonly templating?: { readonly list?: readonly Variable[] };
}

/** Every dashboard of the folder; under CI a missing folder throws. */
export function vllmDashboards(): Dashboard[] {
  if (!existsSync(VLLM_DASHBOARDS_DIR)) {
    if (process.env.CI) throw new Error(`CI: vLLM's dashboards are missing at ${VLLM_DASHBOARDS_DIR}`);
    return [];
  }
  return readdirSync(VLLM_DASHBOARDS_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((file) => ({ file, json: JSON.parse(readFileSync(VLLM_DASHBOARDS_DIR + file, 'utf8')) as DashboardJson }));
}

export interface PanelQuery {
  readonly panel: string;
  readonly refId: string;
  readonly expr: string;
}

export function panelQueries(d: Dashboard): PanelQuery[] {
  const out: PanelQuery[] = [];
  const walk = (panels: readonly Panel[] | undefined): void => {
    for (const p of panels ?? []) {
      walk(p.panels);
      for (const t of p.targets ?? [])
        if (t.expr !== undefined && t.expr.trim() !== '' && t.hide !== true) out.push({ panel: p.title ?? '', refId: t.refId ?? '', expr: t.expr });
    }
  };
  walk(d.json.panels);
  return out;
}

/** A variable's possible fillings: one value, or a list (multi-value, "All"). */
export type Filling = string | readonly string[];

/**
 * Each variable's fillings as Grafana offers them: a query variable from its label_values()
 * against `prom`, in dashboard order (a variable may use those before it); a multi-value one
 * with "All" (the dashboards' current selection, or Grafana's first option when the saved one is
 * not among the values) gets every value at once; a single-value one each value in turn; a
 * custom one each of its options in turn.
 */
export async function fillVariables(d: Dashboard, prom: Prometheus): Promise<Map<string, Filling[]>> {
  const fillings = new Map<string, Filling[]>();
  for (const v of d.json.templating?.list ?? []) {
    if (v.type === 'custom') {
      const text = typeof v.query === 'string' ? v.query : '';
      // "text : value, text : value" (a value without " : " is its own text).
      const options = text.split(',').map((o) => (o.includes(' : ') ? o.split(' : ')[1]! : o).trim());
      fillings.set(v.name, options);
    } else if (v.type === 'query') {
      const def = typeof v.query === 'string' ? v.query : (v.query?.query ?? '');
      if (def.trim() === '') continue; // a query variable with no query (query_statistics' query0): nothing to fill, no panel uses it
      const values = await labelValues(expand(def, firstFillings(fillings), {}), prom);
      if (values.length === 0) throw new Error(`variable ${v.name}: ${def} has no values`);
      const current = v.current?.value;
      const saved = (Array.isArray(current) ? current : [current]).filter((x): x is string => typeof x === 'string');
      const all = v.includeAll === true && (saved.includes('$__all') || !saved.every((s) => values.includes(s)));
      fillings.set(v.name, all ? [values] : v.multi === true ? [values] : values);
    }
  }
  return fillings;
}

function firstFillings(fillings: ReadonlyMap<string, Filling[]>): Map<string, Filling> {
  return new Map([...fillings].map(([k, v]) => [k, v[0]!]));
}

/** label_values(label) or label_values(selector, label), through /api/v1/label/<label>/values. */
async function labelValues(def: string, prom: Prometheus): Promise<string[]> {
  const m = /^\s*label_values\((?:(.*),\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$/s.exec(def);
  if (m === null) throw new Error(`not a label_values() query: ${def}`);
  const [, selector, label] = m;
  const match = selector === undefined ? '' : `?match[]=${encodeURIComponent(selector)}`;
  return ((await prom.api(`/api/v1/label/${label}/values${match}`)) as string[]).sort();
}

/** Regex metacharacters escaped as Grafana's Prometheus data source escapes a multi-value item. */
const regexEscape = (s: string): string => s.replace(/[\\^$*+?.()|[\]{}]/g, '\\\\$&');

/** The variables of `expr` replaced (`$name`, `${name}`, `[[name]]`), built-ins included. */
export function expand(expr: string, values: ReadonlyMap<string, Filling>, builtins: Readonly<Record<string, string>>): string {
  return expr.replace(/\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)/g, (whole, a: string | undefined, b: string | undefined, c: string | undefined) => {
    const name = (a ?? b ?? c)!;
    if (name in builtins) return builtins[name]!;
    const v = values.get(name);
    if (v === undefined) return whole;
    if (typeof v === 'string') return v;
    return v.length === 1 ? regexEscape(v[0]!) : `(${v.map(regexEscape).join('|')})`;
  });
}

/** The variables an expression uses. */
export function variablesOf(expr: string): Set<string> {
  return new Set([...expr.matchAll(/\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)/g)].map((m) => (m[1] ?? m[2] ?? m[3])!));
}

/** Every combination of the fillings of the variables `expr` uses. */
export function combinations(expr: string, fillings: ReadonlyMap<string, Filling[]>): Array<Map<string, Filling>> {
  let out: Array<Map<string, Filling>> = [new Map()];
  for (const name of variablesOf(expr)) {
    const options = fillings.get(name);
    if (options === undefined) continue;
    out = out.flatMap((partial) => options.map((o) => new Map([...partial, [name, o]])));
  }
  return out;
}
