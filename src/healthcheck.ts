// The image's HEALTHCHECK command: exits 0 when /health answers 200, else 1 (Docker's codes; 2
// is reserved, so a configuration error is 1 as well). It reads the configuration as the CLI
// does, so it asks where infermeter listens however that was set; in a container started as
// `IMAGE sim` it asks the simulator (management/health-target.ts).
import { ConfigError } from './config/config.ts';
import { probeHealth } from './management/health-probe.ts';
import { healthTarget } from './management/health-target.ts';
import { mainCommandArgs } from './management/main-command.ts';

/** Below the image's HEALTHCHECK --timeout, so that the probe reports rather than is killed. */
const TIMEOUT_MS = 10_000;

let url: URL;
try {
  url = healthTarget(mainCommandArgs(), process.env);
} catch (error) {
  const message = error instanceof ConfigError || error instanceof Error ? error.message : String(error);
  process.stdout.write(`unhealthy: ${message}\n`);
  process.exit(1);
}
const result = await probeHealth(url, TIMEOUT_MS);
process.stdout.write(`${result.healthy ? 'healthy' : 'unhealthy'}: ${result.detail}\n`);
process.exit(result.healthy ? 0 : 1);
