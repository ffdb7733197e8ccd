// A client that leaves in the middle of a large chat or completions body (issue 49, finding 1):
// a body past the inspection cap (4 MiB), or one that found the budget for held bodies spent, is
// forwarded through a stream the data plane builds over the client's request. The client
// leaving (a reset, or a FIN mid-body) must end that request alone: the upstream request is
// aborted, the request's share of the budget given back, and the process (or, with workers, the
// worker) goes on serving every other client's stream. A route infermeter does not measure is
// swept the same way. infermeter runs in a child process here,
// so that a crash is seen as one, not as this test's own.
import assert from 'node:assert/strict';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { parseExposition } from '../helpers/exposition.ts';
import { listen } from '../helpers/listen.ts';
import { startMemoryChild, until, type MemoryChild } from '../helpers/memory-child.ts';

const MiB = 1024 * 1024;
/** The body the client says it sends: 4.5 MB, over the inspection cap. */
const DECLARED = 4_500_000;
/** What it sends of it before it leaves. */
const SENT = 4_300_000;

interface UpstreamCase {
  bytes: number;
  /** Its request closed before the body's end: infermeter gave it up. */
  aborted: boolean;
}

/** An upstream that reads every body; a request with `x-case` is tracked, the bystander's stream is held open until `finish`. */
async function trackingUpstream(t: TestContext) {
  const cases = new Map<string, UpstreamCase>();
  let bystander: ServerResponse | undefined;
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const id = req.headers['x-case'];
    if (typeof id === 'string') {
      const c: UpstreamCase = { bytes: 0, aborted: false };
      cases.set(id, c);
      req.on('data', (chunk: Buffer) => (c.bytes += chunk.length));
      req.on('close', () => (c.aborted = !req.complete));
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
      return;
    }
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (req.headers['x-bystander'] !== undefined) {
        bystander = res;
        res.write('data: {"choices":[{"index":0,"delta":{"content":"first"}}]}\n\n');
        return;
      }
      res.end(
        'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1}}\n\ndata: [DONE]\n\n',
      );
    });
  });
  const { url } = await listen(t, server);
  return {
    url,
    cases,
    /** The bystander's stream: a second token, its usage, its end. */
    finish() {
      bystander?.end(
        'data: {"choices":[{"index":0,"delta":{"content":"second"}}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":2}}\n\ndata: [DONE]\n\n',
      );
    },
    bystanderArrived: () => bystander !== undefined,
  };
}

/** A streamed chat whose answer stays open: what the client got, once it ended (and whether whole). */
function bystanderStream(dataUrl: string): Promise<{ text: string; complete: boolean }> {
  return new Promise((resolve) => {
    const req = http.request(
      `${dataUrl}/v1/chat/completions`,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'x-bystander': '1' } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('close', () => resolve({ text, complete: res.complete }));
      },
    );
    req.on('error', () => resolve({ text: '', complete: false }));
    req.end('{"model":"bystander","stream":true,"messages":[{"role":"user","content":"hi"}]}');
  });
}

