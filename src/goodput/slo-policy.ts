// The SLO classes, live: INFERMETER_SLO_FILE's classes (then INFERMETER_SLO's `default`), read
// again on SIGHUP and when the file changes (config/parse/file-reload.ts, as the tenant aliases are; a
// bad file on reload keeps the classes in use). Which class a
// request falls in is decided by its model_name and tenant labels, which are bounded: the
// answers are cached per pair, and the cache is emptied when the classes change.
import { createFileReload } from '../config/parse/file-reload.ts';
import { compileGlob, type Glob, globMatches } from '../config/parse/glob.ts';
import { DEFAULT_CLASS, readSloFile, type SloClass, type SloConfig, type SloKey } from './slo-config.ts';
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
  readonly model: Glob;
  readonly tenant: Glob;
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
  const reloader = createFileReload({
    file,
    variable: 'INFERMETER_SLO_FILE',
    kept: 'the SLO classes in use are kept',
    read: (path) => readSloFile(path),
    apply: (read) => {
      classes = [...read.classes, ...fallback];
      compiled = compile(classes);
      cache.clear();
      return { classes: read.classes.length };
    },
    log,
    watchIntervalMs: options.watchIntervalMs,
  });
  return {
    classes: () => classes,
    allowance: config.allowance,
    classOf(model, tenant) {
      const key = tenant === undefined ? `-${model}` : `${tenant.length}:${tenant}${model}`;
      const hit = cache.get(key);
      if (hit !== undefined) return hit ?? undefined;
      // A request without metering by tenant matches only a class for every tenant.
      const found = compiled.find((c) => globMatches(c.model, model) && (tenant === undefined ? c.slo.tenant === '*' : globMatches(c.tenant, tenant)))?.slo;
      if (cache.size >= MAX_CACHED) cache.clear();
      cache.set(key, found ?? null);
      return found;
    },
    reload: reloader.reload,
    close: reloader.close,
  };
}

function compile(classes: readonly SloClass[]): Compiled[] {
  return classes.map((slo) => ({ slo, model: compileGlob(slo.model), tenant: compileGlob(slo.tenant) }));
}
