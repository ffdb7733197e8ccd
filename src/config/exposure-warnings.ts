// What the configuration exposes that the operator may not mean, said once at start (one line
// each, naming the variable that fixes it); nothing is refused. /metrics on every address with
// no token: anyone who reaches the port reads the traffic's figures and model names. A loopback
// address taken from the MindIE config file while in a container: a published port forwards to
// the container's own address, so nothing outside reaches it, yet /health answers inside.
import type { LogFields } from '../log.ts';
import type { Config } from './config.ts';
import { isAllAddresses } from './listen-addresses.ts';

export interface StartWarning {
  readonly msg: string;
  readonly fields: LogFields;
}

const isLoopback = (host: string): boolean => /^127\./.test(host) || host === '::1' || host === 'localhost' || /^::ffff:127\./i.test(host);

/** `container`: the evidence of running in a container (in-container.ts), undefined when none. */
export function exposureWarnings(config: Config, container: string | undefined): StartWarning[] {
  const warnings: StartWarning[] = [];
  if (config.metricsEnabled && isAllAddresses(config.managementHost) && config.security.metricsToken === undefined) {
    warnings.push({
      msg: '/metrics is served on every address without a token: anyone who reaches the port reads it; set INFERMETER_METRICS_TOKEN (or INFERMETER_METRICS_TOKEN_FILE), or INFERMETER_MANAGEMENT_HOST to a specific address',
      fields: { variable: 'INFERMETER_METRICS_TOKEN', address: config.managementHost, port: config.metricsPort },
    });
  }
  if (container !== undefined) {
    const fromFile = [
      {
        source: config.sources.host,
        host: config.host,
        fix: 'INFERMETER_HOST',
        plane: config.sources.managementHost === undefined ? 'the data, management and metrics ports' : 'the data port',
      },
      // An unset management address follows the data plane's: only its own file entry is its own.
      { source: config.sources.managementHost, host: config.managementHost, fix: 'INFERMETER_MANAGEMENT_HOST', plane: 'the management and metrics ports' },
    ];
    for (const { source, host, fix, plane } of fromFile) {
      if (source === undefined || !source.startsWith('INFERMETER_CONFIG') || !isLoopback(host)) continue;
      warnings.push({
        msg: `${source} is the loopback address ${host} and infermeter runs in a container: ${plane} cannot be reached from outside it, through a published port or otherwise; set ${fix} (it overrides the file) to the container's address`,
        fields: { variable: fix, source, address: host, container },
      });
    }
  }
  return warnings;
}
