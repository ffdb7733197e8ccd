// When a request can be said to have arrived. Node hands the requests that one poll of the
// event loop found readable to JavaScript one after another: in a burst, the last of 32 is
// read only after the 31 before it were forwarded, so stamping each when its handler runs puts
// its t0 late by the work of all the others (its TTFT then reads low). Every request handled
// before the loop next waits for I/O was readable when the first of them was handled (their
// bytes were in the socket when the poll returned, before its first callback ran), so they all
// get that first stamp: never earlier than a request's bytes arrived, and the same work between
// them no longer counts.
// The turn ends when the loop waits again (its idle time grows: libuv adds the wait before the
// poll's first callback) or reaches its check phase (setImmediate: after the poll, when the
// next poll finds events ready at once and does not wait). A request handled outside the poll
// phase (a pipelined one, resumed) may share the stamp of one handled before it in the same
// turn; clients do not pipeline.
import { performance } from 'node:perf_hooks';
import type { Clock } from './clock.ts';

const timing = performance.nodeTiming;
/** The event loop's time spent waiting for I/O so far (ms): it changes only when the loop waited. */
const loopIdleTime = (): number => timing.idleTime;

export function createArrivalClock(clock: Clock, idleTime: () => number = loopIdleTime): Clock {
  let mark: number | undefined;
  let idleAtMark = 0;
  const endTurn = (): void => {
    mark = undefined;
  };
  return () => {
    const idle = idleTime();
    if (mark !== undefined && idle === idleAtMark) return mark;
    mark = clock();
    idleAtMark = idle;
    setImmediate(endTurn);
    return mark;
  };
}