/** Sends SENT bytes of a DECLARED-byte body on a socket of its own, then leaves by `how` once the upstream has all it sent. */
async function abandon(child: MemoryChild, upstream: Awaited<ReturnType<typeof trackingUpstream>>, id: string, path: string, how: 'reset' | 'fin') {
  const { port } = new URL(child.dataUrl);
  const socket = connect(Number(port), '127.0.0.1');
  socket.on('error', () => undefined);
  // Closed before the client left: the process (or worker) that had it is gone.
  let cut = false;
  socket.on('close', () => (cut = true));
  const prefix = path.endsWith('chat/completions')
    ? '{"model":"leaver","stream":true,"messages":[{"role":"user","content":"'
    : '{"model":"leaver","stream":true,"prompt":"';
  socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nx-case: ${id}\r\nContent-Length: ${DECLARED}\r\n\r\n${prefix}`);
  socket.write(Buffer.alloc(SENT - prefix.length, 'a'));
  // Everything the client sent went upstream: the rest of the body is awaited from the client.
  await until(
    () => (upstream.cases.get(id)?.bytes ?? 0) >= SENT || cut || child.exited() !== undefined,
    () => `${id}: ${upstream.cases.get(id)?.bytes ?? 0} bytes upstream`,
    20,
    30_000,
  );
  assert.equal(cut, false, `${id}: the connection was cut before the client left (infermeter ${child.exited() === undefined ? 'or a worker ' : ''}died)`);
  if (how === 'reset') socket.resetAndDestroy();
  else socket.end();
  await until(
    () => upstream.cases.get(id)?.aborted === true || child.exited() !== undefined,
    () => `${id}: the upstream request was not aborted`,
    20,
    30_000,
  );
}

async function scrape(child: MemoryChild) {
  return parseExposition(await (await fetch(child.metricsUrl)).text());
}

// Each case has its own child and upstream, and waits on sockets more than it computes: side by side.
describe('a client that leaves mid-body', { concurrency: true }, () => {
  for (const workers of [1, 2]) {
    for (const budget of ['default', 'spent'] as const) {
      const over = budget === 'default' ? 'over the inspection cap' : 'over a spent budget for held bodies';
      it(`ends its own request only: a 4.5 MB body ${over}, reset or FIN, chat and completions (and a pass-through route), ${workers === 1 ? 'one process' : 'INFERMETER_WORKERS=2'}`, async (t) => {
        const upstream = await trackingUpstream(t);
        const child = await startMemoryChild(t, {
          INFERMETER_UPSTREAM: upstream.url,
          INFERMETER_LOG_LEVEL: 'info',
          INFERMETER_WORKERS: String(workers),
          // A budget smaller than the body: the body finds it spent after 1 MiB.
          ...(budget === 'spent' ? { INFERMETER_MAX_HELD_BODY_BYTES: String(MiB) } : {}),
        });
        // Another client's stream, in flight throughout (with workers, in one of the two).
        const bystander = bystanderStream(child.dataUrl);
        await until(upstream.bystanderArrived, () => 'the bystander stream did not reach the upstream');
        let n = 0;
        // And a route infermeter does not measure (http-proxy-3 streams its body): the same sweep.
        for (const path of ['/v1/chat/completions', '/v1/completions', '/v1/files']) {
          for (const how of ['reset', 'fin'] as const) {
            const id = `${how}-${path}-${n++}`;
            await abandon(child, upstream, id, path, how);
            assert.equal(child.exited(), undefined, `${id}: infermeter is still running`);
            assert.equal(upstream.cases.get(id)?.aborted, true, `${id}: the upstream request was aborted`);
          }
        }
        if (workers > 1) assert.equal((await scrape(child)).value('infermeter_worker_restarts_total'), 0, 'no worker died');
        // The bystander's stream went on, whole, and new requests are served.
        upstream.finish();
        const seen = await bystander;
        assert.ok(seen.complete && seen.text.includes('second') && seen.text.includes('[DONE]'), `the bystander's stream: ${JSON.stringify(seen)}`);
        // Every abandoned request gave its share of the budget back (with workers, each worker's):
        // with no request in flight, nothing is held.
        // (The bystander's own end reaches infermeter's side a moment after its client's.)
        let held: number | undefined;
        for (let i = 0; i < 50 && held !== 0; i++) {
          if (i > 0) await new Promise((r) => setTimeout(r, 20));
          held = (await scrape(child)).value('infermeter_held_body_bytes', { kind: 'request' });
        }
        assert.equal(held, 0, 'no body bytes held once the clients left');
        const res = await fetch(`${child.dataUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"model":"after","stream":true,"messages":[]}',
        });
        assert.equal(res.status, 200);
        await res.text();
        assert.equal(child.exited(), undefined, `infermeter is still running: ${child.exited()?.stderr ?? ''}`);
        const after = await scrape(child);
        assert.equal(after.value('request_success_total', { model_name: 'bystander' }), 1, "the bystander's stream is counted a success");
        assert.equal(after.value('generation_tokens_total', { model_name: 'bystander' }), 2, 'with its tokens');
      });
    }
  }
});
