// The held-body budget (INFERMETER_MAX_HELD_BODY_BYTES) is given back in full once the requests
// that took it have ended, however they ended (issue 53): answered, refused by the upstream,
// reset by the upstream, left by the client mid-body or while waiting for its answer, on the
// measured route (a chat body held whole for usage injection) and on the pass-through route (a
// chunked DELETE held to be sent with a length). Each request's body is the whole budget, so a
// byte not given back by one makes the next one go unheld (counted by
// infermeter_request_bodies_unheld_total, and a DELETE refused with 503).
import assert from 'node:assert/strict';
import http from 'node:http';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { listen } from '../helpers/listen.ts';
import { scrape, startProxy } from '../helpers/proxy-harness.ts';

const BUDGET = 64 * 1024;

/** A chat body of exactly `bytes` bytes. */
function chatBody(bytes: number): string {
  const head = '{"model":"m","stream":true,"messages":[{"role":"user","content":"';
  const tail = '"}]}';
  return head + 'a'.repeat(bytes - head.length - tail.length) + tail;
}

describe('the held-body budget, after requests end', () => {
  it('is back to all of it after requests that ended every way, on both routes', async (t) => {
    // The upstream does what the request's path says, after reading the whole body.
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const how = req.headers['x-how'];
        if (how === 'reset') return req.socket.destroy();
        if (how === 'hang') return;
        if (how === 'refuse') return res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"no"}}');
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(
          'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\ndata: [DONE]\n\n',
        );
      });
    });
    const upstream = await listen(t, server);
    t.after(() => server.closeAllConnections());
    // Every request comes from one address: its part of the budget is the whole of it here.
    const app = await startProxy(t, upstream.url, {
      INFERMETER_MAX_HELD_BODY_BYTES: String(BUDGET),
      INFERMETER_MAX_HELD_BODY_BYTES_PER_CLIENT: String(BUDGET),
    });
    const port = Number(new URL(app.dataUrl).port);
    const plane = app.dataPlane!;
    const unheld = async () => {
      const m = await scrape(app);
      return {
        usage_injection: m.value('infermeter_request_bodies_unheld_total', { use: 'usage_injection' }) ?? 0,
        content_length: m.value('infermeter_request_bodies_unheld_total', { use: 'content_length' }) ?? 0,
      };
    };
    /** Every client and upstream connection closed: each request has ended. */
    const settled = async (what: string) => {
      for (let i = 0; i < 1000 && (plane.connections() > 0 || plane.upstreamConnections() > 0); i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(plane.connections() + plane.upstreamConnections(), 0, `${what}: connections still open after 10 s`);
    };
    /** One request on a connection of its own, written raw; `cut` bytes of its body sent before the client leaves (undefined: all, then read the answer). */
    const send = (head: string, body: string, cut?: number, leaveAfterMs?: number) =>
      new Promise<string>((resolve) => {
        const socket = connect(port, '127.0.0.1');
        let answer = '';
        socket.on('data', (c: Buffer) => (answer += c.toString('latin1')));
        socket.on('error', () => undefined);
        socket.once('close', () => resolve(answer));
        socket.write(head);
        if (cut !== undefined) {
          socket.write(body.slice(0, cut), () => setTimeout(() => socket.resetAndDestroy(), 50));
          return;
        }
        socket.write(body);
        if (leaveAfterMs !== undefined) setTimeout(() => socket.destroy(), leaveAfterMs);
      });
    const chat = (how: string, body = chatBody(BUDGET)) =>
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nX-How: ${how}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
    const chunkedDelete = (how: string) => `DELETE /v1/files/f HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-How: ${how}\r\nTransfer-Encoding: chunked\r\n\r\n`;
    const deleteBody = `${(BUDGET - 16).toString(16)}\r\n${'d'.repeat(BUDGET - 16)}\r\n0\r\n\r\n`;

    const body = chatBody(BUDGET);
    const cases: Array<[string, () => Promise<string>]> = [
      ['chat, answered', () => send(chat('ok'), body)],
      ['chat, refused by the upstream (400)', () => send(chat('refuse'), body)],
      ['chat, reset by the upstream', () => send(chat('reset'), body)],
      ['chat, the client left mid-body', () => send(chat('ok'), body, BUDGET / 2)],
      ['chat, the client left waiting for its answer', () => send(chat('hang'), body, undefined, 300)],
      ['chunked DELETE, answered', () => send(chunkedDelete('ok'), deleteBody)],
      ['chunked DELETE, reset by the upstream', () => send(chunkedDelete('reset'), deleteBody)],
      ['chunked DELETE, the client left mid-body', () => send(chunkedDelete('ok'), deleteBody, BUDGET / 2)],
      ['chunked DELETE, the client left waiting for its answer', () => send(chunkedDelete('hang'), deleteBody, undefined, 300)],
    ];
    for (const [what, run] of cases) {
      const answer = await run();
      await settled(what);
      assert.doesNotMatch(answer, /^HTTP\/1\.1 503/, `${what}: not refused for want of budget`);
      assert.deepEqual(await unheld(), { usage_injection: 0, content_length: 0 }, `${what}: every body so far held whole`);
    }
    // And the last probe: the whole budget at once, on each route.
    assert.match(await send(chat('ok'), body), /^HTTP\/1\.1 200/);
    assert.match(await send(chunkedDelete('ok'), deleteBody), /^HTTP\/1\.1 200/);
    assert.deepEqual(await unheld(), { usage_injection: 0, content_length: 0 }, 'the whole budget was free again');
  });
});
