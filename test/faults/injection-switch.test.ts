// No client can switch usage injection off for everyone (issue 18): an engine's error that only
// echoes what the client sent (vLLM's 404 naming the model, pydantic's 400 echoing a field's
// value) reaches that client as it is, is sent upstream once, and leaves injection on for the
// next request; a stream with an event over INFERMETER_MAX_EVENT_BYTES still loses the usage chunk
// infermeter asked for, and only that.
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import zlib from 'node:zlib';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { listen } from '../helpers/listen.ts';
import { post } from '../helpers/post.ts';

const BIG = `data: {"choices":[{"index":0,"delta":{"content":"${'y'.repeat(4000)}"}}]}\n\n`;
const SMALL = 'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n';
const USAGE = 'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n';

/** A vLLM-like upstream: echoes the model in its 404, pydantic's input in its 400, else streams. */
async function startUpstream(t: TestContext): Promise<{ url: string; bodies: string[] }> {
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      bodies.push(body);
      const parsed = JSON.parse(body) as { model: string; foo?: string; stream_options?: { include_usage?: boolean } };
      if (parsed.model !== 'm') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'error', message: `The model \`${parsed.model}\` does not exist.`, type: 'NotFoundError', param: null, code: 404 }));
        return;
      }
      if (parsed.foo !== undefined) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            object: 'error',
            message: `[{'type': 'extra_forbidden', 'loc': ('body', 'foo'), 'msg': 'Extra inputs are not permitted', 'input': '${parsed.foo}'}]`,
            type: 'BadRequestError',
            param: null,
            code: 400,
          }),
        );
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`${SMALL}${BIG}${SMALL}${parsed.stream_options?.include_usage === true ? USAGE : ''}data: [DONE]\n\n`);
    });
  });
  return { url: (await listen(t, server)).url, bodies };
}

