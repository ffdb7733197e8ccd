// One inference request's lifecycle (src/data-plane/lifecycle.ts, exchange.ts): the moves the
// data plane makes, in order, and every impossible one reported instead of acted on.
import { strict as assert } from 'node:assert';
import type { UpstreamRequestHandle, UpstreamResponse } from '../../src/data-plane/upstream-response.ts';
import { describe, it } from 'node:test';
import { Exchange } from '../../src/data-plane/exchange.ts';
import { allowed, LifecycleViolation, type Phase } from '../../src/data-plane/lifecycle.ts';
import type { RequestSample } from '../../src/measure/sample.ts';

const PHASES: readonly Phase[] = ['received', 'identified', 'forwarded', 'answered', 'finished'];
const request = {} as UpstreamRequestHandle;
const response = {} as UpstreamResponse;

function exchange(): { exchange: Exchange; violations: LifecycleViolation[]; samples: RequestSample[]; uninspected: string[] } {
  let now = 0;
  const violations: LifecycleViolation[] = [];
  const samples: RequestSample[] = [];
  const uninspected: string[] = [];
  const ex = new Exchange('chat', undefined, {
    clock: () => (now += 10),
    sink: { started() {}, firstOutput() {}, finished: (s) => samples.push(s) },
    uninspected: (reason) => uninspected.push(reason),
    violation: (error) => violations.push(error),
  });
  return { exchange: ex, violations, samples, uninspected };
}

const identified = { ok: true, model: 'm', stream: true } as const;

