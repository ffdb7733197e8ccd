// Goodput's configuration: the latency SLOs requests are held to. INFERMETER_SLO takes vLLM's
// `--goodput` syntax (`ttft:500 tpot:50`, milliseconds); INFERMETER_SLO_FILE, a JSON file of SLO
// classes by model and tenant (glob patterns), read here at start and again on reload through
// parseSloFile; INFERMETER_SLO_CLIENT_ALLOWANCE, milliseconds added to infermeter's own figures
// before they are compared, for a client that sees them later. Self-contained: config.ts calls
// parseSlo with its problem list.
import { nonEmpty, parseJson, readJsonText, utf8Capped, type Env, type Problem } from '../config/parse/parse.ts';

export const SLO_KEYS = ['ttft', 'tpot', 'e2el'] as const;
export type SloKey = (typeof SLO_KEYS)[number];

/** Milliseconds per key; a key left out is not part of the objective. */
export type SloTargets = Readonly<Partial<Record<SloKey, number>>>;

/** One class of requests and the SLOs they are held to (undefined targets: not judged). */
export interface SloClass {
  readonly name: string;
  /** Glob patterns (`*`, `?`) over the model_name and tenant labels. */
  readonly model: string;
  readonly tenant: string;
  readonly targets: SloTargets | undefined;
}

export interface SloConfig {
  /** The classes in the order they are tried: the file's, then INFERMETER_SLO's `default`. Empty: goodput off. */
  readonly classes: readonly SloClass[];
  /** INFERMETER_SLO_FILE's path; undefined: no file. */
  readonly file: string | undefined;
  /** Milliseconds added to infermeter's ttft, tpot and e2el before the comparison (all 0 by default). */
  readonly allowance: Readonly<Record<SloKey, number>>;
}

/** The class INFERMETER_SLO stands for. */
export const DEFAULT_CLASS = 'default';

const SYNTAX =
  'key:milliseconds pairs separated by spaces or commas, keys ttft, tpot and e2el, each at most once, values numbers >= 0 (vLLM\'s --goodput syntax), e.g. "ttft:500 tpot:50"';
const MAX_CLASSES = 1000;
const MAX_FILE_MIB = 1;
const readSloText = utf8Capped(MAX_FILE_MIB * 1024 * 1024);
const CLASS_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const PATTERN = /^[^\u0000-\u001f\u007f]{1,256}$/;

export type TargetsRead = { readonly ok: true; readonly targets: SloTargets } | { readonly ok: false; readonly what?: string };

/**
 * vLLM's `--goodput` pairs (benchmarks/benchmark_serving.py parse_goodput and
 * check_goodput_args): `key:value`, keys ttft, tpot, e2el, values in milliseconds, not negative.
 * Stricter than vLLM where vLLM would be silent: a key given twice is refused (vLLM keeps the
 * last), and so is an empty list.
 */
/** A key as a message names it: quoted when short and plain, else only its length (a file's content is not echoed). */
function keyName(key: string): string {
  return /^[A-Za-z0-9_.-]{1,32}$/.test(key) ? JSON.stringify(key) : `a key of ${key.length} characters`;
}

