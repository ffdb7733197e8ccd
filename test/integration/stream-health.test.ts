// Stream health over sockets: a stream held silent in the middle shows in the longest-gap
// histogram and the stall counter; a client that stops reading shows its back-pressure, which
// neither TTFT nor the longest gap counts. The silences are begun by events (the client got the
// token before; the proxy's socket refused a write), then held at least their length.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { startHeldUpstream } from '../helpers/held-upstream.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';

const token = (t: string) => `data: {"choices":[{"index":0,"delta":{"content":"${t}"}}]}\n\n`;
const END = 'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}\n\ndata: [DONE]\n\n';
const BODY = '{"model":"m","stream":true,"stream_options":{"include_usage":true}}';

/** Resolves once at least `ms` have passed on the monotonic clock (a timer may fire a little early). */
async function atLeast(ms: number): Promise<void> {
  const start = performance.now();
  for (let i = 0; i < 1000 && performance.now() - start < ms; i++) await new Promise((r) => setTimeout(r, Math.max(1, ms - (performance.now() - start))));
}

// Each test has its own infermeter and upstream, and holds a silence of 2 s: side by side.
describe('stream health', { concurrency: true }, () => {
  it('a silence of 2 s in the middle of a stream is its longest gap and a stall (INFERMETER_STALL_SECONDS=1)', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startProxy(t, upstream.url, { INFERMETER_STALL_SECONDS: '1' });
    const finished = nextFinished(app, 2);
    const silent = fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: BODY });
    const res = await upstream.next();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(token('a'));
    const reply = await silent;
    const reader = reply.body!.getReader();
    const first = await reader.read();
    assert.match(Buffer.from(first.value!).toString(), /"a"/);
    // The client has the first token: the proxy relayed it before the silence begins.
    await atLeast(2000);
    res.end(token('b') + END);
    while (!(await reader.read()).done);
    // A stream without a silence beside it: no stall.
    const quick = fetch(`${app.dataUrl}/v1/chat/completions`, { method: 'POST', body: BODY });
    const res2 = await upstream.next();
    res2.writeHead(200, { 'content-type': 'text/event-stream' });
    res2.write(token('a'));
    res2.end(token('b') + END);
    await (await quick).arrayBuffer();
    const [slow, fast] = await finished;
    t.diagnostic(`longest gap ${slow!.longestGap} s (a 2 s silence), ${fast!.longestGap} s beside it`);
    assert.ok(slow!.longestGap! >= 2, `longest gap ${slow!.longestGap} s >= the 2 s silence`);
    assert.equal(slow!.outcome, 'success');
    const m = await scrape(app);
    const bucket = (le: string) => m.value('infermeter_stream_longest_gap_seconds_bucket', { model_name: 'm', le }) ?? Number.NaN;
    assert.equal(m.value('infermeter_stream_longest_gap_seconds_count', { model_name: 'm' }), 2);
    assert.equal(bucket('+Inf') - bucket('1'), 1, 'the silent stream above 1 s');
    assert.equal(bucket('+Inf'), 2);
    // Each bucket counts the measured gaps at or under it (a busy machine may stretch the silence
    // past 2.5 s: the bucket follows the measure, not the script).
    // The boundaries docs/metrics.md gives the family.
    for (const le of ['0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '10', '30', '60', '120', '300', '+Inf']) {
      const under = [slow!, fast!].filter((s) => s.longestGap! <= (le === '+Inf' ? Infinity : Number(le))).length;
      assert.equal(bucket(le), under, `le ${le}: longest gaps ${slow!.longestGap} and ${fast!.longestGap} s`);
    }
    assert.ok(fast!.longestGap! < slow!.longestGap!);
    assert.equal(m.value('infermeter_stream_stalls_total', { model_name: 'm' }), fast!.longestGap! >= 1 ? 2 : 1);
  });

  it('a client that stops reading for 2 s shows >= 2 s of back-pressure, which neither its TTFT nor its longest gap counts', async (t) => {
    const upstream = await startHeldUpstream(t);
    const app = await startProxy(t, upstream.url, { INFERMETER_STALL_SECONDS: '2' });
    const finished = nextFinished(app, 1);
    // The proxy's side of the client's response: the test sees when its socket refuses writes.
    const proxied: ServerResponse[] = [];
    app.dataServer!.on('request', (_req, r) => proxied.push(r));
    const { port } = new URL(app.dataUrl);
    const sentAt = performance.now();
    const client = net.connect(Number(port), '127.0.0.1');
    client.pause();
    client.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${BODY.length}\r\nConnection: close\r\n\r\n${BODY}`,
    );
    const res = await upstream.next();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    // 24 MB of 4 KiB token events, more than the socket buffers between proxy and client hold.
    const piece = token('x'.repeat(4096));
    let events = 0;
    void (async () => {
      for (; events < 6000 && !res.destroyed; events++) if (!res.write(piece)) await once(res, 'drain');
      res.end(END);
    })();
    // Until the proxy's write to the client is refused (bounded: 60000 turns of 1 ms).
    for (let i = 0; i < 60_000 && !(proxied[0]?.socket?.writableNeedDrain === true || proxied[0]?.writableNeedDrain === true); i++)
      await new Promise((r) => setTimeout(r, 1));
    const refusedAt = performance.now();
    assert.ok(proxied[0]?.socket?.writableNeedDrain === true || proxied[0]?.writableNeedDrain === true, 'the client socket refused a write');
    await atLeast(2000);
    client.resume();
    let bytes = 0;
    client.on('data', (c: Buffer) => (bytes += c.length));
    await once(client, 'end');
    const [s] = await finished;
    t.diagnostic(`back-pressure ${s!.backpressure} s, TTFT ${s!.ttft} s, longest gap ${s!.longestGap} s, ${bytes} bytes`);
    assert.equal(s!.outcome, 'success');
    assert.ok(bytes > 6000 * piece.length, `the client got it all (${bytes} bytes)`);
    assert.ok(s!.backpressure! >= 2, `back-pressure ${s!.backpressure} s >= the 2 s the client did not read`);
    // TTFT ends at the first token's arrival from the upstream, before any write was refused.
    assert.ok(s!.ttft! * 1000 <= refusedAt - sentAt, `TTFT ${s!.ttft} s not moved by it`);
    assert.ok(s!.longestGap! < s!.backpressure!, `longest gap ${s!.longestGap} s: the refused time is not the stream's silence`);
    const m = await scrape(app);
    assert.equal(m.value('infermeter_client_backpressure_seconds_count', { model_name: 'm' }), 1);
    assert.equal(m.value('infermeter_client_backpressure_seconds_sum', { model_name: 'm' }), s!.backpressure);
    assert.equal(m.value('infermeter_client_backpressure_seconds_bucket', { model_name: 'm', le: '1' }), 0);
    // A slow reader is no stalled engine: not a stall at 2 s, though it did not read for 2 s.
    assert.equal(m.value('infermeter_stream_stalls_total', { model_name: 'm' }), 0);
    client.destroy();
  });
});
