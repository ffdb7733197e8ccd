// With workers, every measurement crosses the bus (worker -> primary) before the recorder sees
// it: each sink call, proxy event and usage line must arrive as the in-process call would have made it,
// field by field, "none" (undefined) kept apart from 0 and false. A property test over random
// calls, their optional figures drawn from undefined, 0 and other values; the messages are
// structured-cloned as the cluster's `advanced` serialization clones them (src/cluster/primary.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createWorkerBus, createWorkerReceiver, type WorkerMessage } from '../../src/cluster/bus.ts';
import type { MeasurementSink } from '../../src/measure/request-timer.ts';
import type { RequestInfo, RequestSample } from '../../src/measure/sample.ts';
import type { ProxyEvents } from '../../src/metrics/own/proxy-families.ts';
import { seededRandom } from '../helpers/random.ts';

type Call = readonly [name: string, ...args: unknown[]];

/** A sink, proxy events and a ledger that record every call, with its arguments as given. */
function recorder(): { sink: MeasurementSink; events: ProxyEvents; ledger: { append(line: string): void }; calls: Call[] } {
  const calls: Call[] = [];
  const record =
    (name: string) =>
    (...args: unknown[]) =>
      void calls.push([name, ...args]);
  const sink: MeasurementSink = {
    started: record('started'),
    firstOutput: record('firstOutput'),
    firstVisibleOutput: record('firstVisibleOutput'),
    interToken: record('interToken'),
    finished: record('finished'),
  };
  const events: ProxyEvents = {
    uninspected: record('uninspected'),
    tapProblem: record('tapProblem'),
    proxyError: record('proxyError'),
    retried: record('retried'),
    injectionActive: record('injectionActive'),
    usageInjected: record('usageInjected'),
    usageStripped: record('usageStripped'),
    accessLogDropped: record('accessLogDropped'),
    rejected: record('rejected'),
    clientError: record('clientError'),
    bodyUnheld: record('bodyUnheld'),
    httpRequest: record('httpRequest'),
  };
  return { sink, events, ledger: { append: record('append') }, calls };
}

/** An info object as the data plane writes it: no key for what is absent. */
function info(fields: Record<string, unknown>): RequestInfo {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as unknown as RequestInfo;
}

