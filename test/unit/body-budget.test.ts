// The budget for held bodies (issue 49, finding 4): each client address holds at most its part,
// bytes given back wake a body waiting for room, and a body that found no room waits (its
// client left unread) for room, or for the upstream to be known to take the injected field,
// or until the wait's end (refused), or until its client leaves, whichever comes first.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { createBodyBudget, type BodyHold } from '../../src/data-plane/body-budget.ts';
import { holdBody, type HeldBody, type Unheld, type UnheldWhy } from '../../src/data-plane/request-body.ts';

describe('the budget for held bodies', () => {
  it('keeps each client address within its part, and wakes a waiting body when bytes are given back', () => {
    const budget = createBodyBudget(100, 40);
    const a1 = budget.hold('a');
    const a2 = budget.hold('a');
    assert.equal(a1.take(30), true);
    assert.equal(a2.take(20), false, "the address's part is 40");
    assert.equal(a2.take(10), true);
    const b = budget.hold('b');
    assert.equal(b.take(40), true, "another address's part is its own");
    assert.equal(budget.held(), 80);
    assert.equal(a2.fits(40), true);
    assert.equal(a2.fits(41), false, 'more than the part could never be held');
    let woken = 0;
    const cancel = a2.wait(15, () => woken++);
    a1.release();
    assert.equal(woken, 1, 'room came: the wait took its bytes');
    assert.equal(budget.held(), 40 + 10 + 15);
    a1.release();
    assert.equal(woken, 1, 'once');
    // Bytes another request gives back later: the wait already served takes nothing more (each
    // wake-up would take its bytes again, never to be given back).
    const c = budget.hold('c');
    assert.equal(c.take(5), true);
    c.release();
    assert.equal(woken, 1, 'a served wait is woken no more');
    assert.equal(budget.held(), 40 + 10 + 15);
    cancel();
    a2.release();
    b.release();
    assert.equal(budget.held(), 0);
  });
});

/** A client's request: a stream of its chunks, with what holdBody reads of an IncomingMessage. */
function request(): IncomingMessage & PassThrough {
  return Object.assign(new PassThrough(), { headers: {}, complete: false }) as unknown as IncomingMessage & PassThrough;
}

interface Seen {
  held?: string;
  streamed?: boolean;
  refused?: boolean;
  asked: UnheldWhy[];
}

function handlers(seen: Seen, how: () => Unheld): HeldBody {
  return {
    held: (body) => (seen.held = body.toString()),
    unheld: (why) => {
      seen.asked.push(why);
      return how();
    },
    streamed: () => (seen.streamed = true),
    scanned: () => undefined,
    refused: () => (seen.refused = true),
    read: () => undefined,
  };
}

/** A client's request whose body holdBody reads into `hold` (at most `maxBytes`), what it was told in `seen`. */
function held(hold: BodyHold, how: () => Unheld, waitMs: number, maxBytes = 1000): { req: IncomingMessage & PassThrough; seen: Seen } {
  const req = request();
  const seen: Seen = { asked: [] };
  holdBody(req, maxBytes, hold, handlers(seen, how), waitMs);
  return { req, seen };
}

const STREAM: Unheld = { reserve: false, inject: () => false, injected: () => undefined };
const tick = () => new Promise((r) => setImmediate(r));

