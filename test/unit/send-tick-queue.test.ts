// When the event-stream tap reads a chunk: after Node sent it (the next tick, for a write Node
// corked), at once for bytes already on the socket, and always in the order they came.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSendTickQueue } from '../../src/stream-tap/send-tick-queue.ts';

const tick = () => new Promise<void>((resolve) => process.nextTick(resolve));

function queue(stopAfter = Number.POSITIVE_INFINITY) {
  const read: string[] = [];
  const q = createSendTickQueue((chunk, at) => {
    read.push(`${chunk.toString()}@${at}`);
    return read.length < stopAfter;
  });
  return { q, read };
}

describe('send tick queue', () => {
  it('reads a chunk Node may still hold corked on the next tick, not before', async () => {
    const { q, read } = queue();
    q.push(Buffer.from('a'), 1, false, false);
    assert.deepEqual(read, []);
    await tick();
    assert.deepEqual(read, ['a@1']);
  });

  it('reads a chunk already on the socket at once when nothing waits before it', () => {
    const { q, read } = queue();
    q.push(Buffer.from('a'), 1, false, true);
    assert.deepEqual(read, ['a@1']);
  });

  it('keeps the order: a chunk on the socket waits behind one still queued', async () => {
    const { q, read } = queue();
    q.push(Buffer.from('a'), 1, false, false);
    q.push(Buffer.from('b'), 2, false, true);
    assert.deepEqual(read, []);
    await tick();
    assert.deepEqual(read, ['a@1', 'b@2']);
  });

  it('holds a chunk that came with the end until drained, and stops when the reader says so', async () => {
    const { q, read } = queue(2);
    q.push(Buffer.from('a'), 1, true, false);
    await tick();
    assert.deepEqual(read, [], 'the end reads it (drain)');
    q.push(Buffer.from('b'), 2, true, false);
    q.push(Buffer.from('c'), 3, true, false);
    q.drain();
    assert.deepEqual(read, ['a@1', 'b@2'], 'the reader stopped after two: the rest is dropped');
    q.push(Buffer.from('d'), 4, false, true);
    assert.deepEqual(read, ['a@1', 'b@2'], 'and stays stopped');
  });
});
