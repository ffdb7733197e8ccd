// Where the image's HEALTHCHECK asks, from the container's command (main-command.ts): a
// container started as `IMAGE sim` runs the simulator, whose /health is where its --host and
// --port put it; any other runs infermeter, asked on its management port as its configuration
// says (health-probe.ts).
import { parseSimArguments } from '../cli/sim-command.ts';
import { loadConfig } from '../config/config.ts';
import { healthUrl } from './health-probe.ts';

/** The URL of /health to ask; throws with a message where none can be known. */
export function healthTarget(args: readonly string[] | undefined, env: NodeJS.ProcessEnv): URL {
  if (args?.[0] === 'sim') {
    const sim = parseSimArguments(args.slice(1));
    if ('error' in sim) throw new Error(`the container runs infermeter sim with arguments it refuses: ${sim.error}`);
    if ('help' in sim) throw new Error('the container runs infermeter sim --help, which serves nothing');
    if (sim.port === 0) throw new Error('the container runs infermeter sim --port 0 (a free port): the probe cannot know which');
    const wildcard = ['0.0.0.0', '::', '0:0:0:0:0:0:0:0'].includes(sim.host);
    const host = wildcard ? '127.0.0.1' : sim.host.includes(':') ? `[${sim.host}]` : sim.host;
    return new URL(`http://${host}:${sim.port}/health`);
  }
  return healthUrl(loadConfig(env, { probeAccessLog: false })); // the server opened the log already
}