describe('the usage injection switch', () => {
  it('stays on whatever errors a client provokes, and strips the usage chunk after an oversized event', async (t) => {
    const upstream = await startUpstream(t);
    const app = await startProxy(t, upstream.url, { INFERMETER_MAX_EVENT_BYTES: '1024' });

    const echoedModel = await post(`${app.dataUrl}/v1/chat/completions`, { model: 'stream_options', stream: true, messages: [] });
    assert.equal(echoedModel.status, 404);
    assert.match(echoedModel.text, /The model `stream_options` does not exist/, 'the client gets its own answer');
    const echoedField = await post(`${app.dataUrl}/v1/chat/completions`, {
      model: 'm',
      stream: true,
      foo: 'stream_options: unrecognized, extra inputs are not permitted',
      messages: [],
    });
    assert.equal(echoedField.status, 400);
    assert.equal(upstream.bodies.length, 2, 'each sent upstream once');

    const normal = await post(`${app.dataUrl}/v1/chat/completions`, { model: 'm', stream: true, messages: [] });
    assert.equal(normal.status, 200);
    assert.ok(upstream.bodies[2]!.includes('"stream_options":{"include_usage":true}'), 'still injected');
    assert.equal(normal.text, `${SMALL}${BIG}${SMALL}data: [DONE]\n\n`, 'the usage chunk infermeter asked for is removed, after an event over the cap too');

    const m = await scrape(app);
    assert.equal(m.value('infermeter_usage_injection_active'), 1);
    assert.equal(m.value('infermeter_upstream_retries_total', { reason: 'refused_injection' }), 0);
    assert.equal(m.value('infermeter_usage_chunks_stripped_total'), 1);
  });

  it('the echo attack: a 400 echoing the client\'s "not supported" beside the injected field, then a re-send that succeeds, leaves injection on', async (t) => {
    // An engine that refuses any body with stream_options, echoing the whole body (as pydantic's
    // errors echo `input`), and serves the same body without it: to the raw reading, the
    // injected field refused; but the words of refusal are the client's own.
    const bodies: string[] = [];
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        bodies.push(body);
        const parsed = JSON.parse(body) as { stream_options?: unknown; echo?: boolean };
        if (parsed.stream_options !== undefined && parsed.echo === true) {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              object: 'error',
              message: `Value error, bad request: ${JSON.stringify(parsed)}`,
              type: 'BadRequestError',
              param: null,
              code: 400,
            }),
          );
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(`${SMALL}${parsed.stream_options === undefined ? '' : USAGE}data: [DONE]\n\n`);
      });
    });
    const app = await startProxy(t, (await listen(t, server)).url);

    const attack = await post(`${app.dataUrl}/v1/chat/completions`, {
      model: 'm',
      stream: true,
      echo: true,
      messages: [{ role: 'user', content: 'this is not supported' }],
    });
    assert.equal(attack.status, 200, 'the client gets the answer to its own body');
    assert.equal(bodies.length, 2, 'sent again without the field, once');
    assert.equal(bodies[1], JSON.stringify({ model: 'm', stream: true, echo: true, messages: [{ role: 'user', content: 'this is not supported' }] }));

    const honest = await post(`${app.dataUrl}/v1/chat/completions`, { model: 'm', stream: true, messages: [] });
    assert.equal(honest.status, 200);
    assert.ok(bodies[2]!.includes('"stream_options":{"include_usage":true}'), 'the next stream is injected still');
    assert.equal(honest.text, `${SMALL}data: [DONE]\n\n`);
    const m = await scrape(app);
    assert.equal(m.value('infermeter_usage_injection_active'), 1);
    assert.equal(m.value('infermeter_upstream_retries_total', { reason: 'refused_injection' }), 1);
  });

  it('never delivers the injected usage in a compressed answer: the injected request asks for identity', async (t) => {
    // An upstream that compresses its event stream in the first coding the request accepts.
    const encoders: Record<string, () => NodeJS.ReadWriteStream> = {
      gzip: zlib.createGzip,
      deflate: zlib.createDeflate,
      br: zlib.createBrotliCompress,
      zstd: zlib.createZstdCompress,
    };
    const asked: string[] = [];
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const parsed = JSON.parse(Buffer.concat(chunks).toString()) as { stream_options?: { include_usage?: boolean } };
        asked.push(req.headers['accept-encoding'] ?? '');
        const coding = (req.headers['accept-encoding'] ?? '')
          .split(',')
          .map((c) => c.trim())
          .find((c) => c in encoders);
        const body = `${SMALL}${SMALL}${parsed.stream_options?.include_usage === true ? USAGE : ''}data: [DONE]\n\n`;
        if (coding === undefined) {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.end(body);
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': coding });
        const encoder = encoders[coding]!();
        encoder.pipe(res);
        encoder.end(body);
      });
    });
    const app = await startProxy(t, (await listen(t, server)).url);
    const decoders: Record<string, (b: Buffer) => Buffer> = {
      gzip: zlib.gunzipSync,
      deflate: zlib.inflateSync,
      br: zlib.brotliDecompressSync,
      zstd: zlib.zstdDecompressSync,
    };
    for (const coding of ['gzip', 'deflate', 'br', 'zstd', 'gzip, deflate, br, zstd']) {
      const finished = nextFinished(app, 1);
      const { headers, body } = await new Promise<{ headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
        const req = http.request(
          `${app.dataUrl}/v1/chat/completions`,
          { method: 'POST', headers: { 'content-type': 'application/json', 'accept-encoding': coding } },
          (res) => {
            const got: Buffer[] = [];
            res.on('data', (c: Buffer) => got.push(c));
            res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(got) }));
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify({ model: 'm', stream: true, messages: [] }));
      });
      const encoding = headers['content-encoding'];
      const text = (encoding === undefined ? body : decoders[encoding]!(body)).toString();
      assert.equal(text, `${SMALL}${SMALL}data: [DONE]\n\n`, `${coding}: the content the client would get without infermeter, no usage chunk`);
      const [s] = await finished;
      assert.equal(s!.completionTokens, 2, `${coding}: the injected usage is read`);
      assert.equal(asked.at(-1), 'identity', `${coding}: the upstream was asked for identity`);
    }
    // A client that refuses identity is not injected: its answer stays as the upstream makes it.
    const finished = nextFinished(app, 1);
    await new Promise<void>((resolve, reject) => {
      const req = http.request(
        `${app.dataUrl}/v1/chat/completions`,
        { method: 'POST', headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip, identity;q=0' } },
        (res) => {
          res.resume();
          res.on('end', resolve);
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ model: 'm', stream: true, messages: [] }));
    });
    await finished;
    assert.equal(asked.at(-1), 'gzip, identity;q=0');
  });
  it('answers a held 4xx the upstream cut before its end with its own 502, never sends the request again, and counts the reset', async (t) => {
    // The 4xx to an injected request is held to read whether it is a refusal: none of it has
    // reached the client when the upstream cuts it, so the client gets infermeter's own error.
    let asked = 0;
    const server = http.createServer((req, res) => {
      asked++;
      req.resume();
      req.on('end', () => {
        res.writeHead(400, { 'content-type': 'application/json', 'content-length': '200' });
        res.write('{"object":"error","message":"stream_options');
        setImmediate(() => res.socket?.destroy());
      });
    });
    const { url } = await listen(t, server);
    const app = await startProxy(t, url);
    const finished = nextFinished(app, 1);
    const answer = await post(`${app.dataUrl}/v1/chat/completions`, { model: 'm', stream: true, messages: [] });
    assert.equal(answer.status, 502);
    assert.equal((JSON.parse(answer.text) as { error: { code: string } }).error.code, 'upstream_reset');
    const [sample] = await finished;
    assert.deepEqual([sample!.outcome, sample!.failure, sample!.status], ['failed', 'upstream_reset', 502]);
    assert.equal(asked, 1, 'sent upstream once');
    const m = await scrape(app);
    assert.equal(m.value('infermeter_upstream_errors_total', { kind: 'upstream_reset' }), 1);
    assert.equal(m.value('infermeter_usage_injection_active'), 1, 'injection stays on');
  });
});
