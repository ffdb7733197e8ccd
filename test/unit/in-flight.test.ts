// The one rule for requests in flight per model_name (num_requests_running / _waiting in every
// dialect, /metrics-json): the engine's figures where it reports them, attributed so that the sum
// over model_name never counts a request twice, and waiting never below what the proxy sees.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { attributeInFlight, inFlightTotals, type EngineInFlight, type ProxyInFlight } from '../../src/metrics/state/in-flight.ts';
import { seededRandom } from '../helpers/random.ts';

const engine = (running: Record<string, number>, waiting: Record<string, number>): EngineInFlight => ({
  running: new Map(Object.entries(running)),
  waiting: new Map(Object.entries(waiting)),
});
const plain = (m: Map<string, number>) => Object.fromEntries(m);

describe('requests in flight per model_name', () => {
  it("are the proxy's own where the engine reports nothing", () => {
    const proxy: ProxyInFlight[] = [
      { model: 'a', waiting: 2, running: 1 },
      { model: 'b', waiting: 0, running: 3 },
    ];
    const x = attributeInFlight(proxy, undefined);
    assert.deepEqual(plain(x.running), { a: 1, b: 3 });
    assert.deepEqual(plain(x.waiting), { a: 2, b: 0 });
  });

  it("file a single-model engine's figures under its model, whatever name the client sent: one request counts once", () => {
    // The case: llama.cpp serves tiny.gguf; the client asked for gpt-4o-mini; one request decoding.
    const x = attributeInFlight([{ model: 'gpt-4o-mini', waiting: 0, running: 1 }], engine({ 'tiny.gguf': 1 }, { 'tiny.gguf': 0 }));
    assert.deepEqual(plain(x.running), { 'gpt-4o-mini': 0, 'tiny.gguf': 1 });
    assert.deepEqual(plain(x.waiting), { 'gpt-4o-mini': 0, 'tiny.gguf': 0 });
    assert.deepEqual(inFlightTotals(x), { running: 1, waiting: 0 });
  });

  it("keep waiting at what the proxy sees when the engine's queue misses requests held in its HTTP layer", () => {
    // Concurrency 8 against 4 slots: 4 decoding, 4 without a first token; llama.cpp's deferred says 1.
    const x = attributeInFlight([{ model: 'gpt-4o-mini', waiting: 4, running: 4 }], engine({ 'tiny.gguf': 4 }, { 'tiny.gguf': 1 }));
    assert.deepEqual(inFlightTotals(x), { running: 4, waiting: 4 });
    assert.equal(x.waiting.get('tiny.gguf'), 4);
  });

  it('do not count a request in prefill as waiting: the engine runs it, the proxy has no token yet', () => {
    const x = attributeInFlight([{ model: 'm', waiting: 3, running: 1 }], engine({ m: 3 }, { m: 0 }));
    assert.deepEqual(inFlightTotals(x), { running: 3, waiting: 1 }, 'two of the three without a token are in prefill');
  });

  it("keep the engine's queue where it is longer (other clients reach the engine too)", () => {
    const x = attributeInFlight([{ model: 'm', waiting: 1, running: 0 }], engine({ m: 2 }, { m: 5 }));
    assert.deepEqual(inFlightTotals(x), { running: 2, waiting: 5 });
  });

  it("with several engine models, attribute by name; a name the engine does not report keeps the proxy's figures", () => {
    const x = attributeInFlight(
      [
        { model: 'a', waiting: 1, running: 0 },
        { model: 'c', waiting: 1, running: 1 },
      ],
      engine({ a: 1, b: 2 }, { a: 0, b: 0 }),
    );
    assert.deepEqual(plain(x.running), { a: 1, c: 1, b: 2 });
    assert.deepEqual(plain(x.waiting), { a: 0, c: 1, b: 0 }, "a's request without a token is the one the engine runs");
  });

  it('add up to exactly the requests there are, for any consistent state of proxy and single-model engine, and never to more', () => {
    // Each request through the proxy is, at the engine, not seen yet (its HTTP layer), queued
    // (deferred) or running; the proxy sees it waiting until its first token, which only a
    // running request has. Requests from other clients reach the engine directly.
    const random = seededRandom(19);
    const int = (n: number) => Math.floor(random() * n);
    for (let round = 0; round < 500; round++) {
      const names = ['gpt-4o-mini', 'llama', 'tiny.gguf'].slice(0, 1 + int(3));
      const proxy = new Map(names.map((n) => [n, { model: n, waiting: 0, running: 0 }]));
      let held = 0;
      let queued = 0;
      let prefilling = 0;
      let decoding = 0;
      const requests = int(20);
      for (let i = 0; i < requests; i++) {
        const p = proxy.get(names[int(names.length)]!)!;
        const state = int(4);
        if (state === 3) {
          decoding++;
          p.running++;
        } else {
          p.waiting++;
          if (state === 0) held++;
          else if (state === 1) queued++;
          else prefilling++;
        }
      }
      const otherRunning = int(3);
      const otherQueued = int(3);
      const served = int(2) === 0 ? 'tiny.gguf' : 'served-model';
      const x = attributeInFlight(proxy.values(), engine({ [served]: decoding + prefilling + otherRunning }, { [served]: queued + otherQueued }));
      const totals = inFlightTotals(x);
      const context = `round ${round}: held ${held}, queued ${queued}, prefilling ${prefilling}, decoding ${decoding}, others ${otherRunning}+${otherQueued}; got ${JSON.stringify(totals)}`;
      assert.equal(totals.running, decoding + prefilling + otherRunning, context);
      if (otherRunning === 0 && otherQueued === 0) assert.equal(totals.waiting, held + queued, context);
      else {
        // Other clients' requests are not told apart from ours: their running ones look like ours
        // in prefill, their queued ones may be ours. Waiting never counts one twice, and never
        // falls below the engine's queue nor below ours less the engine's other running ones.
        assert.ok(totals.waiting <= held + queued + otherQueued, context);
        assert.ok(totals.waiting >= queued + otherQueued && totals.waiting >= held + queued - otherRunning, context);
      }
    }
  });
  it("never count requests the proxy has seen end since the engine's figures were read (a figure a scrape old)", () => {
    // Concurrency 8 against 4 slots, read when the proxy had the 8 in flight; a burst ends.
    const read = { running: new Map([['tiny.gguf', 4]]), waiting: new Map([['tiny.gguf', 4]]), proxyAtRead: new Map([['gpt-4o-mini', 8]]) };
    const now = (waiting: number, running: number) => inFlightTotals(attributeInFlight([{ model: 'gpt-4o-mini', waiting, running }], read));
    assert.deepEqual(now(4, 4), { running: 4, waiting: 4 }, 'nothing ended: the figures');
    assert.deepEqual(now(0, 4), { running: 4, waiting: 0 }, 'four ended: four left, not the eight of the figure');
    assert.deepEqual(now(0, 1), { running: 1, waiting: 0 });
    assert.deepEqual(now(0, 0), { running: 0, waiting: 0 });
    // Without the proxy's count at the read (an engine snapshot of before), the figures stand.
    assert.deepEqual(inFlightTotals(attributeInFlight([{ model: 'gpt-4o-mini', waiting: 0, running: 0 }], engine({ 'tiny.gguf': 4 }, { 'tiny.gguf': 4 }))), {
      running: 4,
      waiting: 4,
    });
  });

  it("keep the engine's other clients' requests when the proxy's end", () => {
    // Read: 6 running + 5 queued at the engine, 8 of them the proxy's: 3 others.
    const read = { running: new Map([['m', 6]]), waiting: new Map([['m', 5]]), proxyAtRead: new Map([['m', 8]]) };
    assert.deepEqual(inFlightTotals(attributeInFlight([{ model: 'm', waiting: 0, running: 2 }], read)), { running: 5, waiting: 0 });
  });

  it('never add up to more than the requests there are when some ended since the read, for any state', () => {
    const random = seededRandom(56);
    const int = (n: number) => Math.floor(random() * n);
    for (let round = 0; round < 1000; round++) {
      // At the read: the proxy's requests held (not yet at the engine), queued, prefilling, decoding; others'.
      const held = int(5);
      const queued = int(5);
      const prefilling = int(3);
      const decoding = int(5);
      const otherRunning = int(3);
      const otherQueued = int(3);
      const read = {
        running: new Map([['tiny.gguf', decoding + prefilling + otherRunning]]),
        waiting: new Map([['tiny.gguf', queued + otherQueued]]),
        proxyAtRead: new Map([['gpt-4o-mini', held + queued + prefilling + decoding]]),
      };
      // Since: some of the proxy's decoding ones ended, some new ones came (waiting at the proxy).
      const ended = int(decoding + 1);
      const came = int(4);
      const waitingNow = held + queued + prefilling + came;
      const runningNow = decoding - ended;
      const totals = inFlightTotals(attributeInFlight([{ model: 'gpt-4o-mini', waiting: waitingNow, running: runningNow }], read));
      const context = `round ${round}: held ${held} queued ${queued} prefilling ${prefilling} decoding ${decoding} others ${otherRunning}+${otherQueued}, ended ${ended}, came ${came}: ${JSON.stringify(totals)}`;
      assert.ok(totals.running + totals.waiting <= waitingNow + runningNow + otherRunning + otherQueued, context);
      assert.ok(totals.waiting >= waitingNow - Math.max(0, totals.running - runningNow), `the proxy's own floor: ${context}`);
    }
  });
});
