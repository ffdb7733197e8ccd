#!/usr/bin/env -S node --max-semi-space-size=8 --initial-heap-size=64
// Entry point: read the configuration, start, and stop on SIGTERM/SIGINT. The only place that
// calls process.exit.
import { ConfigError, loadConfig } from './config/config.ts';
import { startInfermeter } from './app.ts';
import { startClusterPrimary } from './cluster/primary.ts';
import { createLogger } from './log.ts';

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
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) process.exit(1); // a second signal: leave now
    stopping = true;
    log.info('draining: not ready, finishing requests in flight', { signal, timeout_ms: config.security.drainTimeoutMs });
    app.drain().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error: unknown) => {
  const e = error as NodeJS.ErrnoException;
  process.stderr.write(`infermeter: failed to start: ${e.code ?? ''} ${e.message ?? String(error)}\n`);
  process.exit(1);
});
