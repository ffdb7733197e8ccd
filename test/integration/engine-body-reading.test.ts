// The request body as the engine reads it (issue 30): against a real uvicorn + FastAPI engine
// reading bodies with Python's json, as vLLM does (strict mode: unknown fields refused, the
// refusal echoing the client's input), a body spelt to mean one thing to a raw-byte reader and
// another to the engine is metered as the engine served it, and the echo attack (a 400 that
// echoes the client's own "not supported") leaves usage injection on for everyone. A body the
// engine reads whatever its Content-Encoding says, or one padded past the hold cap (issue 49,
// finding 3), is metered with its tokens: read whole, usage asked for at its end.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import type { RequestSample } from '../../src/measure/sample.ts';
import { nextFinished, scrape, startProxy } from '../helpers/proxy-harness.ts';
import { startSharedUvicornEngine, uvicornSkip, uvicornVersion } from '../helpers/uvicorn-engine.ts';
import { post } from '../helpers/post.ts';

/** One honest stream, so that the upstream is known to take the injected field (bodies that stream through are injected from then on). */
async function warmUp(app: Awaited<ReturnType<typeof startProxy>>): Promise<void> {
  const finished = nextFinished(app, 1);
  assert.equal((await post(`${app.dataUrl}/v1/chat/completions`, HONEST)).status, 200);
  assert.equal((await finished)[0]!.usageSource, 'upstream');
}

const HONEST = JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });

