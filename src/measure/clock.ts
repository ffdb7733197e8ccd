/** Monotonic milliseconds; injected so that timing logic is testable with a fake clock. */
export type Clock = () => number;

export const monotonicClock: Clock = () => performance.now();
