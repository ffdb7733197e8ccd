// The budget for held bodies is no switch for anyone's token counts (issue 49, finding 4):
// stalled bodies that take all of INFERMETER_MAX_HELD_BODY_BYTES leave every other tenant's
// stream metered with its tokens (a body that finds no room streams through, usage asked for at
// its end once the upstream is known to take the field), and one client address cannot take
// the whole budget (INFERMETER_MAX_HELD_BODY_BYTES_PER_CLIENT), so another's body is still held
// and injected before that is known. Clients come from distinct loopback addresses
// (127.0.0.x): a client's part of the budget is its address's.
import assert from 'node:assert/strict';
import http from 'node:http';
import { connect, type Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import type { Infermeter } from '../../src/app.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { listen } from '../helpers/listen.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';

const MiB = 1024 * 1024;
const token = (t: string) => `data: {"choices":[{"index":0,"delta":{"content":"${t}"}}]}\n\n`;

/** An upstream that answers like a real engine: a stream, with its usage only when asked for it (the last stream_options wins, as in Python). */
async function engineLike(t: TestContext): Promise<{ url: string; bodies: string[] }> {
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = Buffer.concat(parts).toString();
      bodies.push(body);
      const asked = (JSON.parse(body) as { stream_options?: { include_usage?: boolean } }).stream_options?.include_usage === true;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(
        `${token('a')}${token('b')}${token('c')}${asked ? 'data: {"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":3}}\n\n' : ''}data: [DONE]\n\n`,
      );
    });
  });
  const { url } = await listen(t, server);
  return { url, bodies };
}

/** The stalled clients' sockets, destroyed at the test's end before the proxy closes (hooks run in order). */
function stalledSockets(t: TestContext): Socket[] {
  const sockets: Socket[] = [];
  t.after(() => {
    for (const socket of sockets) socket.destroy();
  });
  return sockets;
}

/** A chat body from `address` that sends `sent` bytes of `declared` and stalls. */
function stall(sockets: Socket[], app: Infermeter, address: string, sent: number, declared = 3 * MiB): void {
  const { port } = new URL(app.dataUrl);
  const socket = connect({ port: Number(port), host: '127.0.0.1', localAddress: address });
  socket.on('error', () => undefined);
  sockets.push(socket);
  const head = '{"model":"stall","stream":true,"messages":[{"role":"user","content":"';
  socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n${head}`);
  socket.write(Buffer.alloc(sent - head.length, 'a'));
}

/** A tenant's streamed chat from `address`, with a prompt of `promptBytes`: what it received. */
function chat(app: Infermeter, address: string, tenant: string, promptBytes: number): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${app.dataUrl}/v1/chat/completions`,
      { method: 'POST', agent: false, localAddress: address, headers: { 'content-type': 'application/json', 'x-tenant': tenant } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'p'.repeat(promptBytes) }] }));
  });
}

async function held(app: Infermeter): Promise<number> {
  return (await scrape(app)).value('infermeter_held_body_bytes', { kind: 'request' }) ?? -1;
}

describe('the budget for held bodies', () => {
  it("taken whole by stalled bodies, leaves another tenant's stream metered with its tokens", async (t) => {
    const sockets = stalledSockets(t);
    const upstream = await engineLike(t);
    // Each client's part: a quarter of the budget by default (512 KiB here).
    const app = await startProxy(t, upstream.url, { INFERMETER_MAX_HELD_BODY_BYTES: String(2 * MiB), INFERMETER_TENANT: 'header:x-tenant' });
    // An honest stream first: the upstream is known to take the injected field.
    let finished = nextFinished(app, 1);
    assert.equal((await chat(app, '127.0.0.1', 'warm', 100)).status, 200);
    assert.equal((await finished)[0]!.usageSource, 'upstream');
    // Five clients, each within its part, stall with 450 KB of a body held: the budget is spent.
    for (const address of ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5', '127.0.0.6']) stall(sockets, app, address, 450_000);
    let now = 0;
    for (let i = 0; i < 500 && now < 2 * MiB - 64 * 1024; i++) {
      await new Promise((r) => setTimeout(r, 20));
      now = await held(app);
    }
    assert.ok(now >= 2 * MiB - 64 * 1024 && now <= 2 * MiB, `the budget is spent: ${now} bytes held`);
    // Another tenant's stream (a 200 KB prompt, more than the budget has left) is metered with its tokens.
    finished = nextFinished(app, 1, (s) => s.model === 'm');
    const other = await chat(app, '127.0.0.9', 'other', 200_000);
    const [s] = (await finished) as [RequestSample];
    assert.equal(other.status, 200);
    assert.doesNotMatch(other.text, /"usage"/, 'no usage chunk the client did not ask for');
    assert.deepEqual([s.tenant, s.usageSource, s.promptTokens, s.completionTokens], ['other', 'upstream', 11, 3], 'counted with its tokens');
    const sent = upstream.bodies.at(-1)!;
    assert.ok(sent.trimEnd().endsWith(',"stream_options":{"include_usage":true}}'), 'usage asked for at the end of the object');
    const m = await scrape(app);
    assert.equal(m.value('infermeter_usage_injected_total', { body: 'streamed' }), 1);
    assert.equal(m.value('prompt_tokens_total', { model_name: 'm' }), 22, "both honest streams' tokens");
  });

  it('cannot be taken whole by one client address: another is still held and injected before the upstream is known to take the field', async (t) => {
    const sockets = stalledSockets(t);
    const upstream = await engineLike(t);
    // Its part: a quarter of the budget by default, 512 KiB here.
    const app = await startProxy(t, upstream.url, { INFERMETER_MAX_HELD_BODY_BYTES: String(2 * MiB) });
    // One client, six bodies of 900 KB each, stalled: 5.4 MB, well over the whole budget.
    for (let i = 0; i < 6; i++) stall(sockets, app, '127.0.0.2', 900_000);
    // Its bodies reached infermeter: its part is full (the rest wait, or stream through).
    let now = 0;
    for (let i = 0; i < 500 && now < 512 * 1024 - 64 * 1024; i++) {
      await new Promise((r) => setTimeout(r, 20));
      now = await held(app);
    }
    await new Promise((r) => setTimeout(r, 200));
    now = await held(app);
    assert.ok(now > 0 && now <= 512 * 1024, `one client holds at most its part: ${now} bytes held`);
    // Another client's stream, the first of this process: held, injected, counted with its tokens.
    const finished = nextFinished(app, 1, (s) => s.model === 'm');
    const other = await chat(app, '127.0.0.3', 'other', 200_000);
    const [s] = (await finished) as [RequestSample];
    assert.equal(other.status, 200);
    assert.doesNotMatch(other.text, /"usage"/);
    assert.deepEqual([s.usageSource, s.promptTokens, s.completionTokens], ['upstream', 11, 3], 'counted with its tokens');
    assert.ok(upstream.bodies.at(-1)!.startsWith('{"stream_options":{"include_usage":true},'), 'held whole: the field inserted first');
    assert.equal((await scrape(app)).value('infermeter_usage_injected_total', { body: 'held' }), 1);
  });
});
