// The alias file, live (config/parse/file-reload.ts: read again on SIGHUP and when it changes; a bad
// file on reload keeps the mapping in use), with listeners told of each new mapping.
import { createFileReload } from '../config/parse/file-reload.ts';
import { readTenantAliases } from './tenant-config.ts';
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
  let aliases = options.initial;
  const listeners: Array<(aliases: ReadonlyMap<string, string>) => void> = [];
  const file = createFileReload({
    file: options.file,
    variable: 'INFERMETER_TENANT_ALIASES',
    kept: 'the mapping in use is kept',
    read: (path) => readTenantAliases(path),
    apply: (read) => {
      aliases = read.aliases;
      for (const l of listeners) l(aliases);
      return { aliases: aliases.size };
    },
    log: options.log,
    watchIntervalMs: options.watchIntervalMs,
  });
  return {
    current: () => aliases,
    reload: file.reload,
    onChange: (listener) => listeners.push(listener),
    close: file.close,
  };
}
