// The upstream attempt (src/data-plane/upstream-attempt.ts) on its own, against scripted
// upstream requests: one answer or one failure reported, never both, never two; a failure of the
// answer's own leg only after the answer, at most once; the stale-connection re-send and the
// re-send after a refused injection each at most once, and only when their rules allow.
import { strict as assert } from 'node:assert';
import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { PassThrough, Readable } from 'node:stream';
import { HELD_ANSWER_CUT } from '../../src/data-plane/error-answer.ts';
import { Exchange } from '../../src/data-plane/exchange.ts';
import type { LifecycleViolation, ResendReason } from '../../src/data-plane/lifecycle.ts';
import { UpstreamAttempt } from '../../src/data-plane/upstream-attempt.ts';
import type { SendUpstream } from '../../src/data-plane/upstream-request.ts';
import type { UpstreamHandlers, UpstreamRequestHandle, UpstreamResponse } from '../../src/data-plane/upstream-response.ts';

/** One sending as the fake upstream path saw it. */
interface Sent {
  readonly body: Buffer | Readable;
  readonly fresh: boolean;
  readonly request: FakeRequest;
  readonly handlers: UpstreamHandlers;
}

/** An upstream request as the attempt reads it: reused or not, destroyed or not (never written to a socket). */
class FakeRequest extends EventEmitter {
  reusedSocket: boolean;
  destroyed = false;
  readonly socket = null;
  private readonly handlers: UpstreamHandlers;
  constructor(reused: boolean, handlers: UpstreamHandlers) {
    super();
    this.reusedSocket = reused;
    this.handlers = handlers;
  }
  destroy(error?: Error): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    // As Node's: the request fails with the error it was destroyed with, or a hang-up.
    const failure = error ?? Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    queueMicrotask(() => this.handlers.error(failure));
    return this;
  }
}

type Report =
  | { kind: 'response'; response: UpstreamResponse; held: string | undefined; complete: boolean | undefined }
  | { kind: 'failed' | 'broke'; code: string | undefined };

function fakeResponse(status: number): UpstreamResponse {
  const response = new PassThrough() as PassThrough & { statusCode: number; headers: Record<string, string>; complete: boolean };
  response.statusCode = status;
  response.headers = {};
  response.complete = false;
  response.on('end', () => (response.complete = true));
  return response as unknown as UpstreamResponse;
}

function harness(options: { reused?: boolean[]; injected?: Buffer; req?: IncomingMessage; maxInspectBytes?: number } = {}) {
  const sent: Sent[] = [];
  const reports: Report[] = [];
  const retried: ResendReason[] = [];
  const violations: LifecycleViolation[] = [];
  let injectionRefused = 0;
  const reused = options.reused ?? [];
  const sendUpstream: SendUpstream = (_req, body, handlers, _id, fresh = false) => {
    const request = new FakeRequest(reused[sent.length] ?? false, handlers);
    sent.push({ body: body ?? Buffer.alloc(0), fresh, request, handlers });
    return request as unknown as UpstreamRequestHandle;
  };
  const exchange = new Exchange('chat', undefined, {
    clock: () => 0,
    sink: { started() {}, firstOutput() {}, finished() {} },
    uninspected() {},
    violation: (error) => violations.push(error),
  });
  if (options.injected !== undefined) exchange.inject(options.injected);
  const req = options.req ?? (new PassThrough() as unknown as IncomingMessage);
  const attempt = new UpstreamAttempt(
    {
      sendUpstream,
      maxInspectBytes: options.maxInspectBytes ?? 1024,
      retried: (reason) => retried.push(reason),
      usageInjection: {
        active: () => true,
        accepted: () => false,
        countsStated() {},
        countsMissing() {},
        accept() {},
        whenAccepted: () => () => undefined,
        refused: () => injectionRefused++,
        injected() {},
        stripped() {},
      },
    },
    req,
    { shouldKeepAlive: true },
    exchange,
    { take: () => true, release() {}, wait: () => () => undefined, fits: () => true },
    {
      response: (response, held) =>
        reports.push({ kind: 'response', response, held: held === undefined ? undefined : Buffer.concat(held.chunks).toString(), complete: held?.complete }),
      failed: (error) => reports.push({ kind: 'failed', code: (error as NodeJS.ErrnoException).code }),
      broke: (error) => reports.push({ kind: 'broke', code: (error as NodeJS.ErrnoException).code }),
    },
  );
  return { attempt, exchange, sent, reports, retried, violations, req, injectionRefused: () => injectionRefused };
}

