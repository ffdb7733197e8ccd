// Upstreams that break the rules, written byte for byte on a raw socket: malformed SSE, invalid
// UTF-8, a Content-Length that lies either way, a stream that ends without [DONE]. The client
// gets exactly what HTTP framing lets through, the measurement degrades or marks the request
// failed, and the proxy keeps serving.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { readToEnd } from '../helpers/held-upstream.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { listen } from '../helpers/listen.ts';
import { postResponse } from '../helpers/post.ts';

const event = (content: string) => `data: {"choices":[{"index":0,"delta":{"content":"${content}"}}]}\n\n`;

/** An upstream that answers each request with the raw bytes the test gives, then ends or closes. */
async function startRawUpstream(t: TestContext, answer: () => { bytes: Buffer; then: 'close' | 'keep' }): Promise<string> {
  const server = createServer((socket) => {
    let head = '';
    socket.on('data', (c: Buffer) => {
      head += c.toString('latin1');
      // Requests here are small: the whole request has arrived once its body has.
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (head.length < end + 4 + length) return;
      head = '';
      const { bytes, then } = answer();
      if (then === 'close') socket.end(bytes);
      else socket.write(bytes);
    });
  });
  return (await listen(t, server)).url;
}

const chunked = (body: Buffer) => Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]);
const head = (headers: string) => Buffer.from(`HTTP/1.1 200 OK\r\n${headers}\r\n`);

const STREAM = '{"model":"m","stream":true}';

