// `infermeter demo [--duration S]`: its one flag, checked as `infermeter sim` checks its own, so
// that a typo or a bad value stops it with a message instead of a demo that runs forever.
export interface DemoArguments {
  /** Seconds until it stops by itself; undefined: until SIGINT/SIGTERM. */
  readonly durationSeconds: number | undefined;
}

/** Parses `--duration S` (or `--duration=S`, S > 0 seconds); a message on anything else. */
export function parseDemoArguments(args: readonly string[]): DemoArguments | { readonly error: string } {
  let durationSeconds: number | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg : arg.slice(0, eq);
    if (name !== '--duration') {
      const hint = /^--?d/.test(name) ? '; did you mean --duration?' : '';
      return { error: `unknown argument ${JSON.stringify(arg)}: infermeter demo takes --duration S (seconds) only${hint}` };
    }
    const value = eq === -1 ? args[++i] : arg.slice(eq + 1);
    if (value === undefined || value === '') return { error: '--duration needs a value (seconds)' };
    const seconds = /^\d+(\.\d+)?$/.test(value) ? Number(value) : Number.NaN;
    if (!(seconds > 0 && seconds <= 86_400)) return { error: `--duration expects seconds, more than 0 and at most 86400, got ${JSON.stringify(value)}` };
    durationSeconds = seconds;
  }
  return { durationSeconds };
}