const reset = (): Error => Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
const BODY = Buffer.from('{"model":"m","stream":true}');
const REFUSAL = JSON.stringify({
  object: 'error',
  message: "[{'type': 'extra_forbidden', 'loc': ('body', 'stream_options'), 'msg': 'Extra inputs are not permitted'}]",
  type: 'BadRequestError',
  code: 400,
});

/** The contract, checked on every report list: at most one answer or failure, never both; a break only after an answer, once. */
function assertContract(reports: readonly Report[]): void {
  const ends = reports.filter((r) => r.kind !== 'broke');
  assert.ok(ends.length <= 1, `one answer or one failure: ${JSON.stringify(reports.map((r) => r.kind))}`);
  const broke = reports.filter((r) => r.kind === 'broke');
  assert.ok(broke.length <= 1, 'a break at most once');
  if (broke.length === 1) assert.equal(reports[0]!.kind, 'response', 'a break only after an answer');
}

describe('the upstream attempt', () => {
  it('reports the answer of a held body once, sent once', () => {
    const h = harness();
    h.attempt.send(BODY);
    const response = fakeResponse(200);
    h.sent[0]!.handlers.response(response);
    assert.deepEqual(
      h.reports.map((r) => r.kind),
      ['response'],
    );
    assert.equal(h.sent.length, 1);
    assert.equal(h.exchange.upstreamResponse, response);
    assert.deepEqual([h.retried, h.violations], [[], []]);
  });

  it('reports a failure on a new connection once, and never sends it again', async () => {
    const h = harness({ reused: [false] });
    h.attempt.send(BODY);
    h.sent[0]!.handlers.error(reset());
    await tick();
    assert.deepEqual(h.reports, [{ kind: 'failed', code: 'ECONNRESET' }]);
    assert.equal(h.sent.length, 1);
  });

  it("sends a held body again once, on a new connection, when its reused connection failed before any byte; the answer is the re-send's", async () => {
    const h = harness({ reused: [true, true] });
    h.attempt.send(BODY);
    h.sent[0]!.handlers.error(reset());
    assert.equal(h.sent.length, 2);
    assert.equal(h.sent[1]!.body, BODY);
    assert.equal(h.sent[1]!.fresh, true, 'on a connection kept for nothing else');
    assert.deepEqual(h.retried, ['stale_connection']);
    assert.deepEqual(h.reports, [], 'the route saw nothing of the stale one');
    // The stale request's late events count for nothing.
    const late = fakeResponse(200);
    h.sent[0]!.handlers.response(late);
    h.sent[0]!.handlers.error(reset());
    const response = fakeResponse(200);
    h.sent[1]!.handlers.response(response);
    assert.equal(h.reports.length, 1);
    assert.equal((h.reports[0]! as { response: UpstreamResponse }).response, response);
    assert.equal(h.exchange.resendReason, 'stale_connection');
    assert.deepEqual(h.violations, []);
  });

  it('re-sends for a stale connection once: a second stale failure is the failure', () => {
    const h = harness({ reused: [true, true, true] });
    h.attempt.send(BODY);
    h.sent[0]!.handlers.error(reset());
    h.sent[1]!.handlers.error(reset());
    assert.equal(h.sent.length, 2);
    assert.deepEqual(h.reports, [{ kind: 'failed', code: 'ECONNRESET' }]);
  });

  it("never re-sends an error that is not a stale connection's, even on a reused one", () => {
    const h = harness({ reused: [true] });
    h.attempt.send(BODY);
    h.sent[0]!.handlers.error(refused());
    assert.equal(h.sent.length, 1);
    assert.deepEqual(h.reports, [{ kind: 'failed', code: 'ECONNREFUSED' }]);
  });

  it('never re-sends once a response began: a failure after it is a break of that answer, once', () => {
    const h = harness({ reused: [true] });
    h.attempt.send(BODY);
    h.sent[0]!.handlers.response(fakeResponse(200));
    h.sent[0]!.handlers.error(reset());
    h.sent[0]!.handlers.error(reset());
    assert.equal(h.sent.length, 1);
    assert.deepEqual(
      h.reports.map((r) => r.kind),
      ['response', 'broke'],
    );
  });

  it('re-sends a streamed body from its copy once the client sent it all, and fails when it was not kept whole', async () => {
    const req = new PassThrough();
    const h = harness({ reused: [true, true], req: req as unknown as IncomingMessage });
    h.attempt.send(req);
    req.write('{"model":');
    h.sent[0]!.handlers.error(reset());
    assert.equal(h.sent.length, 1, 'waits for the rest of the body');
    req.end('"m"}');
    await tick();
    assert.equal(h.sent.length, 2);
    assert.equal((h.sent[1]!.body as Buffer).toString(), '{"model":"m"}');

    const big = new PassThrough();
    const g = harness({ reused: [true], req: big as unknown as IncomingMessage, maxInspectBytes: 4 });
    g.attempt.send(big);
    big.end('{"model":"m"}');
    await tick();
    g.sent[0]!.handlers.error(reset());
    await tick();
    assert.equal(g.sent.length, 1);
    assert.deepEqual(g.reports, [{ kind: 'failed', code: 'ECONNRESET' }]);
  });

  it("never re-sends a streamed body that is not the client's own request (held bytes, then the rest)", () => {
    const h = harness({ reused: [true] });
    h.attempt.send(Readable.from([BODY]));
    h.sent[0]!.handlers.error(reset());
    assert.equal(h.sent.length, 1);
    assert.deepEqual(h.reports, [{ kind: 'failed', code: 'ECONNRESET' }]);
  });

  it("re-sends the client's own body once after a refused injection; the route sees only the re-send's answer, and its success turns injection off", async () => {
    const h = harness({ injected: BODY });
    h.attempt.send(Buffer.from('{"model":"m","stream":true,"stream_options":{"include_usage":true}}'));
    const refusal = fakeResponse(400);
    h.sent[0]!.handlers.response(refusal);
    (refusal as unknown as PassThrough).end(REFUSAL);
    await tick();
    assert.equal(h.sent.length, 2);
    assert.equal(h.sent[1]!.body, BODY, "the client's own body");
    assert.equal(h.sent[1]!.fresh, false);
    assert.deepEqual(h.retried, ['refused_injection']);
    assert.deepEqual(h.reports, []);
    const response = fakeResponse(200);
    h.sent[1]!.handlers.response(response);
    assert.equal(h.reports.length, 1);
    assert.equal((h.reports[0]! as { response: UpstreamResponse }).response, response);
    assert.equal(h.injectionRefused(), 1);
    assert.equal(h.exchange.injection?.refused, true);
  });

  it('passes a held 4xx that is not a refusal on as the answer, with what was read of it', async () => {
    const h = harness({ injected: BODY });
    h.attempt.send(Buffer.from('{}'));
    const answer = fakeResponse(404);
    h.sent[0]!.handlers.response(answer);
    (answer as unknown as PassThrough).end('{"error":"no such model"}');
    await tick();
    assert.equal(h.sent.length, 1);
    assert.deepEqual(
      h.reports.map((r) => [r.kind, (r as { held?: string }).held, (r as { complete?: boolean }).complete]),
      [['response', '{"error":"no such model"}', true]],
    );
  });

  it('reports a held 4xx cut before its end as a failure, never as an answer', async () => {
    const h = harness({ injected: BODY });
    h.attempt.send(Buffer.from('{}'));
    const answer = fakeResponse(400);
    h.sent[0]!.handlers.response(answer);
    (answer as unknown as PassThrough).write('{"error":');
    (answer as unknown as PassThrough).destroy(reset());
    await tick();
    h.sent[0]!.handlers.error(reset());
    assert.deepEqual(h.reports, [{ kind: 'failed', code: HELD_ANSWER_CUT }]);
    assert.equal(h.sent.length, 1);
  });

  it('once closed, gives its upstream request up, sends nothing more and reports nothing', async () => {
    const h = harness({ reused: [true] });
    h.attempt.send(BODY);
    h.attempt.close(true);
    assert.equal(h.sent[0]!.request.destroyed, true);
    await tick(); // the destroyed request's hang-up comes: neither re-sent nor reported
    const late = fakeResponse(200);
    h.sent[0]!.handlers.response(late);
    assert.equal(h.sent.length, 1);
    assert.deepEqual(h.reports, []);
    assert.equal((late as unknown as PassThrough).readableFlowing, true, 'a late answer is drained');

    const early = harness();
    early.attempt.close(true);
    early.attempt.send(BODY);
    assert.equal(early.sent.length, 0, 'a client that left before its body was read is not forwarded');
  });

  it('reports the idle timeout as a failure before an answer and as a break after one', async () => {
    const before = harness({ reused: [true] });
    before.attempt.send(BODY);
    before.attempt.destroy(Object.assign(new Error('silent'), { code: 'ETIMEDOUT' }));
    await tick();
    assert.deepEqual(before.reports, [{ kind: 'failed', code: 'ETIMEDOUT' }]);
    assert.equal(before.sent.length, 1);

    const after = harness();
    after.attempt.send(BODY);
    after.sent[0]!.handlers.response(fakeResponse(200));
    after.attempt.destroy(Object.assign(new Error('silent'), { code: 'ETIMEDOUT' }));
    await tick();
    assert.deepEqual(
      after.reports.map((r) => r.kind),
      ['response', 'broke'],
    );
  });

  it('keeps the contract under any order of upstream events (seeded, 2000 scripts)', async () => {
    let seed = 35;
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const codes = ['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'ETIMEDOUT', 'HPE_INVALID_CHUNK_SIZE'];
    for (let script = 0; script < 2000; script++) {
      const injected = random(2) === 0;
      const h = harness({ reused: [0, 1, 2, 3].map(() => random(2) === 0), injected: injected ? BODY : undefined });
      h.attempt.send(Buffer.from('{"model":"m","stream":true,"stream_options":{"include_usage":true}}'));
      for (let step = 0; step < 6; step++) {
        const sending = h.sent[random(h.sent.length)]!;
        const move = random(10);
        if (move < 4) sending.handlers.error(Object.assign(new Error('x'), { code: codes[random(codes.length)] }));
        else if (move < 8) {
          const response = fakeResponse([200, 400, 404, 500][random(4)]!);
          sending.handlers.response(response);
          if (random(3) === 0) (response as unknown as PassThrough).destroy();
          else (response as unknown as PassThrough).end(random(2) === 0 ? REFUSAL : '{}');
        } else if (move === 8) h.attempt.close(random(2) === 0);
        else await tick();
      }
      await tick();
      assertContract(h.reports);
      assert.ok(h.retried.filter((r) => r === 'stale_connection').length <= 1, 'one stale re-send at most');
      assert.ok(h.retried.filter((r) => r === 'refused_injection').length <= 1, 'one refusal re-send at most');
      assert.ok(h.sent.length <= 3, `sent ${h.sent.length} times`);
      assert.deepEqual(h.violations, []);
    }
  });
});
