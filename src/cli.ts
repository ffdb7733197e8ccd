#!/usr/bin/env -S node --max-semi-space-size=8 --initial-heap-size=64
// Entry point: read the configuration, start, and stop on SIGTERM/SIGINT. The only place that
// calls process.exit.
import { ConfigError, loadConfig } from './config/config.ts';
import { startInfermeter } from './app.ts';
import { startClusterPrimary } from './cluster/primary.ts';
import { createLogger } from './log.ts';

/** A repeat of the first stop signal within this is taken as the same one, delivered twice. */
const DUPLICATE_SIGNAL_MS = 1000;

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env, { requireUpstream: true });
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`infermeter: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const log = createLogger(config.logLevel);
  const app = config.workers > 1 ? await startClusterPrimary(config, process.env, { log, workers: config.workers }) : await startInfermeter(config, { log });
  let first: { signal: string; at: number } | undefined;
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
    log.info('draining: not ready, finishing requests in flight', { signal, timeout_ms: config.security.drainTimeoutMs });
    app.drain().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  // SIGHUP: per-tenant metering's alias file read again (a bad one keeps the mapping in use).
  if (config.tenant.aliasesFile !== undefined) process.on('SIGHUP', () => app.reloadTenantAliases());
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error: unknown) => {
  const e = error as NodeJS.ErrnoException;
  process.stderr.write(`infermeter: failed to start: ${e.code ?? ''} ${e.message ?? String(error)}\n`);
  process.exit(1);
});
