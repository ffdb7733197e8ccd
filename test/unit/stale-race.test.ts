// The stale race's bound (upstream-attempt.ts): a reused connection that failed with no byte of
// an answer is the upstream closing it as it was reused only within STALE_RACE_MS of the
// request's write; past it, or once a byte came, the upstream may have served the request and it
// is not sent again. Tested against a clock given, not the machine's: the integration tests,
// whose upstream shares their loaded process, widen the window (test/faults/retry.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { STALE_RACE_MS } from '../../src/data-plane/upstream-attempt.ts';
import { mayHaveBeenServed, type UpstreamRequestHandle } from '../../src/data-plane/upstream-response.ts';

/** A request written at `sentAt` on a socket that had read `readBefore` bytes then and `bytesRead` now. */
function sent(sentAt: number | undefined, bytesRead = 100, readBefore = 100, informed = false): UpstreamRequestHandle {
  return { line: { socket: { bytesRead } }, sentAt, readBefore, informed } as unknown as UpstreamRequestHandle;
}

describe('the stale race', () => {
  it('is 50 ms', () => assert.equal(STALE_RACE_MS, 50));

  it('takes a failure within the window, with no byte of an answer, for the race', () => {
    assert.equal(mayHaveBeenServed(sent(1000), STALE_RACE_MS, 1000), false);
    assert.equal(mayHaveBeenServed(sent(1000), STALE_RACE_MS, 1000 + STALE_RACE_MS), false);
  });

  it('takes a failure past the window for a request the upstream may have served', () => {
    assert.equal(mayHaveBeenServed(sent(1000), STALE_RACE_MS, 1000 + STALE_RACE_MS + 0.1), true);
    assert.equal(mayHaveBeenServed(sent(1000), 5000, 1000 + STALE_RACE_MS + 0.1), false, 'a wider window given');
  });

  it('never takes a failure after a byte of an answer, or a 1xx, for the race', () => {
    assert.equal(mayHaveBeenServed(sent(1000, 101, 100), STALE_RACE_MS, 1000), true);
    assert.equal(mayHaveBeenServed(sent(1000, 100, 100, true), STALE_RACE_MS, 1000), true);
  });

  it('says a request never sent was not served', () => assert.equal(mayHaveBeenServed(sent(undefined), STALE_RACE_MS, 1e9), false));
});
