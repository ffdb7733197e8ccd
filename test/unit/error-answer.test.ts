// The contract of a failed upstream leg (src/data-plane/error-answer.ts): what the client gets
// depends only on how far the exchange had got, and the error answer is a well-formed response.
import { strict as assert } from 'node:assert';
import http from 'node:http';
import { describe, it } from 'node:test';
import { decideErrorAnswer, errorKind, writeErrorAnswer, type ErrorState } from '../../src/data-plane/error-answer.ts';
import { listen } from '../helpers/listen.ts';

const fresh: ErrorState = { clientGone: false, responseBegan: false, responseComplete: false, headSent: false };

describe('error answers', () => {
  it('names the failure from its code: timeouts, HTTP parse errors, everything else unreachable', () => {
    assert.equal(errorKind('ETIMEDOUT'), 'upstream_timeout');
    assert.equal(errorKind('ECONNECT_TIMEOUT'), 'upstream_timeout');
    assert.equal(errorKind('HPE_INVALID_STATUS'), 'upstream_protocol');
    assert.equal(errorKind('HPE_UNSENDABLE_HEAD'), 'upstream_protocol');
    assert.equal(errorKind('ECONNREFUSED'), 'upstream_unreachable');
    assert.equal(errorKind('ECONNRESET'), 'upstream_unreachable');
    assert.equal(errorKind(undefined), 'upstream_unreachable');
  });

  it('answers a client that got nothing yet with its own error', () => {
    assert.deepEqual(decideErrorAnswer(fresh, 'ECONNREFUSED'), { action: 'answer', kind: 'upstream_unreachable' });
    assert.deepEqual(decideErrorAnswer(fresh, 'ETIMEDOUT'), { action: 'answer', kind: 'upstream_timeout' });
    assert.deepEqual(decideErrorAnswer(fresh, 'HPE_INVALID_CONSTANT'), { action: 'answer', kind: 'upstream_protocol' });
  });

  it('does nothing for a client that is gone', () => {
    assert.deepEqual(decideErrorAnswer({ ...fresh, clientGone: true }, 'ECONNRESET'), { action: 'none' });
    assert.deepEqual(decideErrorAnswer({ ...fresh, clientGone: true, responseBegan: true, headSent: true }, 'ETIMEDOUT'), { action: 'none' });
  });

  it('never answers twice: a begun response is cut, or left to finish after its last byte', () => {
    const began = { ...fresh, responseBegan: true, headSent: true };
    assert.deepEqual(decideErrorAnswer(began, 'ECONNRESET'), { action: 'cut_upstream' });
    assert.deepEqual(decideErrorAnswer({ ...began, responseComplete: true }, 'HPE_INVALID_CONSTANT'), { action: 'count', kind: 'upstream_protocol' });
  });

  it('takes a timeout as its own to act on even after the response began: the client is cut or answered 504', () => {
    assert.deepEqual(decideErrorAnswer({ ...fresh, responseBegan: true, headSent: true }, 'ETIMEDOUT'), {
      action: 'cut',
      kind: 'upstream_timeout',
      failure: 'upstream_timeout',
    });
    assert.deepEqual(decideErrorAnswer({ ...fresh, responseBegan: true }, 'ETIMEDOUT'), { action: 'answer', kind: 'upstream_timeout' });
  });

  it('cuts a client whose head is out as a reset, a timeout as a timeout', () => {
    assert.deepEqual(decideErrorAnswer({ ...fresh, headSent: true }, 'ECONNRESET'), { action: 'cut', kind: 'upstream_unreachable', failure: 'upstream_reset' });
    assert.deepEqual(decideErrorAnswer({ ...fresh, headSent: true }, 'ECONNECT_TIMEOUT'), {
      action: 'cut',
      kind: 'upstream_timeout',
      failure: 'upstream_timeout',
    });
  });

  it('writes the OpenAI error shape with its status, size and a clean reason phrase', async (t) => {
    let written: { status: number; bytes: number } | undefined;
    const server = http.createServer((_req, res) => {
      // A reason phrase a refused upstream head left behind must not be reused.
      res.statusMessage = 'O\x01K';
      written = writeErrorAnswer(res, 'overloaded', undefined, { 'retry-after': '1' });
    });
    const res = await fetch(`${(await listen(t, server)).url}/`);
    const body = await res.text();
    assert.equal(res.status, 503);
    assert.equal(res.statusText, 'Service Unavailable');
    assert.equal(res.headers.get('retry-after'), '1');
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.equal(Number(res.headers.get('content-length')), Buffer.byteLength(body));
    assert.deepEqual(written, { status: 503, bytes: Buffer.byteLength(body) });
    assert.deepEqual(JSON.parse(body), {
      error: { message: 'too many requests in flight; try again later', type: 'upstream_error', param: null, code: 'overloaded' },
    });
  });
});
