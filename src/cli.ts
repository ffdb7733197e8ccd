#!/usr/bin/env -S node --max-semi-space-size=32 --initial-heap-size=64
// Entry point: `infermeter` reads the configuration, starts, and stops on SIGTERM/SIGINT;
// `infermeter sim`, `demo`, `--help` and `--version` do what --help says. Only the entry points
// call process.exit: this file, the demo it starts (demo.ts), and the two that run as processes
// of their own, the image's healthcheck (healthcheck.ts) and a cluster worker
// (cluster/worker-main.ts); test/unit/architecture.test.ts keeps it so. bin/infermeter.js checks
// the Node version before it loads this.
import { ConfigError, loadConfig, type Config } from './config/config.ts';
import type { Infermeter } from './app.ts';
import { describeBindError } from './cli/bind-error.ts';
import { parseDemoArguments } from './cli/demo-arguments.ts';
import { helpText } from './cli/help.ts';
import { createLogger } from './log.ts';
import { VERSION } from './version.ts';

/** A repeat of the first stop signal within this is taken as the same one, delivered twice. */
const DUPLICATE_SIGNAL_MS = 1000;

let config: Config | undefined;

async function main(args: readonly string[]): Promise<void> {
  const command = args[0];
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(helpText(VERSION));
    return;
  }
  if (command === '--version' || command === '-v') {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  if (command === 'sim') return sim(args.slice(1));
  if (command === 'usage') {
    const { runUsage } = await import('./cli/usage-command.ts');
    const result = await runUsage(args.slice(1));
    process.stdout.write(result.out);
    process.stderr.write(result.err);
    process.exitCode = result.code;
    return;
  }
  if (command === 'demo') {
    // Its flags checked before its modules load, so that a typo is answered at once; demo.ts
    // reads --duration itself (it also runs as `node src/demo.ts`).
    const parsed = parseDemoArguments(args.slice(1));
    if ('error' in parsed) {
      process.stderr.write(`infermeter demo: ${parsed.error}\n`);
      process.exit(2);
    }
    await import('./demo.ts'); // runs the demo
    return;
  }
  if (command !== undefined) {
    process.stderr.write(`infermeter: unknown command ${JSON.stringify(command)}; infermeter --help lists the commands and the configuration\n`);
    process.exit(2);
  }
  try {
    config = loadConfig(process.env, { requireUpstream: true });
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`infermeter: ${error.message}\n(infermeter --help lists every variable)\n`);
      process.exit(2);
    }
    throw error;
  }
  const started = config;
  const log = createLogger(started.logLevel);
  // The stop signals are handled before any port listens: a SIGTERM while starting is the
  // first of a drain, which starts as soon as the listeners are up (not the default action,
  // which would end the process with nothing drained).
  let app: Infermeter | undefined;
  let first: { signal: string; at: number } | undefined;
  const drain = (running: Infermeter): void => {
    running.drain().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  const stop = (signal: string): void => {
    const now = performance.now();
    if (first !== undefined) {
      // The same signal again at once is the first one delivered twice, not an operator's
      // second: `npm start` (its script execs node) forwards the SIGTERM or SIGINT it gets, and a
      // signal to the process group (Ctrl-C, systemd's default KillMode) reaches node directly too.
      if (signal === first.signal && now - first.at < DUPLICATE_SIGNAL_MS) return;
      process.exit(1); // a second signal: leave now
    }
    first = { signal, at: now };
    log.info('draining: not ready, finishing requests in flight', { signal, timeout_ms: started.limits.drainTimeoutMs });
    if (app !== undefined) drain(app);
  };
  // SIGHUP: per-tenant metering's alias file and goodput's SLO classes file read again (a bad one
  // keeps what is in use), the access log's file opened again at its path (logrotate); with
  // nothing to reload, ignored (its default action would end the process, streams and all).
  // While starting, the files were just read.
  const aliases = config.tenant.aliasesFile !== undefined;
  const slo = config.slo.file !== undefined;
  const prices = config.prices.file !== undefined;
  const accessLogFile = config.accessLog !== undefined && config.accessLog !== 'stdout';
  process.on('SIGHUP', () => {
    if (app === undefined) return;
    if (aliases) app.reloadTenantAliases();
    if (slo) app.reloadSlo();
    if (prices) app.reloadPrices();
    if (accessLogFile) app.reopenAccessLog();
    if (!aliases && !slo && !prices && !accessLogFile)
      log.info('SIGHUP ignored: nothing to reload (no INFERMETER_TENANT_ALIASES, INFERMETER_SLO_FILE, INFERMETER_PRICES_FILE nor INFERMETER_ACCESS_LOG file)');
  });
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  log.debug('starting: SIGTERM and SIGINT drain from here on');
  // Loaded only to start: --help, --version and a refused configuration answer without the proxy's
  // modules (a third of the time of such a run).
  app =
    started.workers > 1
      ? await (await import('./cluster/primary.ts')).startClusterPrimary(started, process.env, { log, workers: started.workers })
      : await (await import('./app.ts')).startInfermeter(started, { log });
  // A stop signal while starting: drained now that it runs.
  if (first !== undefined) drain(app);
}

async function sim(args: readonly string[]): Promise<void> {
  // Loaded for this command only: the simulated model server is not the proxy's.
  const { parseSimArguments, runSim } = await import('./cli/sim-command.ts');
  const parsed = parseSimArguments(args);
  if ('help' in parsed) {
    process.stdout.write(parsed.help);
    return;
  }
  if ('error' in parsed) {
    process.stderr.write(`infermeter sim: ${parsed.error}\n`);
    process.exit(2);
  }
  let close: () => Promise<void>;
  try {
    close = await runSim(parsed, process.stdout, /^(?:1|true)$/i.test(process.env.INFERMETER_ALLOW_ALL_ZERO_IP?.trim() ?? ''));
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    const hint = e.code === 'EADDRINUSE' ? `: port ${parsed.port} is in use; choose another with --port N (0 picks a free one)` : `: ${e.message}`;
    process.stderr.write(`infermeter sim: cannot listen on ${parsed.host}:${parsed.port}${hint}\n`);
    process.exit(1);
  }
  // Every signal handled (npm's forward and the process group's both arrive on Ctrl+C): the first
  // stops it, a repeat while it stops is the same request. close() cuts its connections, so it ends.
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const bind = config === undefined ? undefined : describeBindError(error, config);
  const e = error as NodeJS.ErrnoException;
  process.stderr.write(`infermeter: ${bind ?? `failed to start: ${e.code ?? ''} ${e.message ?? String(error)}`}\n`);
  process.exit(1);
});
