// What a measured request's end leaves to be done after the turn's reads: the tap's reading of
// the answer's last bytes and the recording of the request (its sample through the recorder, the
// access log, the ledger). In a wave, 32 streams end in the same turns in which the next 32
// requests arrive; done at once, the recording of each end sits in front of the arrivals read
// after it in that turn. Left for the turn's check phase (one setImmediate for all of them), the
// turn's arrivals are written upstream first (at once: upstream-connections.ts's writeAtOnce;
// with undici's own wait for the check phase they would queue behind this work, and the wave's
// way in measured no better). Nothing is read later than that turn: a client that
// saw its answer's end and then scrapes is read in a later turn, after the recording, so no
// scrape it sends finds the request uncounted. Everything deferred is released by the client's
// close already (the upstream request, the budgets, the concurrency limit): only the reading
// and the recording wait, at most one turn, holding what the request held anyway.

export interface SettleQueue {
  /** `work` runs in this turn's check phase, after every one deferred before it. */
  defer(work: () => void): void;
}

/** `failed`: a deferred work that threw (never thrown into the loop). */
export function createSettleQueue(failed: (error: unknown) => void): SettleQueue {
  let queue: Array<() => void> = [];
  let spare: Array<() => void> = [];
  let armed = false;
  const run = (): void => {
    armed = false;
    // Work deferred while running (none expected) waits for the next check phase.
    const works = queue;
    queue = spare;
    for (let i = 0; i < works.length; i++) {
      try {
        works[i]!();
      } catch (error) {
        failed(error);
      }
    }
    works.length = 0;
    spare = works;
  };
  return {
    defer(work) {
      queue.push(work);
      if (!armed) {
        armed = true;
        setImmediate(run);
      }
    },
  };
}
