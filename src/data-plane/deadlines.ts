// The idle and total timeouts of the measured requests, kept by one periodic sweep instead of
// two timers per request. Arming and clearing a timer per request, and Node's socket timeout
// per upstream request, cost about 6 µs of a one-token round trip side by side: a fifth of
// what the whole hop adds over a bare pass-through. A sweep costs nothing per request but an
// entry in a set; a timeout fires up to one sweep late: a quarter of the shorter timeout, at
// most a second (the precision Node keeps for its own headers and request timeouts).
import type { UpstreamRequestHandle, UpstreamResponse } from './upstream-response.ts';

/** What a deadline watches: the upstream request once sent, and its response once begun. */
export interface Watched {
  readonly upstreamRequest: UpstreamRequestHandle | undefined;
  readonly upstreamResponse: UpstreamResponse | undefined;
}

export interface Deadlines {
  /**
   * Watches a request until the returned function is called. `idle`: its upstream sent and
   * received nothing for the idle timeout (from when it was sent until its response ended).
   * `total`: the total timeout passed since now (with a total timeout of 0, never).
   */
  watch(item: Watched, idle: () => void, total: () => void): () => void;
  /** One sweep, now: what the timer runs. */
  sweep(): void;
  /** Stops the sweep (the data plane closing). */
  close(): void;
}

class Entry {
  /** The upstream socket's bytes read and written at the last sweep; -1 before one was seen. */
  seen = -1;
  quietSince: number;
  /** A sweep came while the body was still held: the request was sent later than `started`. */
  sentLate = false;
  idleFired = false;
  readonly item: Watched;
  readonly started: number;
  readonly idle: () => void;
  readonly total: () => void;
  constructor(item: Watched, started: number, idle: () => void, total: () => void) {
    this.item = item;
    this.started = started;
    this.quietSince = started;
    this.idle = idle;
    this.total = total;
  }
}

export function createDeadlines(idleMs: number, totalMs: number, now: () => number = () => performance.now()): Deadlines {
  const entries = new Set<Entry>();
  const shortest = totalMs > 0 ? Math.min(idleMs, totalMs) : idleMs;
  const every = Math.min(1000, Math.max(25, Math.floor(shortest / 4)));
  let timer: NodeJS.Timeout | undefined;

  const sweep = (): void => {
    const t = now();
    for (const e of entries) {
      if (totalMs > 0 && t - e.started >= totalMs) {
        entries.delete(e);
        e.total();
        continue;
      }
      if (e.idleFired) continue;
      const request = e.item.upstreamRequest;
      const response = e.item.upstreamResponse;
      if (request === undefined) {
        e.sentLate = true; // the body is still being held: the upstream has not been asked yet
        continue;
      }
      if (response?.complete === true || request.destroyed) continue; // nothing left to wait for
      const socket = request.socket;
      if (socket === null) continue; // not connected yet: the connect timeout's business
      // Only this request uses the socket until its response ends, so traffic is its own.
      const traffic = socket.bytesRead + socket.bytesWritten;
      if (e.seen === -1) {
        e.seen = traffic;
        // Traffic before this first look is not known: the upstream counts as quiet since it
        // was asked, or since now when its answer has begun or it was asked after the last
        // sweep (late rather than early).
        if (response !== undefined || e.sentLate) e.quietSince = t;
      } else if (traffic !== e.seen) {
        e.seen = traffic;
        e.quietSince = t;
      } else if (t - e.quietSince >= idleMs) {
        e.idleFired = true;
        e.idle();
      }
    }
    if (entries.size === 0) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  return {
    watch(item, idle, total) {
      const entry = new Entry(item, now(), idle, total);
      entries.add(entry);
      if (timer === undefined) {
        timer = setInterval(sweep, every);
        timer.unref();
      }
      return () => entries.delete(entry);
    },
    sweep,
    close() {
      clearInterval(timer);
      timer = undefined;
      entries.clear();
    },
  };
}
