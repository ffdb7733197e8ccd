// A listener that cannot bind (the port taken, a privileged port, an address not on this host)
// is reported with the setting that chose it, so that the operator knows what to change:
// Node's own `listen EADDRINUSE 127.0.0.1:1027` names no variable.
import type { Config } from '../config/config.ts';

const REASONS: Readonly<Record<string, string>> = {
  EADDRINUSE: 'the port is in use by another process',
  EACCES: 'binding a port below 1024 needs privileges',
  EADDRNOTAVAIL: 'the address is not one of this host',
};

interface Listener {
  readonly what: string;
  readonly host: string;
  readonly port: number;
  readonly hostSource: string | undefined;
  readonly portSource: string | undefined;
  readonly portVariable: string;
  readonly hostVariable: string;
}

/** One line naming the variable (and value) behind a failed bind, or undefined for other errors. */
export function describeBindError(error: unknown, config: Config): string | undefined {
  const e = error as NodeJS.ErrnoException & { address?: string; port?: number };
  const reason = e?.code === undefined ? undefined : REASONS[e.code];
  if (reason === undefined || e.syscall !== 'listen') return undefined;
  const { sources } = config;
  const listeners: Listener[] = [
    {
      what: 'data plane',
      host: config.host,
      port: config.port,
      hostSource: sources.host,
      portSource: sources.port,
      hostVariable: 'INFERMETER_HOST',
      portVariable: 'INFERMETER_PORT',
    },
    {
      what: 'management port',
      host: config.managementHost,
      port: config.managementPort,
      hostSource: sources.managementHost,
      portSource: sources.managementPort,
      hostVariable: 'INFERMETER_MANAGEMENT_HOST',
      portVariable: 'INFERMETER_MANAGEMENT_PORT',
    },
    {
      what: 'metrics port',
      host: config.managementHost,
      port: config.metricsPort,
      hostSource: sources.managementHost,
      portSource: sources.metricsPort,
      hostVariable: 'INFERMETER_MANAGEMENT_HOST',
      portVariable: 'INFERMETER_METRICS_PORT',
    },
  ];
  const matching = listeners.filter((l) => l.port === e.port);
  const byHost = matching.filter((l) => e.address === undefined || sameHost(l.host, e.address));
  const hits = byHost.length > 0 ? byHost : matching;
  if (hits.length === 0) return undefined;
  const where = `${e.address ?? hits[0]!.host}:${e.port}`;
  if (e.code === 'EADDRNOTAVAIL') {
    const l = hits[0]!;
    return `cannot listen on ${where} (${hits.map((h) => h.what).join(' and ')}): ${reason}; it is set by ${setting(l.hostSource, l.hostVariable, l.host)}: set it to an address of this host`;
  }
  const set = hits.map((l) => setting(l.portSource, l.portVariable, String(l.port)));
  return `cannot listen on ${where} (${hits.map((h) => h.what).join(' and ')}): ${reason}; the port is set by ${set.join(' and ')}: set ${hits.map((l) => l.portVariable).join(' and ')} to a free port (0 picks one)`;
}

/** `INFERMETER_PORT=1025`, `INFERMETER_CONFIG ServerConfig.port (1025)`, or the default. */
function setting(source: string | undefined, variable: string, value: string): string {
  if (source === undefined) return `${variable}, unset: its default ${value}`;
  return source.includes(' ') ? `${source} (${value})` : `${source}=${value}`;
}

function sameHost(configured: string, bound: string): boolean {
  return configured === bound || (configured === 'localhost' && (bound === '127.0.0.1' || bound === '::1'));
}
