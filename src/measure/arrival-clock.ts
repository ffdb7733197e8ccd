// When a request can be said to have arrived. Node hands the requests that one poll of the
// event loop found readable to JavaScript one after another: in a burst, the last of 32 is
// read only after the 31 before it were forwarded, so stamping each when its handler runs puts
// its t0 late by the work of all the others (its TTFT then reads low). Every request handled
// before the loop polls again was readable when the first of them was handled (their
// bytes were in the socket when the poll returned, before its first callback ran), so they all
// get that first stamp: never earlier than a request's bytes arrived, and the same work between
// them no longer counts.
// A turn is one iteration of libuv's loop, told by its count (`uvMetricsInfo.loopCount`, which
// libuv increments just before each poll): reads and requests handled from one poll, its
// nextTicks and its check phase see the same count. A request handled outside the poll phase
// (a pipelined one, resumed) may share the stamp of one handled before it in the same turn;
// clients do not pipeline. Reading the count makes one small object; the setImmediate that
// ended a turn before cost an Immediate (about 150 bytes) and a check-phase callback per
// upstream read when reads come a turn apart, as in the latency scenario.
import { performance } from 'node:perf_hooks';
import type { Clock } from './clock.ts';

const timing = performance.nodeTiming;
/** The event loop's iteration: it changes only when the loop polls again. */
const loopTurn = (): number => timing.uvMetricsInfo.loopCount;

export function createArrivalClock(clock: Clock, turn: () => number = loopTurn): Clock {
  let mark: number | undefined;
  let markTurn = 0;
  return () => {
    const now = turn();
    if (mark !== undefined && now === markTurn) return mark;
    mark = clock();
    markTurn = now;
    return mark;
  };
}