describe('request lifecycle', () => {
  it('allows exactly the moves of the diagram', () => {
    const moves = PHASES.flatMap((from) => PHASES.filter((to) => allowed(from, to)).map((to) => `${from}->${to}`));
    assert.deepEqual(moves, [
      'received->identified',
      'received->forwarded',
      'received->answered',
      'received->finished',
      'identified->forwarded',
      'identified->answered',
      'identified->finished',
      'forwarded->forwarded',
      'forwarded->answered',
      'forwarded->finished',
      'answered->finished',
    ]);
  });

  it('walks a held body through every phase in order, and measures once at the end', () => {
    const { exchange: ex, violations, samples } = exchange();
    const seen: Phase[] = [ex.phase];
    ex.identify(identified);
    seen.push(ex.phase);
    assert.equal(ex.forwarded(request), true);
    seen.push(ex.phase);
    ex.responded(response);
    assert.equal(ex.upstreamResponse, response);
    assert.equal(ex.answered('relayed'), true);
    seen.push(ex.phase);
    const sample = ex.finish(true);
    seen.push(ex.phase);
    assert.deepEqual(seen, PHASES);
    assert.deepEqual(violations, []);
    assert.equal(ex.answeredWith, 'relayed');
    assert.equal(samples.length, 1);
    assert.equal(sample?.model, 'm');
    assert.equal(sample?.outcome, 'success');
  });

  it('identifies a streamed body on the side, after it was forwarded, without changing phase', () => {
    const { exchange: ex, violations, samples } = exchange();
    ex.forwarded(request);
    ex.identify(identified);
    assert.equal(ex.phase, 'forwarded');
    ex.answered('relayed');
    ex.finish(true);
    assert.deepEqual(violations, []);
    assert.equal(samples[0]?.model, 'm');
  });

  it('re-sends once after a refused injection, and the re-send forgets the refusal', () => {
    const { exchange: ex, violations } = exchange();
    ex.identify(identified);
    ex.inject(Buffer.from('{}'));
    ex.forwarded(request);
    ex.responded(response);
    ex.refuseInjection();
    const second = {} as UpstreamRequestHandle;
    assert.equal(ex.forwarded(second, 'refused_injection'), true);
    assert.equal(ex.upstreamRequest, second);
    assert.equal(ex.upstreamResponse, undefined, "the refusal was not the re-send's answer");
    assert.equal(ex.resendReason, 'refused_injection');
    assert.equal(ex.injection?.refused, true);
    assert.deepEqual(violations, []);
  });

  it('re-sends once for each reason: a stale connection, then a refused injection', () => {
    const { exchange: ex, violations } = exchange();
    ex.forwarded(request);
    assert.equal(ex.forwarded(request, 'stale_connection'), true);
    assert.equal(ex.forwarded(request, 'refused_injection'), true);
    assert.equal(ex.resendReason, 'refused_injection');
    assert.equal(ex.resentFor('stale_connection'), true);
    assert.equal(ex.forwarded(request, 'stale_connection'), false, 'a second retry');
    assert.deepEqual(
      violations.map((v) => `${v.from}->${v.to}`),
      ['forwarded->resend'],
    );
  });

  it('reports a second re-send, a re-send before forwarding and a first forward twice', () => {
    const twice = exchange();
    twice.exchange.forwarded(request);
    twice.exchange.forwarded(request, 'refused_injection');
    assert.equal(twice.exchange.forwarded(request, 'refused_injection'), false);
    assert.deepEqual(
      twice.violations.map((v) => `${v.from}->${v.to}`),
      ['forwarded->resend'],
    );

    const early = exchange();
    assert.equal(early.exchange.forwarded(request, 'refused_injection'), false);
    assert.deepEqual(
      early.violations.map((v) => `${v.from}->${v.to}`),
      ['received->resend'],
    );

    const again = exchange();
    again.exchange.forwarded(request);
    assert.equal(again.exchange.forwarded(request), false);
    assert.deepEqual(
      again.violations.map((v) => `${v.from}->${v.to}`),
      ['forwarded->forwarded'],
    );
  });

  it('reports an answer given twice and leaves the first one standing', () => {
    const { exchange: ex, violations } = exchange();
    ex.forwarded(request);
    ex.answered('relayed');
    assert.equal(ex.answered('error'), false);
    assert.equal(ex.answeredWith, 'relayed');
    assert.deepEqual(
      violations.map((v) => `${v.from}->${v.to}`),
      ['answered->answered'],
    );
    assert.ok(violations[0] instanceof LifecycleViolation);
    assert.equal(violations[0]!.code, 'ERR_INFERMETER_LIFECYCLE');
  });

  it('reports every move after finished, and measures a request once', () => {
    const { exchange: ex, violations, samples } = exchange();
    ex.forwarded(request);
    ex.finish(false);
    assert.equal(ex.forwarded(request), false);
    assert.equal(ex.answered('relayed'), false);
    assert.equal(ex.finish(true), undefined);
    assert.deepEqual(
      violations.map((v) => `${v.from}->${v.to}`),
      ['finished->forwarded', 'finished->answered', 'finished->finished'],
    );
    assert.equal(samples.length, 1);
    assert.equal(samples[0]?.outcome, 'cancelled');
  });

  it('reports a request identified twice and keeps the first labels', () => {
    const { exchange: ex, violations, samples } = exchange();
    ex.identify(identified);
    ex.identify({ ok: true, model: 'other', stream: false });
    ex.finish(true);
    assert.deepEqual(
      violations.map((v) => `${v.from}->${v.to}`),
      ['identified->identify'],
    );
    assert.equal(samples[0]?.model, 'm');
  });

  it('counts a body found unreadable after the client left, without a violation or a sample', () => {
    const { exchange: ex, violations, samples, uninspected } = exchange();
    ex.forwarded(request);
    ex.finish(false);
    ex.identify({ ok: false, reason: 'invalid_json' });
    assert.deepEqual(violations, []);
    assert.deepEqual(uninspected, ['invalid_json']);
    assert.equal(samples.length, 1);
  });

  it('finishes a refused request unmeasured: it never reached the upstream', () => {
    const { exchange: ex, violations, samples } = exchange();
    assert.equal(ex.answered('error'), true);
    assert.equal(ex.finish(true, false), undefined);
    assert.equal(ex.phase, 'finished');
    assert.deepEqual(violations, []);
    assert.equal(samples.length, 0);
  });
});
