// MindIE's maxLinkNum, for inference requests: at most N in flight; up to 2N more wait, in
// arrival order, for a place; beyond that a request is refused at once (503), not queued without
// bound. A waiting request whose client leaves gives up its place.

export interface ConcurrencyLimit {
  /**
   * Asks for a place. `start` runs now or when one frees; `refused` runs at once when the queue
   * is full. Returns the function to call when the request is over (or its client left).
   */
  acquire(start: () => void, refused: () => void): () => void;
  readonly inFlight: number;
  readonly waiting: number;
}

export function createConcurrencyLimit(max: number): ConcurrencyLimit {
  let inFlight = 0;
  const queue: Array<{ start: () => void; gone: boolean }> = [];
  const next = (): void => {
    while (inFlight < max && queue.length > 0) {
      const w = queue.shift()!;
      if (w.gone) continue;
      inFlight++;
      w.start();
    }
  };
  return {
    get inFlight() {
      return inFlight;
    },
    get waiting() {
      return queue.filter((w) => !w.gone).length;
    },
    acquire(start, refused) {
      if (inFlight < max) {
        inFlight++;
        start();
        let done = false;
        return () => {
          if (done) return;
          done = true;
          inFlight--;
          next();
        };
      }
      if (queue.length >= 2 * max) {
        // Places held by clients that left do not count against the queue.
        for (let i = queue.length - 1; i >= 0; i--) if (queue[i]!.gone) queue.splice(i, 1);
      }
      if (queue.length >= 2 * max) {
        refused();
        return () => {};
      }
      const waiter = { start: () => {}, gone: false };
      let started = false;
      waiter.start = () => {
        started = true;
        start();
      };
      queue.push(waiter);
      let done = false;
      return () => {
        if (done) return;
        done = true;
        if (!started) {
          waiter.gone = true;
          return;
        }
        inFlight--;
        next();
      };
    },
  };
}