describe('the worker bus', () => {
  it('delivers every sink call, proxy event and ledger line as the in-process call, field by field: undefined stays undefined, 0 stays 0, false stays false', () => {
    const random = seededRandom(53);
    const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
    const figure = () => pick([undefined, 0, 0.25, 1e-6, 42]);
    const count = () => pick([undefined, 0, 1, 17]);
    const direct = recorder();
    const carried = recorder();
    const messages: WorkerMessage[] = [];
    const bus = createWorkerBus(
      (m) => messages.push(structuredClone(m)),
      () => 0,
    );
    const receiver = createWorkerReceiver(
      carried.sink,
      carried.events,
      (m) => m,
      (t) => t,
      carried.ledger.append,
    );
    // What the bus does not carry, by design: started's and interToken's request id (an exemplar
    // is taken at first output and at the end only).
    const expected: Call[] = [];
    for (let i = 0; i < 2000; i++) {
      const tenant = pick([undefined, '', 'acme']);
      const base = {
        api: pick(['chat', 'completions', 'responses', 'messages'] as const),
        model: pick(['m', '', 'unknown']),
        stream: pick([true, false]),
        tenant,
        accepted: tenant === undefined ? undefined : pick([undefined, true, false]),
        requestId: pick([undefined, 'r-1']),
      };
      const calls: Array<[object, string, unknown[], unknown[]?]> = [];
      switch (Math.floor(random() * 7)) {
        case 0:
          calls.push([direct.sink, 'started', [info({ ...base, accepted: undefined })], [info({ ...base, accepted: undefined, requestId: undefined })]]);
          break;
        case 1:
          calls.push([direct.sink, 'firstOutput', [info(base), figure()]]);
          break;
        case 2:
          calls.push([direct.sink, 'firstVisibleOutput', [info(base), pick([0, 0.5, 3]), figure()]]);
          break;
        case 3: {
          const [seconds, tokens] = [pick([0, 0.01, 2]), pick([1, 0, 5])];
          calls.push([direct.sink, 'interToken', [info(base), seconds, tokens], [info({ ...base, requestId: undefined }), seconds, tokens]]);
          break;
        }
        case 4: {
          const sample = {
            ...info(base),
            status: pick([0, 200, 499, 502]),
            outcome: pick(['success', 'failed', 'cancelled']),
            failure: pick([undefined, 'upstream_error']),
            cancelPhase: pick([undefined, 'before_output']),
            ttfb: figure(),
            streamed: pick([true, false]),
            outputSeen: pick([true, false]),
            ttft: figure(),
            proxyOverhead: figure(),
            lastToken: figure(),
            e2e: figure(),
            tpot: pick([undefined, { seconds: 0, tokens: 0 }, { seconds: 0.02, tokens: 3 }]),
            promptTokens: count(),
            completionTokens: count(),
            usageSource: pick(['upstream', 'none']),
            cachedPromptTokens: count(),
            cacheWriteTokens: count(),
            reasoningTokens: count(),
            tokenEvents: pick([0, 3]),
            finishReason: pick([undefined, 'stop', '']),
            duration: figure(),
          } as unknown as RequestSample;
          calls.push([direct.sink, 'finished', [sample]]);
          break;
        }
        case 5:
          // A usage record's line, for the primary's spool.
          calls.push([direct.ledger, 'append', [pick(['', '{"id":"a"}\n', 'ü\u0000\n'])]]);
          break;
        default: {
          const [name, arg] = pick([
            ['uninspected', 'too_large'],
            ['tapProblem', 'bad_event'],
            ['proxyError', 'connect'],
            ['retried', 'stale_connection'],
            ['injectionActive', false],
            ['injectionActive', true],
            ['usageInjected', undefined],
            ['usageStripped', undefined],
            ['accessLogDropped', undefined],
            ['rejected', undefined],
            ['clientError', 'timeout'],
            ['bodyUnheld', 'inject'],
          ] as const);
          calls.push([direct.events, name, arg === undefined ? [] : [arg]]);
          if (random() < 0.3) calls.push([direct.events, 'httpRequest', ['vllm', '/v1/models', 'GET', pick([0, 200, 404]), pick([0, 0.003])]]);
        }
      }
      for (const [target, name, args, carriedArgs] of calls) {
        (target as unknown as Record<string, (...a: unknown[]) => void>)[name]!(...args);
        const onBus = target === direct.sink ? bus.sink : target === direct.events ? bus.events : bus.ledger;
        (onBus as unknown as Record<string, (...a: unknown[]) => void>)[name]!(...args);
        expected.push([name, ...(carriedArgs ?? args)]);
      }
      if (random() < 0.1) bus.flush();
    }
    bus.flush();
    // Compact: no object crosses but a finished request's sample (a request's info goes as its fields).
    for (const m of messages) {
      if (m.t !== 'events') continue;
      for (const e of m.events) {
        const objects = (e as readonly unknown[]).filter((v) => typeof v === 'object' && v !== null);
        assert.ok(objects.length === 0 || (objects.length === 1 && 'outcome' in objects[0]!), `an object on the bus: ${JSON.stringify(e)}`);
      }
    }
    for (const m of messages) if (m.t === 'events') receiver.receive(m.events);
    assert.equal(carried.calls.length, expected.length, 'as many calls arrived as were made');
    // The events with no argument arrive with none (an `undefined` argument, not a 0 or a null).
    const normal = (calls: Call[]) =>
      calls.map(([name, ...args]) => [
        name,
        ...args.filter((a, j) => !(a === undefined && j === args.length - 1 && name !== 'firstOutput' && name !== 'firstVisibleOutput')),
      ]);
    for (let i = 0; i < expected.length; i++) {
      assert.deepStrictEqual(normal([carried.calls[i]!])[0], normal([expected[i]!])[0], `call ${i}: ${expected[i]![0]}`);
    }
  });
});
