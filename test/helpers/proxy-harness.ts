// Starts infermeter on port 0 in front of a given upstream, the way the CLI does, and fetches
// its /metrics. Every test closes what it started through t.after.
import type { TestContext } from 'node:test';
import { startInfermeter, type Infermeter, type StartOptions } from '../../src/app.ts';
import { loadConfig, type Env } from '../../src/config/config.ts';
import { silentLogger } from '../../src/log.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { parseExposition, type Exposition } from './exposition.ts';

/** Every test's infermeter: ports chosen by the system, the upstream not scraped (engine tests set it). */
const TEST_ENV = {
  INFERMETER_PORT: '0',
  INFERMETER_MANAGEMENT_PORT: '0',
  INFERMETER_METRICS_PORT: '0',
  INFERMETER_UPSTREAM_METRICS: 'off',
};

/** The environment of a test's infermeter with worker processes (startClusterPrimary): they inherit it, PATH with it. */
export function clusterEnv(upstream: string, env: Env = {}): Env {
  return { PATH: process.env.PATH ?? '', INFERMETER_UPSTREAM: upstream, ...TEST_ENV, ...env };
}

export async function startProxy(t: TestContext, upstream: string, env: Env = {}, options: Partial<StartOptions> = {}): Promise<Infermeter> {
  const config = loadConfig({ INFERMETER_UPSTREAM: upstream, ...TEST_ENV, ...env });
  // An impossible move of a request's lifecycle fails the test that provoked it.
  const violations: string[] = [];
  const app = await startInfermeter(config, { log: silentLogger, lifecycleViolation: (error) => violations.push(error.message), ...options });
  t.after(async () => {
    await app.close();
    if (violations.length > 0) throw new Error(`request lifecycle violated: ${violations.join('; ')}`);
  });
  return app;
}

export async function scrape(app: Infermeter): Promise<Exposition> {
  const res = await fetch(app.metricsUrl!);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return parseExposition(await res.text());
}

/** Resolves with the next `n` finished requests' samples that `counted` accepts, in the order they finish. */
export function nextFinished(app: Infermeter, n: number, counted: (sample: RequestSample) => boolean = () => true): Promise<RequestSample[]> {
  const samples: RequestSample[] = [];
  return new Promise((resolve) => {
    let done = false;
    app.metrics.addObserver({
      finished(sample) {
        if (done || !counted(sample)) return;
        samples.push(sample);
        if (samples.length === n) {
          done = true;
          resolve(samples);
        }
      },
    });
  });
}
