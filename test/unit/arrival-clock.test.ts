// The arrival clock: requests handled in one turn of the event loop share the first one's
// stamp; a new turn (the loop's next iteration, whether its poll waited or not) stamps anew.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import { describe, it } from 'node:test';
import { createArrivalClock } from '../../src/measure/arrival-clock.ts';
import { listen } from '../helpers/listen.ts';

const checkPhase = () => new Promise<void>((resolve) => setImmediate(resolve));
const loopCount = () => performance.nodeTiming.uvMetricsInfo.loopCount;

describe('arrival clock', () => {
  it("gives every request of one turn the first one's time", () => {
    let now = 100;
    const arrival = createArrivalClock(
      () => now,
      () => 7,
    );
    assert.equal(arrival(), 100);
    now = 103; // the work of forwarding the first
    assert.equal(arrival(), 100);
    now = 109;
    assert.equal(arrival(), 100);
  });

  it("stamps anew in the loop's next iteration", () => {
    let now = 100;
    let turn = 7;
    const arrival = createArrivalClock(
      () => now,
      () => turn,
    );
    assert.equal(arrival(), 100);
    now = 150;
    turn = 8;
    assert.equal(arrival(), 150);
    now = 151;
    assert.equal(arrival(), 150, 'the same turn again');
  });

  it("with the real loop: the same stamp in one iteration's check phase, a new one in the next iteration, whose poll did not wait (an immediate was queued)", async () => {
    let now = 100;
    const arrival = createArrivalClock(() => now);
    await checkPhase();
    const turn = loopCount();
    assert.equal(arrival(), 100);
    now = 110;
    await Promise.resolve(); // a microtask of the same callback
    assert.equal(arrival(), 100);
    await checkPhase(); // queued from a check phase: runs in the next iteration's
    assert.equal(loopCount(), turn + 1);
    now = 120;
    assert.equal(arrival(), 120);
  });

  it('never stamps before the time the turn began with the real loop: a request read from a socket after the first', async (t) => {
    // As in the data plane: the second request is an I/O callback (a socket's data), its bytes
    // written after \`before\`. However slow the machine, the loop polled (and passed its check
    // phase) between the first stamp and that read, so the second cannot share the first's.
    const arrival = createArrivalClock(() => performance.now());
    const first = arrival();
    const server = createServer();
    const { port } = await listen(t, server);
    const read = new Promise<number>((resolve) =>
      server.once('connection', (socket) =>
        socket.once('data', () => {
          resolve(arrival());
          socket.destroy();
        }),
      ),
    );
    const client = connect(port, '127.0.0.1');
    t.after(() => client.destroy());
    await once(client, 'connect');
    const before = performance.now();
    client.write('POST /v1/chat/completions HTTP/1.1\r\n');
    const second = await read;
    assert.ok(second >= before, `second ${second} >= ${before} (first ${first})`);
    assert.ok(second > first);
  });
});
