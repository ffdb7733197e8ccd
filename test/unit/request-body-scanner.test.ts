import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createBodyScanner } from '../../src/stream-tap/request-body-scanner.ts';
import { rechunk, seededRandom } from '../helpers/random.ts';

function scanFull(body: string | Buffer, seed?: number) {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const scanner = createBodyScanner();
  if (seed === undefined) scanner.feed(bytes);
  else for (const chunk of rechunk(bytes, seededRandom(seed), 5)) scanner.feed(chunk);
  return scanner.end();
}

/** The labels part of a result. */
function scan(body: string | Buffer, seed?: number) {
  const r = scanFull(body, seed);
  return r.ok ? { ok: true, model: r.model, stream: r.stream } : r;
}

describe('request body scanner', () => {
  it('reads model and stream from a chat request, at any chunking', () => {
    const body = JSON.stringify({
      messages: [{ role: 'user', content: 'say "model": "evil", {[stream]} \\ \u00e9\u{1F680}' }],
      model: 'meta-llama/Llama-3.1-8B-Instruct',
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { stream: { type: 'boolean' } } } } }],
      stream: true,
      temperature: -0.5e-3,
      n: null,
    });
    for (const seed of [undefined, 1, 2, 3, 4, 5]) {
      assert.deepEqual(scan(body, seed), { ok: true, model: 'meta-llama/Llama-3.1-8B-Instruct', stream: true }, `seed ${seed}`);
    }
  });

  it('decodes escapes in the model name and keeps the last duplicate key, as JSON.parse does', () => {
    assert.deepEqual(scan('{"model":"caf\\u00e9\\/v1","stream":false}'), { ok: true, model: 'café/v1', stream: false });
    assert.deepEqual(scan('{"model":"a","model":"b"}'), { ok: true, model: 'b', stream: undefined });
  });

  it('ignores model and stream below the top level and of the wrong type', () => {
    assert.deepEqual(scan('{"metadata":{"model":"x","stream":true}}'), { ok: true, model: undefined, stream: undefined });
    assert.deepEqual(scan('{"model":42,"stream":"yes"}'), { ok: true, model: undefined, stream: undefined });
    assert.deepEqual(scan('{"model":["x"],"stream":{"a":1}}'), { ok: true, model: undefined, stream: undefined });
  });

  it('accepts whitespace everywhere JSON allows it', () => {
    assert.deepEqual(scan(' \n{ "model" :\t"m" ,\r\n "stream" : true } \n'), { ok: true, model: 'm', stream: true });
    assert.deepEqual(scan('{}'), { ok: true, model: undefined, stream: undefined });
  });

  it('tells empty, truncated, malformed and non-object bodies apart', () => {
    assert.deepEqual(scan(''), { ok: false, reason: 'empty' });
    assert.deepEqual(scan('  '), { ok: false, reason: 'empty' });
    assert.deepEqual(scan('{"model":"x",'), { ok: false, reason: 'invalid_json' });
    assert.deepEqual(scan('{"model":"x" "stream":true}'), { ok: false, reason: 'invalid_json' });
    assert.deepEqual(scan('{model:"x"}'), { ok: false, reason: 'invalid_json' });
    assert.deepEqual(scan('{"model":"x"} trailing'), { ok: false, reason: 'invalid_json' });
    assert.deepEqual(scan('["model","x"]'), { ok: false, reason: 'not_object' });
    assert.deepEqual(scan('model=x&stream=true'), { ok: false, reason: 'not_object' });
  });

  it('reports an over-long model name as absent rather than a truncated label', () => {
    assert.deepEqual(scan(JSON.stringify({ model: 'x'.repeat(600), stream: true })), { ok: true, model: undefined, stream: true });
  });

  it('agrees with JSON.parse on random request-shaped documents', () => {
    const random = seededRandom(42);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    for (let i = 0; i < 300; i++) {
      const doc: Record<string, unknown> = {};
      const keys = ['messages', 'model', 'stream', 'max_tokens', 'tools', 'stream_options', 'user'];
      for (const key of keys) {
        if (random() < 0.3) continue;
        doc[key] = pick<unknown>([
          'gpt-\u4e2d\u6587-"q"\\',
          true,
          false,
          null,
          12.5,
          [{ content: '}]"{[' }],
          { include_usage: true, model: 'inner' },
        ]);
      }
      const text = JSON.stringify(doc, null, random() < 0.5 ? 2 : undefined);
      const parsed = JSON.parse(text) as Record<string, unknown>;
      const expected = {
        ok: true,
        model: typeof parsed.model === 'string' ? parsed.model : undefined,
        stream: typeof parsed.stream === 'boolean' ? parsed.stream : undefined,
      };
      assert.deepEqual(scan(text, i), expected, text);
    }
  });
});

describe('request body scanner: where stream_options lies', () => {
  const slice = (body: string, seed?: number) => {
    const r = scanFull(body, seed);
    assert.ok(r.ok);
    const bytes = Buffer.from(body);
    return { objectStart: r.objectStart, options: r.streamOptions && { text: bytes.subarray(r.streamOptions.start, r.streamOptions.end).toString(), isObject: r.streamOptions.isObject } };
  };
  it('finds the top-level object and the stream_options value of any type, at any chunking', () => {
    for (const seed of [undefined, 1, 2, 3]) {
      assert.deepEqual(slice(' {"model":"m","stream":true}', seed), { objectStart: 1, options: undefined });
      assert.deepEqual(slice('{"stream_options": {"include_usage": false, "x": [1]} ,"stream":true}', seed), {
        objectStart: 0,
        options: { text: '{"include_usage": false, "x": [1]}', isObject: true },
      });
      assert.deepEqual(slice('{"stream_options":null,"stream":true}', seed), { objectStart: 0, options: { text: 'null', isObject: false } });
      assert.deepEqual(slice('{"stream_options":"x","stream":true}', seed), { objectStart: 0, options: { text: '"x"', isObject: false } });
      assert.deepEqual(slice('{"metadata":{"stream_options":{}}}', seed), { objectStart: 0, options: undefined });
    }
  });
});