describe('a body that finds no room', () => {
  it('waits, unread, and goes on being held when room comes', async () => {
    const budget = createBodyBudget(100);
    const other = budget.hold('x');
    other.take(90);
    const { req, seen } = held(budget.hold('y'), () => ({ wait: () => () => undefined }), 60_000);
    req.write('{"model":"m",');
    req.write('"stream":true}');
    await tick();
    assert.deepEqual(seen.asked, ['over_budget']);
    assert.equal(req.isPaused(), true, 'its client is not read meanwhile');
    other.release();
    req.end();
    await tick();
    assert.equal(seen.held, '{"model":"m","stream":true}', 'held whole once room came');
    assert.equal(seen.refused, undefined);
  });

  it("is asked again once the upstream is known to take the field (and streams), or refused at the wait's end", async () => {
    for (const settle of [true, false]) {
      const budget = createBodyBudget(100);
      budget.hold('x').take(100);
      let settled: (() => void) | undefined;
      let waited = false;
      const { req, seen } = held(
        budget.hold('y'),
        () => {
          if (waited) return STREAM;
          waited = true;
          return {
            wait: (s) => {
              settled = s;
              return () => undefined;
            },
          };
        },
        settle ? 60_000 : 20,
      );
      req.write('{"model":"m","stream":true}');
      await tick();
      if (settle) settled!();
      else await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(seen.asked, settle ? ['over_budget', 'over_budget'] : ['over_budget'], `settled ${settle}`);
      assert.equal(seen.streamed, settle ? true : undefined);
      assert.equal(seen.refused, settle ? undefined : true);
    }
  });

  it('settled at once (the upstream became known meanwhile): asked again at once, nothing left waiting', async () => {
    const budget = createBodyBudget(100);
    const other = budget.hold('x');
    other.take(100);
    let first = true;
    const { req, seen } = held(
      budget.hold('y'),
      () => {
        if (!first) return STREAM;
        first = false;
        return {
          wait: (settled) => {
            settled();
            return () => undefined;
          },
        };
      },
      20,
    );
    req.write('{"model":"m","stream":true}');
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual([seen.asked, seen.streamed, seen.refused], [['over_budget', 'over_budget'], true, undefined]);
    other.release();
    assert.equal(budget.held(), 0, 'no wait for room left behind');
  });

  it('waits at most its bound in all: room that frees a little at a time does not renew it', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
    const budget = createBodyBudget(100);
    // Others hold all of it, 10 bytes each: given back one at a time, each lets the body read
    // one more chunk and find no room again.
    const others = Array.from({ length: 10 }, (_, i) => budget.hold(`x${i}`));
    for (const o of others) o.take(10);
    const { req, seen } = held(budget.hold('y'), () => ({ wait: () => () => undefined }), 1000);
    for (let i = 0; i < 8; i++) req.write('{"model":"m"'.padEnd(10, ' '));
    await tick();
    // A 10-byte room every 400 ms: without one bound, each wait would start its 1000 ms anew.
    let given = 0;
    while (seen.refused === undefined && given < others.length) {
      t.mock.timers.tick(400);
      others[given++]!.release();
      await tick();
    }
    assert.equal(seen.refused, true, 'refused within its bound');
    assert.ok(given <= 3, `refused after ${given} rooms of 400 ms, not renewed by each`);
    for (const o of others) o.release();
  });

  it('stops waiting when its client leaves', async () => {
    const budget = createBodyBudget(100);
    const other = budget.hold('x');
    other.take(100);
    const mine = budget.hold('y');
    const { req, seen } = held(mine, () => ({ wait: () => () => undefined }), 30);
    req.write('{"model":"m","stream":true}');
    await tick();
    req.destroy();
    await new Promise((r) => setTimeout(r, 60));
    other.release();
    assert.equal(budget.held(), 0, 'no wait took room for a client gone');
    assert.deepEqual([seen.held, seen.streamed, seen.refused], [undefined, undefined, undefined], 'nothing more for a client gone');
  });

  it('that could never be held does not wait: past the cap or past its part, it streams', async () => {
    const budget = createBodyBudget(1000, 10);
    const { req, seen } = held(budget.hold('y'), () => STREAM, 60_000);
    req.write('{"model":"m","stream":true}');
    await tick();
    assert.deepEqual(seen.asked, ['beyond_budget']);
    assert.equal(seen.streamed, true);
    const { req: capped, seen: over } = held(createBodyBudget(1000).hold('z'), () => STREAM, 60_000, 5);
    capped.write('{"model":"m","stream":true}');
    await tick();
    assert.deepEqual(over.asked, ['too_large']);
  });
});
