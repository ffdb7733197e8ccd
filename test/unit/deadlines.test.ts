import assert from 'node:assert/strict';
import type { ClientRequest, IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { createDeadlines, type Watched } from '../../src/data-plane/deadlines.ts';

// A request as the sweep sees it: a socket's byte counts, destroyed or not, a response complete or not.
function fakeExchange() {
  const socket = { bytesRead: 0, bytesWritten: 0 };
  const request = { socket, destroyed: false };
  const response = { complete: false };
  const item: { upstreamRequest: ClientRequest | undefined; upstreamResponse: IncomingMessage | undefined } = {
    upstreamRequest: undefined,
    upstreamResponse: undefined,
  };
  return {
    item: item as Watched,
    socket,
    request,
    response,
    send: () => (item.upstreamRequest = request as unknown as ClientRequest),
    respond: () => (item.upstreamResponse = response as unknown as IncomingMessage),
  };
}

function setup(idleMs: number, totalMs: number) {
  let t = 0;
  const d = createDeadlines(idleMs, totalMs, () => t);
  const fired: string[] = [];
  const at = (ms: number) => {
    t = ms;
    d.sweep();
  };
  return {
    d,
    fired,
    at,
    watch: (x: { item: Watched }, name: string) =>
      d.watch(
        x.item,
        () => fired.push(`${name} idle`),
        () => fired.push(`${name} total`),
      ),
  };
}

describe('deadlines', () => {
  it('ends a request at its total timeout, not before, and not once unwatched', () => {
    const { d, fired, at, watch } = setup(10_000, 300);
    const a = fakeExchange();
    const b = fakeExchange();
    watch(a, 'a');
    const unwatchB = watch(b, 'b');
    at(299);
    assert.deepEqual(fired, []);
    unwatchB();
    at(300);
    at(900);
    assert.deepEqual(fired, ['a total'], 'once');
    d.close();
  });

  it('gives up an upstream silent for the idle timeout, counted from when it was asked or last heard', () => {
    const { d, fired, at, watch } = setup(200, 0);
    const x = fakeExchange();
    watch(x, 'x');
    at(150); // the body is still held: not the upstream's silence
    at(400);
    assert.deepEqual(fired, []);
    x.send(); // asked between two sweeps: quiet from the first look on, not from the start
    at(450);
    x.socket.bytesWritten += 100;
    x.respond();
    x.socket.bytesRead += 50;
    at(500); // heard from
    at(699);
    assert.deepEqual(fired, []);
    at(700);
    assert.deepEqual(fired, ['x idle']);
    at(2000);
    assert.deepEqual(fired, ['x idle'], 'once');
    d.close();
  });

  it('counts from the send when the request went out at once, and keeps a steady stream alive', () => {
    const { d, fired, at, watch } = setup(200, 0);
    const quiet = fakeExchange();
    const steady = fakeExchange();
    watch(quiet, 'quiet');
    watch(steady, 'steady');
    quiet.send();
    steady.send();
    for (let ms = 50; ms <= 1000; ms += 50) {
      steady.socket.bytesRead += 10;
      at(ms);
      if (ms === 150) assert.deepEqual(fired, []);
    }
    assert.deepEqual(fired, ['quiet idle'], 'the quiet one at 200 ms, the steady one never');
    d.close();
  });

  it('waits for nothing once the response is complete or the request destroyed', () => {
    const { d, fired, at, watch } = setup(100, 0);
    const done = fakeExchange();
    const gone = fakeExchange();
    watch(done, 'done');
    watch(gone, 'gone');
    done.send();
    gone.send();
    done.respond();
    done.response.complete = true;
    gone.request.destroyed = true;
    at(50);
    at(1000);
    assert.deepEqual(fired, []);
    d.close();
  });
});