export function parseTargets(text: string): TargetsRead {
  const pairs = text.split(/[\s,]+/).filter((p) => p !== '');
  if (pairs.length === 0) return { ok: false };
  const targets: Partial<Record<SloKey, number>> = {};
  for (const pair of pairs) {
    const m = /^([a-z0-9]+):([^:]+)$/i.exec(pair);
    if (m === null) return { ok: false, what: `${keyName(pair.split(':')[0]!)} is not key:value` };
    const key = m[1]!.toLowerCase();
    const value = m[2]!;
    // Python's float() of a decimal: no hex, no inf or nan.
    if (!/^(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?$/i.test(value)) return { ok: false, what: `${keyName(key)}'s value is not a number of ms` };
    const ms = Number(value);
    if (!(SLO_KEYS as readonly string[]).includes(key)) return { ok: false, what: `${keyName(key)} is not one of ${SLO_KEYS.join(', ')}` };
    if (!Number.isFinite(ms) || ms < 0 || key in targets)
      return { ok: false, what: key in targets ? `${key} is given twice` : `${key}'s value is out of range` };
    targets[key as SloKey] = ms;
  }
  return { ok: true, targets: Object.freeze(targets) };
}

export function parseSlo(env: Env, problem: Problem, readFile: (path: string) => string = readSloText): SloConfig {
  const classes: SloClass[] = [];
  const file = nonEmpty(env.INFERMETER_SLO_FILE);
  if (file !== undefined) {
    const read = readSloFile(file, readFile);
    if (read.ok) classes.push(...read.classes);
    else problem('INFERMETER_SLO_FILE', read.expected, file);
  }
  const raw = env.INFERMETER_SLO;
  if (raw !== undefined && raw.trim() !== '' && raw.trim().toLowerCase() !== 'off') {
    const read = parseTargets(raw);
    if (read.ok) classes.push({ name: DEFAULT_CLASS, model: '*', tenant: '*', targets: read.targets });
    else problem('INFERMETER_SLO', SYNTAX, raw);
  }
  const allowance = { ttft: 0, tpot: 0, e2el: 0 };
  const rawAllowance = env.INFERMETER_SLO_CLIENT_ALLOWANCE;
  if (rawAllowance !== undefined && rawAllowance.trim() !== '') {
    const read = parseTargets(rawAllowance);
    if (!read.ok)
      problem('INFERMETER_SLO_CLIENT_ALLOWANCE', SYNTAX.replace('(vLLM\'s --goodput syntax), e.g. "ttft:500 tpot:50"', 'e.g. "ttft:5 e2el:5"'), rawAllowance);
    else if (file === undefined && classes.length === 0)
      problem('INFERMETER_SLO_CLIENT_ALLOWANCE', 'INFERMETER_SLO or INFERMETER_SLO_FILE to be set (an allowance widens an SLO)', rawAllowance);
    else Object.assign(allowance, read.targets);
  }
  return { classes, file, allowance: Object.freeze(allowance) };
}

export type SloFileRead = { readonly ok: true; readonly classes: readonly SloClass[] } | { readonly ok: false; readonly expected: string };

export function readSloFile(path: string, readFile: (path: string) => string = readSloText): SloFileRead {
  const read = readJsonText(path, readFile);
  return read.ok ? parseSloFile(read.text) : read;
}

/**
 * `{"classes": [{"name": "chat", "model": "llama-*", "tenant": "*", "slo": "ttft:500 tpot:50"}, ...]}`:
 * at most 1000 classes, tried in order, the first whose `model` and `tenant` globs (`*` any run,
 * `?` one character; default `*`) both match a request's model_name and tenant labels holds it
 * to its `slo` (vLLM's --goodput syntax), or, with `"slo": "off"`, leaves it unjudged. Names are
 * 1 to 64 of [A-Za-z0-9_.-], unique, and not `default` (INFERMETER_SLO's).
 */
export function parseSloFile(text: string): SloFileRead {
  const expected = (what: string): SloFileRead => ({ ok: false, expected: `a JSON object {"classes": [{"name", "model", "tenant", "slo"}, ...]}: ${what}` });
  const json = parseJson(text, MAX_FILE_MIB);
  if (!json.ok) return expected(json.what);
  const parsed = json.value;
  const list = (parsed as { classes?: unknown } | null)?.classes;
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) || !Array.isArray(list)) return expected('no "classes" array');
  const other = Object.keys(parsed).find((k) => k !== 'classes');
  if (other !== undefined) return expected(`the key ${keyName(other)}: only "classes" is known`);
  if (list.length > MAX_CLASSES) return expected(`more than ${MAX_CLASSES} classes`);
  const classes: SloClass[] = [];
  const names = new Set<string>();
  for (const [i, entry] of list.entries()) {
    const at = `class ${i + 1}`;
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return expected(`${at} is not an object`);
    const e = entry as Record<string, unknown>;
    const unknown = Object.keys(e).find((k) => !['name', 'model', 'tenant', 'slo'].includes(k));
    if (unknown !== undefined) return expected(`${at} has the key ${keyName(unknown)}: the keys are name, model, tenant and slo`);
    if (typeof e.name !== 'string' || !CLASS_NAME.test(e.name)) return expected(`${at}'s name is not 1 to 64 of A-Z a-z 0-9 _ . -`);
    if (e.name === DEFAULT_CLASS || names.has(e.name))
      return expected(`${at}'s name is ${e.name === DEFAULT_CLASS ? "reserved (default is INFERMETER_SLO's)" : 'used twice'}`);
    names.add(e.name);
    const model = e.model ?? '*';
    const tenant = e.tenant ?? '*';
    if (typeof model !== 'string' || !PATTERN.test(model)) return expected(`${at}'s model is not a pattern of 1 to 256 printable characters`);
    if (typeof tenant !== 'string' || !PATTERN.test(tenant)) return expected(`${at}'s tenant is not a pattern of 1 to 256 printable characters`);
    if (typeof e.slo !== 'string') return expected(`${at} has no slo (a string: ${SYNTAX}; or "off")`);
    let targets: SloTargets | undefined;
    if (e.slo.trim().toLowerCase() !== 'off') {
      const read = parseTargets(e.slo);
      if (!read.ok) return expected(`${at}'s slo is not ${SYNTAX}, nor "off"${read.what === undefined ? '' : `: ${read.what}`}`);
      targets = read.targets;
    }
    classes.push(Object.freeze({ name: e.name, model, tenant, targets }));
  }
  return { ok: true, classes };
}
