// Whether the upstream can be reached, for /ready (INFERMETER_READY_FOLLOWS_UPSTREAM): a replica
// whose model server is down serves nothing but 502s, so a load balancer should send elsewhere.
// The rule: the latest news decides. News is a connection to the upstream that worked or failed:
// the data plane's (a response came; a request failed as upstream_unreachable), the engine
// scraper's when it reads the upstream's own host and port (a scrape answered; one unreachable),
// and, when neither said anything for PROBE_INTERVAL_MS, a TCP connect of our own (the light
// probe: no request, the connection closed at once). So /ready turns 503 at the first failed
// connection, and at the latest PROBE_INTERVAL_MS + PROBE_TIMEOUT_MS after the upstream stopped
// when no traffic tells; it turns 200 again at the first connection that works, at the latest
// PROBE_INTERVAL_MS after the upstream came back (no traffic arrives while not ready).
import { connect } from 'node:net';
import type { Config } from '../config/config.ts';
import type { Logger } from '../log.ts';
import type { ProxyEvents } from '../metrics/proxy-families.ts';

/** A probe when no news came for this long (ms). */
const PROBE_INTERVAL_MS = 2000;
/** A probe's connect not done by then is a failure (ms). */
const PROBE_TIMEOUT_MS = 2000;

export interface UpstreamReadiness {
  /** False while the latest news of the upstream is a failed connection. */
  reachable(): boolean;
  /** News: a connection to the upstream worked (true) or failed (false). */
  heard(reachable: boolean): void;
  /** A finished request (the recorder's observer): its head came from the upstream, a connection that worked. */
  finished(sample: { readonly ttfb: number | undefined }): void;
  /** Probes now, then whenever the news is stale; resolves when this first probe is done (bounded by its timeout). */
  start(): Promise<void>;
  close(): void;
}

interface UpstreamReadinessOptions {
  /** Host and port (the upstream URL's). */
  readonly host: string;
  readonly port: number;
  readonly intervalMs?: number;
  readonly timeoutMs?: number;
  /** Called when reachability changes (the log says so once per change). */
  readonly changed?: (reachable: boolean) => void;
}

/** The port of an upstream URL, its scheme's default when it has none. */
function upstreamAddress(url: URL): { host: string; port: number } {
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  return { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port };
}

function createUpstreamReadiness(options: UpstreamReadinessOptions): UpstreamReadiness {
  const intervalMs = options.intervalMs ?? PROBE_INTERVAL_MS;
  const timeoutMs = options.timeoutMs ?? PROBE_TIMEOUT_MS;
  let reachable = true;
  let lastNews = performance.now();
  let timer: NodeJS.Timeout | undefined;
  let probing = false;
  let closed = false;
  const heard = (yes: boolean): void => {
    lastNews = performance.now();
    if (yes === reachable) return;
    reachable = yes;
    options.changed?.(yes);
  };
  const probe = (): Promise<void> =>
    new Promise((resolve) => {
      probing = true;
      const socket = connect({ host: options.host, port: options.port });
      const done = (yes: boolean): void => {
        if (!probing) return;
        probing = false;
        socket.destroy();
        if (!closed) heard(yes);
        resolve();
      };
      socket.setTimeout(timeoutMs, () => done(false));
      socket.once('connect', () => done(true));
      socket.once('error', () => done(false));
    });
  return {
    reachable: () => reachable,
    heard,
    finished: (sample) => {
      if (sample.ttfb !== undefined) heard(true);
    },
    start() {
      if (timer !== undefined || closed) return Promise.resolve();
      // A tick of a quarter interval: a probe starts at most that late after the news went stale.
      timer = setInterval(
        () => {
          if (!probing && !closed && performance.now() - lastNews >= intervalMs) void probe();
        },
        Math.max(1, Math.floor(intervalMs / 4)),
      );
      timer.unref();
      return probe();
    },
    close() {
      closed = true;
      clearInterval(timer);
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
export function upstreamReadiness(config: Config, log: Logger): UpstreamReadiness | undefined {
  const upstream = config.upstream;
  if (!config.readyFollowsUpstream || upstream === undefined) return undefined;
  const at = upstream.origin + upstream.pathname.replace(/\/$/, '');
  return createUpstreamReadiness({
    ...upstreamAddress(upstream),
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
