// Whether the upstream can be reached, for /ready (INFERMETER_READY_FOLLOWS_UPSTREAM): a replica
// whose model server is down serves nothing but 502s, so a load balancer should send elsewhere.
// The rule: the latest news decides. News is a connection to the upstream that worked or failed:
// the data plane's (a response came; a request failed as upstream_unreachable), the engine
// scraper's when it reads the upstream's own host and port (a scrape answered; one unreachable),
// and, when /ready is asked and neither said anything for STALE_MS, a TCP connect of our own made
// before it answers (the light probe: no request, the connection closed at once). The probe is
// made only when asked: the engine sees no connection of infermeter's own while nobody polls
// /ready (a thread-per-connection engine keeps a thread for each), and a replica with traffic
// needs none. So /ready turns 503 at the first failed connection, and without traffic at the
// first ask STALE_MS after the last news (answered within PROBE_TIMEOUT_MS); it turns 200 again
// at the first connection that works.
import { connect } from 'node:net';
import type { Config } from '../config/config.ts';
import type { Logger } from '../log.ts';
import type { Clock } from '../measure/clock.ts';
import type { ProxyEvents } from '../metrics/own/proxy-families.ts';

/** News older than this is stale: a /ready asked then probes first (ms). */
const STALE_MS = 2000;
/** A probe's connect not done by then is a failure (ms). */
const PROBE_TIMEOUT_MS = 2000;

export interface UpstreamReadiness {
  /** Whether the upstream can be reached: the latest news, or a probe's when the news is stale (or there is none yet). */
  check(): boolean | Promise<boolean>;
  /** News: a connection to the upstream worked (true) or failed (false). */
  heard(reachable: boolean): void;
  /** A finished request (the recorder's observer): its head came from the upstream, a connection that worked. */
  finished(sample: { readonly ttfb: number | undefined }): void;
  close(): void;
}

interface UpstreamReadinessOptions {
  /** Host and port (the upstream URL's). */
  readonly host: string;
  readonly port: number;
  readonly staleMs?: number;
  readonly timeoutMs?: number;
  /** What dates the news (the app's clock: a test moves it past STALE_MS instead of waiting). */
  readonly clock: Clock;
  /** Called when reachability changes (the log says so once per change). */
  readonly changed?: (reachable: boolean) => void;
}

/** The port of an upstream URL, its scheme's default when it has none. */
function upstreamAddress(url: URL): { host: string; port: number } {
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  return { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port };
}

function createUpstreamReadiness(options: UpstreamReadinessOptions): UpstreamReadiness {
  const staleMs = options.staleMs ?? STALE_MS;
  const timeoutMs = options.timeoutMs ?? PROBE_TIMEOUT_MS;
  let reachable = true;
  // No news yet: the first /ready probes.
  let lastNews = Number.NEGATIVE_INFINITY;
  // The probe in flight: every /ready asked meanwhile waits for the same one.
  let probing: Promise<boolean> | undefined;
  let closed = false;
  const { clock } = options;
  const heard = (yes: boolean): void => {
    lastNews = clock();
    if (yes === reachable) return;
    reachable = yes;
    options.changed?.(yes);
  };
  const probe = (): Promise<boolean> =>
    new Promise((resolve) => {
      const socket = connect({ host: options.host, port: options.port });
      let settled = false;
      const done = (yes: boolean): void => {
        if (settled) return;
        settled = true;
        socket.destroy();
        probing = undefined;
        if (!closed) heard(yes);
        resolve(reachable);
      };
      socket.setTimeout(timeoutMs, () => done(false));
      socket.once('connect', () => done(true));
      socket.once('error', () => done(false));
    });
  return {
    check() {
      if (closed || clock() - lastNews < staleMs) return reachable;
      probing ??= probe();
      return probing;
    },
    heard,
    finished: (sample) => {
      if (sample.ttfb !== undefined) heard(true);
    },
    close() {
      closed = true;
    },
  };
}

/** Whether two URLs name the same host and port (the engine scraper's news is the upstream's only then). */
export const sameAddress = (a: URL, b: URL): boolean => {
  const x = upstreamAddress(a);
  const y = upstreamAddress(b);
  return x.host === y.host && x.port === y.port;
};

/**
 * /ready's view of the upstream (INFERMETER_READY_FOLLOWS_UPSTREAM on): fed by the data plane's
 * connections (`withReadinessNews`, and the finished requests), the engine scraper and its own
 * probe. One per process that answers /ready (the primary's, with workers).
 */
export function upstreamReadiness(config: Config, log: Logger, clock: Clock): UpstreamReadiness | undefined {
  const upstream = config.upstream;
  if (!config.readyFollowsUpstream || upstream === undefined) return undefined;
  const at = upstream.origin + upstream.pathname.replace(/\/$/, '');
  return createUpstreamReadiness({
    ...upstreamAddress(upstream),
    clock,
    changed: (yes) =>
      yes
        ? log.info('the model server can be reached again: /ready answers 200', { upstream: at })
        : log.warn('the model server cannot be reached: /ready answers 503 until it can', { upstream: at, variable: 'INFERMETER_READY_FOLLOWS_UPSTREAM' }),
  });
}

/** The proxy events, with a request that could not connect upstream told to the readiness too. */
export function withReadinessNews(events: ProxyEvents, readiness: UpstreamReadiness | undefined): ProxyEvents {
  if (readiness === undefined) return events;
  return {
    ...events,
    proxyError: (kind) => {
      if (kind === 'upstream_unreachable') readiness.heard(false);
      events.proxyError(kind);
    },
  };
}