describe('upstreams that break the rules', () => {
  it('malformed SSE (no data prefix, bad JSON, stray fields, CR line ends) is forwarded byte for byte and counted', async (t) => {
    const body = Buffer.from(
      [
        event('a'),
        'this line is not SSE at all\n\n',
        'data: {"choices":[{"delta":{"content":\n\n',
        ': a comment\nevent: weird\nid: 7\nretry: x\n\n',
        'data: {"choices":[{"index":0,"delta":{"content":"b"}}]}\r\r',
        'data: [DONE]\n\n',
      ].join(''),
    );
    const url = await startRawUpstream(t, () => ({
      bytes: Buffer.concat([head('content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n'), chunked(body)]),
      then: 'keep',
    }));
    const app = await startProxy(t, url);
    const finished = nextFinished(app, 1);
    const got = await readToEnd(await postResponse(`${app.dataUrl}/v1/chat/completions`, STREAM));
    assert.ok(got.clean);
    assert.ok(got.bytes.equals(body), 'byte for byte');
    const [sample] = await finished;
    assert.equal(sample!.outcome, 'success');
    assert.equal(sample!.tokenEvents, 2, 'the two well-formed token events are still measured');
    const m = await scrape(app);
    assert.equal(m.value('infermeter_stream_tap_problems_total', { kind: 'malformed_event' }), 1);
  });

  it('invalid UTF-8 inside events is forwarded byte for byte', async (t) => {
    const bad = Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xe2, 0x82]);
    const body = Buffer.concat([
      Buffer.from(event('a')),
      Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"'),
      bad,
      Buffer.from('"}}]}\n\n'),
      Buffer.from('data: [DONE]\n\n'),
    ]);
    const url = await startRawUpstream(t, () => ({
      bytes: Buffer.concat([head('content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n'), chunked(body)]),
      then: 'keep',
    }));
    const app = await startProxy(t, url);
    const finished = nextFinished(app, 1);
    const got = await readToEnd(await postResponse(`${app.dataUrl}/v1/chat/completions`, STREAM));
    assert.ok(got.bytes.equals(body), 'byte for byte');
    const [sample] = await finished;
    assert.equal(sample!.outcome, 'success');
    assert.equal(sample!.tokenEvents, 2);
  });

  it('a Content-Length longer than the body: the client gets what came, a cut response, counted as failed', async (t) => {
    const body = Buffer.from('{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"complet');
    const url = await startRawUpstream(t, () => ({
      bytes: Buffer.concat([head(`content-type: application/json\r\ncontent-length: ${body.length + 500}\r\n`), body]),
      then: 'close',
    }));
    const app = await startProxy(t, url);
    const finished = nextFinished(app, 1);
    const got = await readToEnd(await postResponse(`${app.dataUrl}/v1/chat/completions`, '{"model":"m"}'));
    assert.equal(got.clean, false, 'not passed off as complete');
    assert.ok(got.bytes.equals(body));
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.failure], ['failed', 'upstream_reset']);
  });

  it('a Content-Length shorter than the body: the client gets the declared bytes, the rest is dropped, the proxy keeps serving', async (t) => {
    const declared = Buffer.from('{"usage":{"prompt_tokens":3,"completion_tokens":2}}');
    let calls = 0;
    const url = await startRawUpstream(t, () => {
      calls++;
      const extra = calls === 1 ? 'GARBAGE AFTER THE DECLARED BODY' : '';
      return {
        bytes: Buffer.concat([head(`content-type: application/json\r\ncontent-length: ${declared.length}\r\n`), declared, Buffer.from(extra)]),
        then: 'keep',
      };
    });
    const app = await startProxy(t, url);
    const finished = nextFinished(app, 2);
    const first = await readToEnd(await postResponse(`${app.dataUrl}/v1/chat/completions`, '{"model":"m"}'));
    assert.ok(first.clean);
    assert.ok(first.bytes.equals(declared));
    const second = await readToEnd(await postResponse(`${app.dataUrl}/v1/chat/completions`, '{"model":"m"}'));
    assert.ok(second.bytes.equals(declared), 'the next request is answered right (not from the garbage)');
    const samples = await finished;
    assert.deepEqual(
      samples.map((s) => [s.outcome, s.promptTokens, s.completionTokens]),
      [
        ['success', 3, 2],
        ['success', 3, 2],
      ],
    );
    assert.equal((await scrape(app)).value('infermeter_upstream_errors_total', { kind: 'upstream_protocol' }), 1, 'the garbage is counted');
  });

  it('an upstream that does not speak HTTP: 502 upstream_protocol, counted as failed', async (t) => {
    const url = await startRawUpstream(t, () => ({ bytes: Buffer.from('SSH-2.0-OpenSSH_9.2\r\n'), then: 'close' }));
    const app = await startProxy(t, url);
    const finished = nextFinished(app, 1);
    const res = await postResponse(`${app.dataUrl}/v1/chat/completions`, STREAM);
    assert.equal(res.status, 502);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'upstream_protocol');
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.failure], ['failed', 'upstream_protocol']);
  });

  for (const stream of [false, true])
    it(`a status line Node cannot send on (099): 502 upstream_protocol, counted, and the proxy keeps serving (stream: ${stream})`, async (t) => {
      let calls = 0;
      const url = await startRawUpstream(t, () => {
        calls++;
        const status = calls === 1 ? '099 Odd' : '200 OK';
        return {
          bytes: Buffer.from(`HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}`),
          then: calls === 1 ? 'close' : 'keep',
        };
      });
      const app = await startProxy(t, url);
      const finished = nextFinished(app, 2);
      const body = JSON.stringify({ model: 'm', stream }); // a stream gets usage injected: the other path
      const res = await postResponse(`${app.dataUrl}/v1/chat/completions`, body);
      assert.equal(res.status, 502);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'upstream_protocol');
      const next = await postResponse(`${app.dataUrl}/v1/chat/completions`, body);
      assert.equal(next.status, 200);
      assert.equal(await next.text(), '{}');
      const samples = await finished;
      assert.deepEqual(
        samples.map((s) => [s.outcome, s.failure]),
        [
          ['failed', 'upstream_protocol'],
          ['success', undefined],
        ],
      );
      assert.equal((await scrape(app)).value('infermeter_upstream_errors_total', { kind: 'upstream_protocol' }), 1);
    });

  it('a stream that ends cleanly without [DONE] is forwarded whole and measured from its events', async (t) => {
    const body = Buffer.from(event('a') + event('b') + 'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}\n\n');
    const url = await startRawUpstream(t, () => ({
      bytes: Buffer.concat([head('content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n'), chunked(body)]),
      then: 'keep',
    }));
    const app = await startProxy(t, url);
    const finished = nextFinished(app, 1);
    // Asking for usage itself, so that infermeter neither injects nor strips it.
    const got = await readToEnd(
      await postResponse(`${app.dataUrl}/v1/chat/completions`, '{"model":"m","stream":true,"stream_options":{"include_usage":true}}'),
    );
    assert.ok(got.clean);
    assert.ok(got.bytes.equals(body));
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.usageSource, sample!.completionTokens], ['success', 'upstream', 2]);
  });

  it('chunk sizes with 14, 20 and 40 digits (leading zeros) are read as Node reads them: every event relayed, usage counted', async (t) => {
    const events = Array.from({ length: 29 }, (_, i) => event(`t${i}`));
    events.push('data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":29}}\n\n');
    const widths = [14, 20, 40];
    const padded = events.map(
      (e, i) =>
        `${Buffer.byteLength(e)
          .toString(16)
          .padStart(widths[i % 3]!, '0')}\r\n${e}\r\n`,
    );
    const reply = Buffer.from(
      `${head('content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n').toString('latin1')}${padded.join('')}${'0'.repeat(20)}\r\n\r\n`,
      'latin1',
    );
    const url = await startRawUpstream(t, () => ({ bytes: reply, then: 'keep' }));
    const body = '{"model":"m","stream":true,"stream_options":{"include_usage":true}}';
    const direct = await readToEnd(await fetch(`${url}/v1/chat/completions`, { method: 'POST', body }));
    assert.ok(direct.clean && direct.text === events.join(''), "Node's own client reads every chunk");
    const app = await startProxy(t, url);
    const finished = nextFinished(app, 1);
    const got = await readToEnd(await postResponse(`${app.dataUrl}/v1/chat/completions`, body));
    assert.ok(got.clean);
    assert.ok(got.bytes.equals(direct.bytes), `byte-identical to direct: ${got.text.split('\n\n').length - 1} of 30 events`);
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.usageSource, sample!.completionTokens], ['success', 'upstream', 29]);
  });

  it('a stream whose connection closes without [DONE] or the final chunk is counted as failed, bytes kept', async (t) => {
    const body = Buffer.from(event('a') + event('b'));
    // Chunked framing started but never finished: the connection just closes.
    const url = await startRawUpstream(t, () => ({
      bytes: Buffer.concat([
        head('content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n'),
        Buffer.from(`${body.length.toString(16)}\r\n`),
        body,
        Buffer.from('\r\n'),
      ]),
      then: 'close',
    }));
    const app = await startProxy(t, url);
    const finished = nextFinished(app, 1);
    const got = await readToEnd(await postResponse(`${app.dataUrl}/v1/chat/completions`, STREAM));
    assert.equal(got.clean, false);
    assert.ok(got.bytes.equals(body));
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.failure, sample!.tokenEvents], ['failed', 'upstream_reset', 2]);
    assert.equal((await scrape(app)).value('request_failed_total', { model_name: 'm' }), 1);
  });
});
