// The alias file, live: read at start by the configuration (a bad file stops the start), read
// again on SIGHUP (`reload()`) and when the file changes (polled: an editor's or a ConfigMap's
// rename replaces the file, which a watch of the old inode would miss). A bad file on reload
// keeps the mapping in use and says so in a warning; the file's content is never logged.
import { unwatchFile, watchFile, type Stats } from 'node:fs';
import { readTenantAliases } from '../config/tenant-config.ts';
import type { Logger } from '../log.ts';

export interface TenantAliases {
  /** The mapping in use: tenant as it arrives -> readable name. */
  current(): ReadonlyMap<string, string>;
  /** Reads the file again; true when the new mapping is in use. */
  reload(): boolean;
  /** Called with every mapping taken into use after the first (the label cap admits its names). */
  onChange(listener: (aliases: ReadonlyMap<string, string>) => void): void;
  /** Stops watching the file. */
  close(): void;
}

export interface TenantAliasOptions {
  /** undefined: no file, the mapping stays empty. */
  readonly file: string | undefined;
  /** The mapping read at start. */
  readonly initial: ReadonlyMap<string, string>;
  readonly log: Logger;
  /** How often the file's modification time and size are looked at; 0: not watched. */
  readonly watchIntervalMs?: number;
}

export function createTenantAliases(options: TenantAliasOptions): TenantAliases {
  const { file, log } = options;
  let aliases = options.initial;
  const listeners: Array<(aliases: ReadonlyMap<string, string>) => void> = [];
  const reload = (): boolean => {
    if (file === undefined) return false;
    const read = readTenantAliases(file);
    if (!read.ok) {
      log.warn('INFERMETER_TENANT_ALIASES not reloaded: the mapping in use is kept', { file, expected: read.expected });
      return false;
    }
    aliases = read.aliases;
    log.info('INFERMETER_TENANT_ALIASES reloaded', { file, aliases: aliases.size });
    for (const l of listeners) l(aliases);
    return true;
  };
  const interval = options.watchIntervalMs ?? 2000;
  let watching = false;
  if (file !== undefined && interval > 0) {
    watching = true;
    const changed = (now: Stats, before: Stats): void => {
      // A file that went away is not a mapping: the one in use stays, without a warning per poll.
      if (now.mtimeMs === 0 && now.size === 0) return;
      if (now.mtimeMs !== before.mtimeMs || now.size !== before.size || now.ino !== before.ino) reload();
    };
    watchFile(file, { interval, persistent: false }, changed);
  }
  return {
    current: () => aliases,
    reload,
    onChange: (listener) => listeners.push(listener),
    close() {
      if (watching) unwatchFile(file!);
      watching = false;
    },
  };
}
