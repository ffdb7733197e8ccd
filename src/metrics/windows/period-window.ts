// Fixed collection periods over an injected clock: events accumulate into the current period;
// once the clock passes its end, that period is published and served unchanged until the next
// one ends. Roll-over is lazy (on the next event or scrape), so there is no timer to keep and a
// fake clock drives it exactly in tests. A period in which nothing happened is published empty.

export interface PeriodWindow<T> {
  /** The accumulator of the period that contains `now`. */
  current(now: number): T;
  /** The last completed period, or undefined before the first one ends. */
  published(now: number): T | undefined;
}

export function createPeriodWindow<T>(periodMs: number, empty: () => T, startMs: number): PeriodWindow<T> {
  let index = Math.floor(startMs / periodMs);
  let current = empty();
  let published: T | undefined;

  const roll = (now: number): void => {
    const at = Math.floor(now / periodMs);
    if (at <= index) return;
    // The period just ended is published; if more than one ended, the last of them saw nothing.
    published = at === index + 1 ? current : empty();
    current = empty();
    index = at;
  };

  return {
    current(now) {
      roll(now);
      return current;
    },
    published(now) {
      roll(now);
      return published;
    },
  };
}
