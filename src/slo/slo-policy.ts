// The SLO classes, live: INFERMETER_SLO_FILE's classes (then INFERMETER_SLO's `default`), read
// at start by the configuration (a bad file stops the start), read again on SIGHUP (`reload()`)
// and when the file changes (polled, like the tenant aliases: a ConfigMap's rename replaces the
// file). A bad file on reload keeps the classes in use and says so in a warning. Which class a
// request falls in is decided by its model_name and tenant labels, which are bounded: the
// answers are cached per pair, and the cache is emptied when the classes change.
import { unwatchFile, watchFile, type Stats } from 'node:fs';
import { DEFAULT_CLASS, globRegExp, readSloFile, type SloClass, type SloConfig, type SloKey } from '../config/slo-config.ts';
import type { Logger } from '../log.ts';

export interface SloPolicy {
  /** The classes in use, in the order they are tried. */
  classes(): readonly SloClass[];
  /** The class of a request, by its model_name and tenant labels (tenant undefined: metering off). */
  classOf(model: string, tenant: string | undefined): SloClass | undefined;
  readonly allowance: Readonly<Record<SloKey, number>>;
  /** Reads the file again; true when the new classes are in use. */
  reload(): boolean;
  /** Stops watching the file. */
  close(): void;
}

export interface SloPolicyOptions {
  readonly config: SloConfig;
  readonly log: Logger;
  /** How often the file is looked at; 0: not watched. */
  readonly watchIntervalMs?: number;
}

interface Compiled {
  readonly slo: SloClass;
  readonly model: RegExp;
  readonly tenant: RegExp;
}

/** Pairs cached before the cache starts over (the labels are bounded; this bounds it regardless). */
const MAX_CACHED = 100_000;

export function createSloPolicy(options: SloPolicyOptions): SloPolicy {
  const { config, log } = options;
  const { file } = config;
  const fallback = config.classes.filter((c) => c.name === DEFAULT_CLASS);
  let classes: readonly SloClass[] = config.classes;
  let compiled = compile(classes);
  const cache = new Map<string, SloClass | null>();
  const reload = (): boolean => {
    if (file === undefined) return false;
    const read = readSloFile(file);
    if (!read.ok) {
      log.warn('INFERMETER_SLO_FILE not reloaded: the SLO classes in use are kept', { file, expected: read.expected });
      return false;
    }
    classes = [...read.classes, ...fallback];
    compiled = compile(classes);
    cache.clear();
    log.info('INFERMETER_SLO_FILE reloaded', { file, classes: read.classes.length });
    return true;
  };
  const interval = options.watchIntervalMs ?? 2000;
  let watching = false;
  if (file !== undefined && interval > 0) {
    watching = true;
    watchFile(file, { interval, persistent: false }, (now: Stats, before: Stats) => {
      if (now.mtimeMs === 0 && now.size === 0) return;
      if (now.mtimeMs !== before.mtimeMs || now.size !== before.size || now.ino !== before.ino) reload();
    });
  }
  return {
    classes: () => classes,
    allowance: config.allowance,
    classOf(model, tenant) {
      const key = tenant === undefined ? `-${model}` : `${tenant.length}:${tenant}${model}`;
      const hit = cache.get(key);
      if (hit !== undefined) return hit ?? undefined;
      // A request without metering by tenant matches only a class for every tenant.
      const found = compiled.find((c) => c.model.test(model) && (tenant === undefined ? c.slo.tenant === '*' : c.tenant.test(tenant)))?.slo;
      if (cache.size >= MAX_CACHED) cache.clear();
      cache.set(key, found ?? null);
      return found;
    },
    reload,
    close() {
      if (watching) unwatchFile(file!);
      watching = false;
    },
  };
}

function compile(classes: readonly SloClass[]): Compiled[] {
  return classes.map((slo) => ({ slo, model: globRegExp(slo.model), tenant: globRegExp(slo.tenant) }));
}
