// The /metrics answers, in rounds: one render at a time, streamed piece by piece to every scrape
// that joined before it began, at the pace of the slowest of them (a piece goes out once each
// reader took the one before: its socket accepted it). So a render's memory is a piece or two
// however large the exposition and however many scrapers wait, never the whole text. A scrape
// that arrives during a round waits for the next one; the next round starts when this one ends,
// with every scrape that waited. A reader that takes no piece for `stallMs`, or is not done
// after `totalMs`, is dropped (its connection cut); past `maxScrapes` scrapes in progress or
// waiting, a scrape is refused (the caller answers 503).
import type { Metrics } from '../metrics/metrics.ts';

export interface ScrapeRoundOptions {
  /** Scrapes in progress or waiting at once; past it join() refuses. */
  readonly maxScrapes: number;
  /** Longest a reader may take no piece before it is dropped (ms). */
  readonly stallMs: number;
  /** Longest a scrape may take, waiting for its round included (ms). */
  readonly totalMs: number;
}

export interface ScrapeRounds {
  /**
   * The body of one scrape, or undefined when maxScrapes are in progress or waiting already.
   * `cut` ends the scrape's connection when it is dropped (else its body errors).
   */
  join(cut?: () => void): ReadableStream<Uint8Array> | undefined;
  /** Scrapes in progress or waiting now. */
  readonly scrapes: number;
}

interface Reader {
  controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  /** Set while the reader's consumer waits for a piece (it took the last one). */
  wants: (() => void) | undefined;
  /** Called once the reader wants a piece again. */
  onWant: (() => void) | undefined;
  done: boolean;
  bytes: number;
  served: (bytes: number) => void;
  deadline: NodeJS.Timeout | undefined;
  cut: (() => void) | undefined;
}

/** `openMetrics`: the rounds render OpenMetrics (metrics.renderPieces); else the Prometheus text. */
export function createScrapeRounds(metrics: Metrics, options: ScrapeRoundOptions, openMetrics = false): ScrapeRounds {
  let waiting: Reader[] = [];
  let running = false;
  let scrapes = 0;

  const finish = (reader: Reader, error?: Error): void => {
    if (reader.done) return;
    reader.done = true;
    scrapes--;
    clearTimeout(reader.deadline);
    reader.served(reader.bytes);
    const { controller } = reader;
    reader.wants?.();
    reader.onWant?.();
    if (error !== undefined && reader.cut !== undefined) {
      reader.cut();
      return;
    }
    try {
      if (error === undefined) controller?.close();
      else controller?.error(error);
    } catch {
      // Already closed or cancelled by its consumer.
    }
  };

  /** Resolves once the reader took its last piece (wants another), or is dropped after stallMs. */
  const taken = (reader: Reader): Promise<void> | undefined => {
    if (reader.done || reader.wants !== undefined) return undefined;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => finish(reader, new Error('the scraper read nothing for too long')), options.stallMs);
      reader.onWant = () => {
        clearTimeout(timer);
        reader.onWant = undefined;
        resolve();
      };
    });
  };

  const round = async (readers: Reader[]): Promise<void> => {
    try {
      for await (const piece of metrics.renderPieces(openMetrics)) {
        if (readers.every((r) => r.done)) break;
        if (piece === '') continue; // the render gave the loop back with nothing new
        const bytes = Buffer.from(piece);
        const pending = readers.map(taken).filter((p) => p !== undefined);
        if (pending.length > 0) await Promise.all(pending);
        for (const reader of readers) {
          if (reader.done) continue;
          const want = reader.wants!;
          reader.wants = undefined;
          reader.bytes += bytes.length;
          reader.controller!.enqueue(bytes);
          want();
        }
      }
      // The last piece taken, then the end.
      const pending = readers.map(taken).filter((p) => p !== undefined);
      if (pending.length > 0) await Promise.all(pending);
      for (const reader of readers) finish(reader);
    } catch (error) {
      for (const reader of readers) finish(reader, error as Error);
    }
  };

  const next = (): void => {
    if (running || waiting.length === 0) return;
    running = true;
    const readers = waiting;
    waiting = [];
    void round(readers).finally(() => {
      running = false;
      next();
    });
  };

  return {
    get scrapes() {
      return scrapes;
    },
    join(cut) {
      if (scrapes >= options.maxScrapes) return undefined;
      scrapes++;
      const reader: Reader = {
        controller: undefined,
        wants: undefined,
        onWant: undefined,
        done: false,
        bytes: 0,
        served: metrics.scrapeStarted(),
        deadline: undefined,
        cut,
      };
      reader.deadline = setTimeout(() => finish(reader, new Error('the scrape took too long')), options.totalMs);
      const body = new ReadableStream<Uint8Array>(
        {
          start(controller) {
            reader.controller = controller;
          },
          // Called when the consumer reads and nothing is queued: it took the last piece.
          pull() {
            if (reader.done) return;
            return new Promise<void>((resolve) => {
              reader.wants = resolve;
              reader.onWant?.();
            });
          },
          cancel() {
            finish(reader);
          },
        },
        { highWaterMark: 0 },
      );
      waiting.push(reader);
      // After this turn: the scrapes that arrive together share the round.
      setImmediate(next);
      return body;
    },
  };
}