describe(`request bodies as uvicorn + Python's json read them (${uvicornVersion ?? 'uvicorn missing'})`, { skip: uvicornSkip }, () => {
  // One engine for the file: it keeps nothing from one request to the next; each test has its own infermeter.
  let engine = '';
  let stopEngine = async (): Promise<void> => {};
  before(async () => {
    const started = await startSharedUvicornEngine('strict');
    engine = started.url;
    stopEngine = started.stop;
  });
  after(() => stopEngine());

  it('the echo attack: an escaped duplicate "stream" and a 400 echoing "not supported" leave injection on', async (t) => {
    const app = await startProxy(t, engine);
    const attack = '{"model":"m","stream":true,"str\\u0065am":false,"messages":[{"role":"user","content":"not supported"}]}';
    const direct = await post(`${engine}/v1/chat/completions`, attack);
    let finished = nextFinished(app, 1);
    const proxied = await post(`${app.dataUrl}/v1/chat/completions`, attack);
    const [attackSample] = (await finished) as [RequestSample];
    assert.equal(proxied.status, direct.status, 'the client gets what the engine gives it directly');
    assert.equal(proxied.headers.get('x-stream'), 'false', 'the engine read stream as false');
    assert.equal(attackSample.stream, false, 'and so did infermeter');
    assert.equal(attackSample.completionTokens, 7, "the non-streamed answer's usage is counted");

    finished = nextFinished(app, 1);
    const honest = await post(`${app.dataUrl}/v1/chat/completions`, HONEST);
    const [honestSample] = (await finished) as [RequestSample];
    assert.equal(honest.status, 200);
    assert.doesNotMatch(honest.text, /"usage"/, 'the usage chunk infermeter asked for is not delivered');
    assert.equal(honestSample.completionTokens, 7, 'the next honest stream is counted with its tokens');
    assert.equal(honestSample.usageSource, 'upstream');
    const m = await scrape(app);
    assert.equal(m.value('infermeter_usage_injection_active'), 1, 'injection is still on');
  });

  it('bills the model the engine served, whichever duplicate or escape names it', async (t) => {
    const app = await startProxy(t, engine);
    for (const body of [
      '{"model":"cheap-model","mod\\u0065l":"expensive-model","stream":true,"messages":[]}',
      '{"model":"cheap-model","stream":true,"messages":[],"model":"expensive-model"}',
      '{"\\u006dodel":"expensive-model","stream":"yes","messages":[]}',
      '\ufeff{"model":"expensive-model","stream":1,"messages":[]}',
    ]) {
      const finished = nextFinished(app, 1);
      const res = await post(`${app.dataUrl}/v1/chat/completions`, body);
      const [s] = (await finished) as [RequestSample];
      assert.equal(res.status, 200, body);
      assert.equal(res.headers.get('x-model'), 'expensive-model', `${body}: the engine served expensive-model`);
      assert.equal(s.model, 'expensive-model', `${body}: billed as ${s.model}`);
      assert.equal(s.completionTokens, 7, `${body}: its tokens`);
      assert.equal(s.usageSource, 'upstream', `${body}: usage asked for and read`);
      assert.doesNotMatch(res.text, /"usage"/, `${body}: no usage chunk the client did not ask for`);
    }
  });

  it('meters a body the engine reads whatever its Content-Encoding says, with its tokens; a compressed one is refused by the engine, and forwarded as it came', async (t) => {
    const app = await startProxy(t, engine);
    for (const coding of ['x', 'gzip', 'br, zstd', ' ']) {
      const direct = await post(`${engine}/v1/chat/completions`, HONEST, { 'content-encoding': coding });
      assert.equal(direct.status, 200, `${coding}: the engine ignores the header`);
      const finished = nextFinished(app, 1);
      const res = await post(`${app.dataUrl}/v1/chat/completions`, HONEST, { 'content-encoding': coding });
      const [s] = (await finished) as [RequestSample];
      assert.equal(res.status, 200, coding);
      assert.equal(s.model, 'm', `Content-Encoding: ${JSON.stringify(coding)}: billed as ${s.model}`);
      assert.equal(s.completionTokens, 7, `${coding}: its tokens`);
      assert.equal(s.usageSource, 'upstream', `${coding}: usage asked for and read`);
      assert.doesNotMatch(res.text, /"usage"/, `${coding}: no usage chunk the client did not ask for`);
    }
    const compressed = gzipSync(HONEST);
    const direct = await post(`${engine}/v1/chat/completions`, compressed, { 'content-encoding': 'gzip' });
    const finished = nextFinished(app, 1);
    const res = await post(`${app.dataUrl}/v1/chat/completions`, compressed, { 'content-encoding': 'gzip' });
    const [s] = (await finished) as [RequestSample];
    assert.equal(res.status, direct.status, 'really compressed: the engine refuses it, directly as through infermeter');
    assert.equal(s.model, 'unknown');
    assert.equal((await scrape(app)).value('infermeter_request_body_uninspected_total', { reason: 'encoded' }), 1);
  });

  it('meters a body padded past the hold cap with its tokens: read whole, usage asked for at the end of its object (merged with its own stream_options)', async (t) => {
    const app = await startProxy(t, engine);
    await warmUp(app);
    const pad = ' '.repeat(4_200_000);
    for (const [name, body] of [
      ['4.2 MB of white space inside the object', `{"model":"expensive-model",${pad}"stream":true,"messages":[{"role":"user","content":"hi"}]}`],
      ['its own stream_options null', `{"model":"expensive-model","stream_options":null,${pad}"stream":true,"messages":[]}`],
      ['its own stream_options object', `{"stream_options":{"continuous_usage_stats":false},"model":"expensive-model",${pad}"stream":"yes","messages":[]}`],
      ['a 5 MB prompt', JSON.stringify({ model: 'expensive-model', stream: true, messages: [{ role: 'user', content: 'x'.repeat(5_000_000) }] })],
    ] as const) {
      const direct = await post(`${engine}/v1/chat/completions`, body);
      assert.equal(direct.status, 200, `${name}: the engine serves it`);
      const finished = nextFinished(app, 1);
      const res = await post(`${app.dataUrl}/v1/chat/completions`, body);
      const [s] = (await finished) as [RequestSample];
      assert.equal(res.status, 200, `${name}: ${res.text.slice(0, 300)}`);
      assert.equal(s.model, 'expensive-model', `${name}: billed as ${s.model}`);
      assert.equal(s.completionTokens, 7, `${name}: its tokens`);
      assert.equal(s.usageSource, 'upstream', `${name}: usage asked for and read`);
      assert.doesNotMatch(res.text, /"usage"/, `${name}: no usage chunk the client did not ask for`);
    }
    const m = await scrape(app);
    assert.equal(m.value('infermeter_usage_injected_total', { body: 'streamed' }), 4);
    assert.equal(m.sum('infermeter_request_body_uninspected_total'), 0);
  });

  it("reads a UTF-16 or UTF-32 body, which Python's json takes, in UTF-8: billed and injected as the engine serves it", async (t) => {
    const app = await startProxy(t, engine);
    const json = '{"model":"expensive-model","stream":true,"messages":[{"role":"user","content":"caf\u00e9 \ud83d\ude80"}]}';
    const utf16be = (s: string) => Buffer.from(s, 'utf16le').swap16();
    const utf32 = (s: string, le: boolean) => {
      const points = [...s].map((c) => c.codePointAt(0)!);
      const b = Buffer.alloc(points.length * 4);
      points.forEach((p, i) => {
        if (le) b.writeUInt32LE(p, i * 4);
        else b.writeUInt32BE(p, i * 4);
      });
      return b;
    };
    const bodies: Array<[string, Buffer]> = [
      ['utf-16le', Buffer.from(json, 'utf16le')],
      ['utf-16le with BOM', Buffer.from(`\ufeff${json}`, 'utf16le')],
      ['utf-16be', utf16be(json)],
      ['utf-16be with BOM', utf16be(`\ufeff${json}`)],
      ['utf-32le', utf32(json, true)],
      ['utf-32be with BOM', utf32(`\ufeff${json}`, false)],
    ];
    for (const [name, body] of bodies) {
      const direct = await post(`${engine}/v1/chat/completions`, body);
      assert.equal(direct.status, 200, `${name}: the engine serves it`);
      const finished = nextFinished(app, 1);
      const res = await post(`${app.dataUrl}/v1/chat/completions`, body);
      const [s] = (await finished) as [RequestSample];
      assert.equal(res.status, 200, name);
      assert.equal(s.model, 'expensive-model', `${name}: billed as ${s.model}`);
      assert.equal(s.completionTokens, 7, `${name}: its tokens`);
      assert.equal(s.usageSource, 'upstream', name);
      assert.doesNotMatch(res.text, /"usage"/, `${name}: no usage chunk the client did not ask for`);
    }
  });
});
