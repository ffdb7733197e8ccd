// The settle queue: what a request's end leaves for after the turn's reads runs in the turn's
// check phase, in order, once per turn, and no work's throw reaches the loop.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSettleQueue } from '../../src/data-plane/settle-queue.ts';

const checkPhase = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('settle queue', () => {
  it('runs deferred work after the code that deferred it and its ticks, in order, in the check phase', async () => {
    const done: string[] = [];
    const queue = createSettleQueue(() => assert.fail('nothing throws'));
    queue.defer(() => done.push('a'));
    queue.defer(() => done.push('b'));
    process.nextTick(() => done.push('tick'));
    assert.deepEqual(done, []);
    await checkPhase();
    assert.deepEqual(done, ['tick', 'a', 'b']);
  });

  it('reports a work that throws and runs the rest; work deferred while running waits for the next check phase', async () => {
    const done: string[] = [];
    const failed: unknown[] = [];
    const queue = createSettleQueue((error) => failed.push(error));
    queue.defer(() => {
      queue.defer(() => done.push('later'));
      throw new Error('boom');
    });
    queue.defer(() => done.push('b'));
    await checkPhase();
    assert.deepEqual(done, ['b']);
    assert.equal((failed[0] as Error).message, 'boom');
    await checkPhase();
    assert.deepEqual(done, ['b', 'later']);
  });
});
