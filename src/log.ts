// One JSON object per line on stderr: machine-readable for log pipelines, readable enough by eye.
// Callers pass fields explicitly; nothing logs request headers or bodies.

export type LogFields = Readonly<Record<string, string | number | boolean | undefined>>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Logs at warn level at most once per `intervalMs` for the same key: for faults that repeat per request. */
  warnThrottled(key: string, msg: string, fields?: LogFields, intervalMs?: number): void;
}

/** INFERMETER_LOG_LEVEL's values. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

const RANK: Readonly<Record<LogLevel, number>> = { debug: 10, info: 20, warn: 30, error: 40 };

export function createLogger(level: LogLevel, write: (line: string) => void = (line) => process.stderr.write(line), now: () => number = Date.now): Logger {
  const min = RANK[level];
  const lastWarned = new Map<string, number>();
  const emit = (lvl: LogLevel, msg: string, fields?: LogFields): void => {
    if (RANK[lvl] < min) return;
    write(`${JSON.stringify({ time: new Date(now()).toISOString(), level: lvl, msg, ...fields })}\n`);
  };
  return {
    debug: (msg, fields) => emit('debug', msg, fields),
    info: (msg, fields) => emit('info', msg, fields),
    warn: (msg, fields) => emit('warn', msg, fields),
    error: (msg, fields) => emit('error', msg, fields),
    warnThrottled(key, msg, fields, intervalMs = 60_000) {
      const t = now();
      const last = lastWarned.get(key);
      if (last !== undefined && t - last < intervalMs) return;
      if (lastWarned.size > 1000) lastWarned.clear(); // keys are error codes; this is a backstop
      lastWarned.set(key, t);
      emit('warn', msg, fields);
    },
  };
}

/** A logger that drops everything; for tests that do not look at logs. */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  warnThrottled() {},
};
