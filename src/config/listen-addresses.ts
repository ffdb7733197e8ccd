// The listen-address policy: where the data plane and the management and metrics ports listen,
// read in MindIE's order (the variable, MIES_CONTAINER_*, the config file's ServerConfig, then a
// default) with what set each, so that a message names it; a fixed port two listeners on one
// address would share is refused. Listening on every address is refused unless allowed, as
// MindIE refuses it, recognised by the address rather than its spelling, and checked again on
// the address a host name resolves to when the port is bound (resolveListenAddress).
import { lookup } from 'node:dns/promises';
import { isIP, isIPv6 } from 'node:net';
import type { MindieServerConfig } from './parse/mindie-config.ts';
import { firstDefined, type Env, type Problem, type Source } from './parse/parse.ts';
import { readGroup, type GroupValues, type Row } from './variables/variable-table.ts';
import { CONFIGURATION_TABLE } from './variables.ts';

/** The ports: rows of group `listen` of the variables table. */
type Ports = GroupValues<typeof CONFIGURATION_TABLE, 'listen'>;

/** The variable (or config.json key) each listen setting came from; undefined: its default. */
interface ListenSources {
  readonly host: string | undefined;
  readonly port: string | undefined;
  readonly managementHost: string | undefined;
  readonly managementPort: string | undefined;
  readonly metricsPort: string | undefined;
}

export interface ListenAddresses {
  readonly host: string;
  /**
   * The data-plane and management addresses came from a default (INFERMETER_DEFAULT_HOST, the
   * image's 0.0.0.0, or 127.0.0.1), not from the operator: exempt from the every-address refusal.
   */
  readonly hostDefaulted: boolean;
  readonly managementHostDefaulted: boolean;
  readonly port: number;
  readonly managementHost: string;
  readonly managementPort: number;
  readonly metricsPort: number;
  /** What set each listen address and port, for messages (a bind that fails names it). */
  readonly sources: ListenSources;
}

/** The addresses and ports; `table`: the variables table whose `listen` rows are the ports. */
export function readListenAddresses(env: Env, file: MindieServerConfig, problem: Problem, table: readonly Row[] = CONFIGURATION_TABLE): ListenAddresses {
  // The operator's address, in MindIE's order; INFERMETER_DEFAULT_HOST only stands in for the
  // built-in 127.0.0.1 (the image sets it to 0.0.0.0), so it never overrides MindIE's settings.
  const hostSource = firstDefined(
    ['INFERMETER_HOST', env.INFERMETER_HOST],
    ['MIES_CONTAINER_IP', env.MIES_CONTAINER_IP],
    ['INFERMETER_CONFIG ServerConfig.ipAddress', file.ipAddress],
  );
  const host = parseHost(hostSource ?? firstDefined(['INFERMETER_DEFAULT_HOST', env.INFERMETER_DEFAULT_HOST]), '127.0.0.1', problem);
  const managementHostSource = firstDefined(
    ['INFERMETER_MANAGEMENT_HOST', env.INFERMETER_MANAGEMENT_HOST],
    ['MIES_CONTAINER_MANAGEMENT_IP', env.MIES_CONTAINER_MANAGEMENT_IP],
    ['INFERMETER_CONFIG ServerConfig.managementIpAddress', file.managementIpAddress],
  );
  const managementHost = parseHost(managementHostSource, host, problem);
  const portSources: Record<string, string | undefined> = {};
  const { port, managementPort, metricsPort } = readGroup(table, 'listen', env, problem, file, portSources) as unknown as Ports;
  const sources: ListenSources = Object.freeze({
    host: hostSource?.[0],
    port: portSources.port,
    managementHost: managementHostSource?.[0],
    managementPort: portSources.managementPort,
    metricsPort: portSources.metricsPort,
  });

  // A fixed port shared by the data plane and a management listener on the same address
  // would fail at bind time with EADDRINUSE; say so now, naming the variables.
  if (host === managementHost && port !== 0) {
    if (port === managementPort) problem('INFERMETER_PORT', 'a port different from INFERMETER_MANAGEMENT_PORT', String(port));
    if (port === metricsPort) problem('INFERMETER_PORT', 'a port different from INFERMETER_METRICS_PORT', String(port));
  }
  return {
    host,
    hostDefaulted: hostSource === undefined,
    managementHostDefaulted: (managementHostSource ?? hostSource) === undefined,
    port,
    managementHost,
    managementPort,
    metricsPort,
    sources,
  };
}

/**
 * Listening on every address defeats the separation of the planes: MindIE refuses it unless
 * told otherwise, and so does infermeter. A defaulted host (INFERMETER_DEFAULT_HOST, the
 * image's 0.0.0.0) is exempt: it is a packaging's default, not an address the operator asked for.
 */
export function refuseAllAddresses(listen: ListenAddresses, allowAllZeroIp: boolean, problem: Problem): void {
  if (allowAllZeroIp) return;
  const { sources } = listen;
  const needs = 'a specific address: listening on all addresses needs INFERMETER_ALLOW_ALL_ZERO_IP=1 (or allowAllZeroIpListening)';
  // Name what the operator set: an unset management host follows the data-plane host.
  const follows = sources.managementHost === undefined;
  if (sources.host !== undefined && isAllAddresses(listen.host)) {
    problem(sources.host, follows ? `${needs}; the management and metrics ports follow it, INFERMETER_MANAGEMENT_HOST being unset` : needs, listen.host);
  }
  if (!follows && isAllAddresses(listen.managementHost)) problem(sources.managementHost, needs, listen.managementHost);
}

const HOSTNAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

function parseHost(source: Source | undefined, fallback: string, problem: Problem): string {
  if (source === undefined) return fallback;
  const [name, value] = source;
  const text = String(value).trim();
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  if (isIP(bare) !== 0 || HOSTNAME.test(bare)) return bare;
  problem(name, 'an IPv4 or IPv6 address or a host name', text);
  return fallback;
}

/**
 * Whether binding `host` listens on every address: the unspecified address however it is
 * spelt. IPv4 as the OS reads a numeric host (`0`, `0x0`, `000.000.000.000`, `0.0`: the URL
 * standard's IPv4 parser takes the same forms as inet_aton), IPv6 in any notation (`::0`,
 * `0:0::0`, `[::]`, with a zone), and the IPv4-mapped `::ffff:0.0.0.0`. A host name is not an
 * address: it is resolved when listening (`resolveListenAddress`).
 */
export function isAllAddresses(host: string): boolean {
  let h = host.trim();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  const bare = h.replace(/%.*$/, '');
  const v6 = isIPv6(bare);
  if (!v6 && !/^[0-9a-fA-FxX.]+$/.test(h)) return false; // a host name, not a numeric address
  let canonical: string;
  try {
    canonical = new URL(`http://${v6 ? `[${bare}]` : h}/`).hostname;
  } catch {
    return false;
  }
  return canonical === '0.0.0.0' || canonical === '[::]' || canonical === '[::ffff:0:0]';
}

/**
 * The address to bind for `host`, resolved as Node's listen would (the first answer of
 * dns.lookup), so that what is checked is what is bound: a name that resolves to the
 * unspecified address is refused like the address itself, unless `allowAll`.
 */
export async function resolveListenAddress(host: string, allowAll: boolean, variable: string): Promise<string> {
  const address = isIP(host) !== 0 ? host : (await lookup(host)).address;
  if (!allowAll && isAllAddresses(address)) {
    throw new Error(`${variable}=${host} listens on every address (${address}); that needs INFERMETER_ALLOW_ALL_ZERO_IP=1 (or allowAllZeroIpListening)`);
  }
  return address;
}
