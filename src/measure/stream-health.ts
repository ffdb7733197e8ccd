// Pure: one request's stream health, kept beside its timer (request-timer.ts): the longest
// silence between the batches relayed to the client, and the time the client's socket refused
// writes. A silence spent waiting on the client is the client's, not the stream's, so the
// refused time is taken out of the gap it fell in. Three numbers a request, nothing per chunk.
export class StreamHealth {
  /** The last batch's arrival (each batch is written in the turn it arrived); undefined: none yet. */
  private lastBatchAt: number | undefined = undefined;
  private longestMs = 0;
  private blockedAt: number | undefined = undefined;
  private blockedTotalMs = 0;
  private blockedAtLastBatch = 0;

  /** A batch arrived at `at` (ms) and is written to the client in that turn. */
  batch(at: number): void {
    this.gapTo(at);
    this.lastBatchAt = at;
    this.blockedAtLastBatch = this.blockedTotalMs;
  }

  /** The client's socket refused a write (`on`) or drained, at `now` (ms). */
  backpressure(on: boolean, now: number): void {
    if (on) this.blockedAt ??= now;
    else if (this.blockedAt !== undefined) {
      this.blockedTotalMs += now - this.blockedAt;
      this.blockedAt = undefined;
    }
  }

  /** The request ended at `now`: a client still refused was so until then; a stream `cut` short adds its silence before the end. */
  end(now: number, cut: boolean): void {
    this.backpressure(false, now);
    if (cut) this.gapTo(now);
  }

  /** Seconds: the longest silence; undefined when no batch was relayed. */
  get longestGap(): number | undefined {
    return this.lastBatchAt === undefined ? undefined : this.longestMs / 1000;
  }

  /** Seconds the client's socket refused writes. */
  get blocked(): number {
    return this.blockedTotalMs / 1000;
  }

  /** The silence from the last batch to `now`, less the time the client refused writes meanwhile. */
  private gapTo(now: number): void {
    if (this.lastBatchAt === undefined) return;
    const gap = now - this.lastBatchAt - (this.blockedTotalMs - this.blockedAtLastBatch);
    if (gap > this.longestMs) this.longestMs = gap;
  }
}
