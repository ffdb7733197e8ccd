// A configuration file in use while the proxy runs (the tenant aliases, the SLO classes): read
// at start by the configuration (a bad file stops the start), read again on SIGHUP (`reload()`)
// and when the file changes (polled: an editor's or a ConfigMap's rename replaces the file,
// which a watch of the old inode would miss). A bad file on reload keeps what is in use and
// says so in a warning; the file's content is never logged.
import { statSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import type { LogFields, Logger } from '../../log.ts';

type FileRead<T> = ({ readonly ok: true } & T) | { readonly ok: false; readonly expected: string };

export interface FileReloadOptions<T> {
  /** undefined: no file; reload() does nothing. */
  readonly file: string | undefined;
  /** The variable that names the file, for the log lines. */
  readonly variable: string;
  /** What a failed reload keeps, as the warning says it: "the mapping in use is kept". */
  readonly kept: string;
  readonly read: (file: string) => FileRead<T>;
  /** Takes a good read into use; the fields the log line gives (counts, never content). */
  readonly apply: (read: { readonly ok: true } & T) => LogFields;
  readonly log: Logger;
  /** How often the file's modification time, size and inode are looked at; 0: not watched. */
  readonly watchIntervalMs?: number | undefined;
}

export interface FileReload {
  /** Reads the file again; true when what it holds is in use. */
  reload(): boolean;
  /** Stops watching the file. */
  close(): void;
}

export function createFileReload<T>(options: FileReloadOptions<T>): FileReload {
  const { file, variable, log } = options;
  // The version of the file last read and whether it was good: an edit then a SIGHUP is seen by
  // both the poll and the signal, and is read and logged once.
  let last: { readonly version: string; readonly ok: boolean } | undefined;
  const reload = (): boolean => {
    if (file === undefined) return false;
    const version = versionOf(file);
    if (version !== undefined && version === last?.version) {
      log.debug(`${variable} unchanged since it was last read`, { file });
      return last.ok;
    }
    const read = options.read(file);
    last = version === undefined ? undefined : { version, ok: read.ok };
    if (!read.ok) {
      log.warn(`${variable} not reloaded: ${options.kept}`, { file, expected: read.expected });
      return false;
    }
    log.info(`${variable} reloaded`, { file, ...options.apply(read) });
    return true;
  };
  const interval = options.watchIntervalMs ?? 2000;
  let watching = false;
  if (file !== undefined && interval > 0) {
    watching = true;
    watchFile(file, { interval, persistent: false }, (now: Stats, before: Stats) => {
      // A file that went away is not a new one: what is in use stays, without a warning per poll.
      if (now.mtimeMs === 0 && now.size === 0) return;
      if (now.mtimeMs !== before.mtimeMs || now.size !== before.size || now.ino !== before.ino) reload();
    });
  }
  return {
    reload,
    close() {
      if (watching) unwatchFile(file!);
      watching = false;
    },
  };
}

/** Modified time, size and inode; undefined when the file cannot be seen. */
function versionOf(path: string): string | undefined {
  try {
    const s = statSync(path);
    return `${s.mtimeMs}:${s.size}:${s.ino}`;
  } catch {
    return undefined;
  }
}
