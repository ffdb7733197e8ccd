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

/** The scan of `bytes` fed in two chunks, split at each byte in turn. */
function* scansSplitInTwo(bytes: Buffer) {
  for (let at = 0; at <= bytes.length; at++) {
    const scanner = createBodyScanner();
    scanner.feed(bytes.subarray(0, at));
    scanner.feed(bytes.subarray(at));
    yield [at, scanner.end()] as const;
  }
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
    assert.deepEqual(scan('{"model":42,"stream":"maybe"}'), { ok: true, model: undefined, stream: undefined });
    assert.deepEqual(scan('{"stream":2}'), { ok: true, model: undefined, stream: undefined });
    assert.deepEqual(scan('{"stream":null}'), { ok: true, model: undefined, stream: undefined });
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

  it('keeps a model name of 512 bytes and drops one of 513, whole or cut at any byte', () => {
    for (const [name, expected] of [
      ['é'.repeat(256), 'é'.repeat(256)],
      ['x'.repeat(512), 'x'.repeat(512)],
      ['x'.repeat(513), undefined],
      ['a\\u00e9'.repeat(64), 'a\u00e9'.repeat(64)],
    ] as const) {
      const bytes = Buffer.from(`{"model":"${name}","stream":true}`);
      assert.deepEqual(scan(bytes), { ok: true, model: expected, stream: true });
      for (let at = 0; at <= bytes.length; at += 7) {
        const scanner = createBodyScanner();
        scanner.feed(bytes.subarray(0, at));
        scanner.feed(bytes.subarray(at, at + 300));
        scanner.feed(bytes.subarray(at + 300));
        const r = scanner.end();
        assert.ok(r.ok);
        assert.equal(r.model, expected, `cut at ${at} and ${at + 300}`);
      }
    }
  });

  it('agrees with JSON.parse on random request-shaped documents', () => {
    const random = seededRandom(42);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    for (let i = 0; i < 600; i++) {
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
          // Long texts with escapes anywhere (quotes, backslashes, newlines, \u escapes), cut by the rechunking at any byte.
          [
            { role: 'user', content: `${'a"b\\c\n'.repeat(40)}\\` },
            { role: 'assistant', content: '\u0001\u2028"}' + 'x'.repeat(300) },
          ],
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

describe('request body scanner: the body as the engine reads it', () => {
  it('decodes escapes in keys: an escaped key is that key, the last duplicate wins (issue 30)', () => {
    // The attack: a stream to a raw-byte reader, not one to Python's json.
    assert.deepEqual(scan('{"stream":true,"str\\u0065am":false}'), { ok: true, model: undefined, stream: false });
    assert.deepEqual(scan('{"model":"cheap-model","mod\\u0065l":"expensive-model"}'), { ok: true, model: 'expensive-model', stream: undefined });
    assert.deepEqual(scan('{"\\u006d\\u006F\\u0064\\u0065\\u006c":"m","\\u0073tream":true}'), { ok: true, model: 'm', stream: true });
    assert.deepEqual(scan('{"model\\u0000":"x","stre\\/am":true,"mod\\u00e9l":"y"}'), { ok: true, model: undefined, stream: undefined });
    const r = scanFull('{"stream":true,"stream\\u005foptions":{"include_usage":false}}');
    assert.ok(r.ok && r.streamOptions !== undefined, "an escaped stream_options is the client's stream_options");
  });
  it('refuses keys JSON refuses: a bad escape, a control byte', () => {
    assert.deepEqual(scan('{"str\\qeam":true}'), { ok: false, reason: 'invalid_json' });
    assert.deepEqual(scan('{"str\\u00zzeam":true}'), { ok: false, reason: 'invalid_json' });
    assert.deepEqual(scan('{"str\nam":true}'), { ok: false, reason: 'invalid_json' });
  });
  it("reads stream as pydantic's lax bool does", () => {
    for (const [v, expected] of [
      ['1', true],
      ['0', false],
      ['1.0', true],
      ['0e3', false],
      ['"true"', true],
      ['"YES"', true],
      ['"on"', true],
      ['"t"', true],
      ['"y"', true],
      ['"1"', true],
      ['"off"', false],
      ['"No"', false],
      ['"\\u0074rue"', true],
      ['2', undefined],
      ['"true "', undefined],
      ['"yess"', undefined],
      ['-1', undefined],
      ['[true]', undefined],
    ] as const) {
      for (const seed of [undefined, 1, 2])
        assert.equal(scan(`{"stream":${v}}`, seed).ok && (scanFull(`{"stream":${v}}`, seed) as { stream: unknown }).stream, expected, `${v}, seed ${seed}`);
    }
  });
  it("skips a UTF-8 byte order mark and takes NaN and Infinity, as Python's json.loads does", () => {
    assert.deepEqual(scan(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"model":"m","stream":true}')])), {
      ok: true,
      model: 'm',
      stream: true,
    });
    assert.deepEqual(scan(Buffer.concat([Buffer.from([0xef, 0xbb]), Buffer.from('{"model":"m"}')])), { ok: false, reason: 'not_object' });
    assert.deepEqual(scan('{"temperature":NaN,"top_p":-Infinity,"model":"m","stream":true}'), { ok: true, model: 'm', stream: true });
  });

  it("agrees with JSON.parse (and pydantic's bool) over escaped and duplicated keys, at any chunking", () => {
    const random = seededRandom(30);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const names = ['model', 'stream', 'stream_options', 'n', 'max_tokens', 'max_completion_tokens', 'max_output_tokens', 'messages', 'user', 'streams', 'mode'];
    const values = [
      '"m-a"',
      '"m\\u00e9"',
      '"caf\\u00e9\\"x"',
      'true',
      'false',
      '1',
      '0',
      '"yes"',
      '"off"',
      'null',
      '7',
      '3',
      '0.5',
      '[1,{"model":"in"}]',
      '{"include_usage":true}',
      '{}',
      '"str\\"eam"',
    ];
    // A key spelt with each character escaped or not, in upper or lower hex, or with \/ for nothing.
    const spell = (key: string): string => {
      let out = '';
      for (const ch of key) {
        const r = random();
        const hex = ch.charCodeAt(0).toString(16).padStart(4, '0');
        out += r < 0.25 ? `\\u${hex}` : r < 0.35 ? `\\u${hex.toUpperCase()}` : ch;
      }
      return out;
    };
    for (let i = 0; i < 2000; i++) {
      const members: string[] = [];
      const count = 1 + Math.floor(random() * 8);
      for (let m = 0; m < count; m++) members.push(`"${spell(pick(names))}":${pick(values)}`);
      const text = `{${members.join(random() < 0.5 ? ',' : ' , ')}}`;
      const parsed = JSON.parse(text) as Record<string, unknown>;
      const int = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined);
      const bool = (v: unknown) =>
        typeof v === 'boolean'
          ? v
          : v === 1
            ? true
            : v === 0
              ? false
              : typeof v === 'string'
                ? ({ yes: true, off: false } as Record<string, boolean>)[v]
                : undefined;
      const r = scanFull(text, i % 3 === 0 ? undefined : i);
      assert.ok(r.ok, text);
      const n = int(parsed.n);
      assert.deepEqual(
        {
          model: r.model,
          stream: r.stream,
          n: r.n,
          maxTokens: r.maxTokens,
          options: r.streamOptions === undefined ? undefined : JSON.parse(Buffer.from(text).subarray(r.streamOptions.start, r.streamOptions.end).toString()),
        },
        {
          model: typeof parsed.model === 'string' ? parsed.model : undefined,
          stream: bool(parsed.stream),
          n: n !== undefined && n >= 1 ? n : undefined,
          maxTokens: int(parsed.max_completion_tokens) ?? int(parsed.max_tokens) ?? int(parsed.max_output_tokens),
          options: parsed.stream_options,
        },
        text,
      );
    }
  });
});

describe('request body scanner: where stream_options lies', () => {
  const slice = (body: string, seed?: number) => {
    const r = scanFull(body, seed);
    assert.ok(r.ok);
    const bytes = Buffer.from(body);
    return {
      objectStart: r.objectStart,
      options: r.streamOptions && { text: bytes.subarray(r.streamOptions.start, r.streamOptions.end).toString(), isObject: r.streamOptions.isObject },
    };
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

describe('request body scanner: maxTokens and n', () => {
  /** The generation-limit part of a result. */
  const limits = (body: string | Buffer, seed?: number) => {
    const r = scanFull(body, seed);
    return r.ok ? { maxTokens: r.maxTokens, n: r.n } : r;
  };

  it('reads each generation-limit key alone, and n', () => {
    assert.deepEqual(limits('{"model":"m","max_completion_tokens":128}'), { maxTokens: 128, n: undefined });
    assert.deepEqual(limits('{"model":"m","max_tokens":64}'), { maxTokens: 64, n: undefined });
    assert.deepEqual(limits('{"model":"m","max_output_tokens":32}'), { maxTokens: 32, n: undefined });
    assert.deepEqual(limits('{"n":3,"model":"m"}'), { maxTokens: undefined, n: 3 });
    assert.deepEqual(limits('{ "max_tokens" : 0 , "n" : 1 }'), { maxTokens: 0, n: 1 });
    assert.deepEqual(limits('{"max_tokens":2147483647}'), { maxTokens: 2147483647, n: undefined });
    assert.deepEqual(limits('{}'), { maxTokens: undefined, n: undefined });
  });

  it('prefers max_completion_tokens, then max_tokens, then max_output_tokens, in any order', () => {
    const entries = ['"max_completion_tokens":1', '"max_tokens":2', '"max_output_tokens":3'];
    for (const order of [entries, [...entries].reverse(), [entries[1], entries[2], entries[0]]]) {
      assert.deepEqual(limits(`{${order.join(',')}}`), { maxTokens: 1, n: undefined }, order.join());
    }
    for (const order of [
      ['"max_tokens":2', '"max_output_tokens":3'],
      ['"max_output_tokens":3', '"max_tokens":2'],
    ]) {
      assert.deepEqual(limits(`{${order.join(',')}}`), { maxTokens: 2, n: undefined }, order.join());
    }
    // An invalid value counts as absent, so the next key in precedence shows through.
    assert.deepEqual(limits('{"max_completion_tokens":null,"max_tokens":2,"max_output_tokens":3}'), { maxTokens: 2, n: undefined });
  });

  it('ignores values that are not non-negative integers up to 2^31-1, without failing the scan', () => {
    for (const bad of ['1.5', '-1', '1e3', '1E3', '"64"', 'null', 'true', '99999999999', '2147483648', '01', '128.0', '[64]', '{"v":64}']) {
      for (const key of ['max_completion_tokens', 'max_tokens', 'max_output_tokens', 'n']) {
        const r = scanFull(`{"model":"m","${key}":${bad},"stream":true}`);
        assert.ok(r.ok, `${key}: ${bad}`);
        assert.deepEqual(
          { maxTokens: r.maxTokens, n: r.n, model: r.model, stream: r.stream },
          { maxTokens: undefined, n: undefined, model: 'm', stream: true },
          `${key}: ${bad}`,
        );
      }
    }
    assert.deepEqual(limits('{"n":0}'), { maxTokens: undefined, n: undefined });
  });

  it('ignores the keys below the top level, and reads keys with escapes as the engine does', () => {
    assert.deepEqual(limits('{"x":{"max_tokens":5}}'), { maxTokens: undefined, n: undefined });
    assert.deepEqual(limits('{"x":[{"max_completion_tokens":5,"n":2}],"y":{"max_output_tokens":5}}'), { maxTokens: undefined, n: undefined });
    assert.deepEqual(limits('{"max\\u005ftokens":5,"\\u006e":2}'), { maxTokens: 5, n: 2 });
    assert.deepEqual(limits('{"max_tokens_x":5,"nn":2,"max_token":5}'), { maxTokens: undefined, n: undefined });
  });

  it('keeps the last duplicate key, as JSON.parse does', () => {
    assert.deepEqual(limits('{"max_tokens":5,"max_tokens":7,"n":2,"n":4}'), { maxTokens: 7, n: 4 });
    assert.deepEqual(limits('{"max_tokens":5,"max_tokens":"7","n":2,"n":null}'), { maxTokens: undefined, n: undefined });
    assert.deepEqual(limits('{"max_tokens":"7","max_tokens":5}'), { maxTokens: 5, n: undefined });
  });

  it('finds where a string ends past runs of backslashes and quotes, split in two at every byte', () => {
    // Short stretches of text (a loop finds each quote) and long ones (a byte search does).
    for (const [run, pad] of [0, 1, 2, 3, 4, 5].flatMap((r) => [[r, ''] as const, [r, 'p'.repeat(100)] as const])) {
      const text = `${pad}${'\\'.repeat(run)}"${pad}${'\\'.repeat(run)}x"y${pad}\\`;
      const body = JSON.stringify({ messages: [{ content: text }], prompt: text, model: `m${text}`, stream: true });
      for (const [at, r] of scansSplitInTwo(Buffer.from(body))) {
        assert.ok(r.ok, `${body} split at ${at}`);
        assert.deepEqual({ model: r.model, stream: r.stream }, { model: `m${text}`, stream: true }, `${body} split at ${at}`);
      }
    }
  });

  it('gives the same result when the body is split in two at every byte', () => {
    const bodies: [string, { maxTokens: number | undefined; n: number | undefined }][] = [
      ['{"max_completion_tokens":1234}', { maxTokens: 1234, n: undefined }],
      ['{"max_tokens":567}', { maxTokens: 567, n: undefined }],
      ['{"max_output_tokens":89}', { maxTokens: 89, n: undefined }],
      ['{"n":12}', { maxTokens: undefined, n: 12 }],
      ['{"max_output_tokens":3, "x":{"n":9}, "max_tokens": 2 ,"max_completion_tokens":1,"n":5}', { maxTokens: 1, n: 5 }],
      ['{"max_tokens":1.5,"n":-1}', { maxTokens: undefined, n: undefined }],
      ['{"max_tokens":99999999999}', { maxTokens: undefined, n: undefined }],
    ];
    for (const [body, expected] of bodies) {
      const bytes = Buffer.from(body);
      assert.deepEqual(limits(bytes), expected, body);
      for (const [at, r] of scansSplitInTwo(bytes)) {
        assert.ok(r.ok, `${body} split at ${at}`);
        assert.deepEqual({ maxTokens: r.maxTokens, n: r.n }, expected, `${body} split at ${at}`);
      }
    }
  });

  it('agrees with JSON.parse on random documents, at any chunking', () => {
    const random = seededRandom(7);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const keys = ['messages', 'max_output_tokens', 'model', 'max_tokens', 'n', 'max_completion_tokens', 'metadata'];
    const isCount = (v: unknown, min: number) => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= 2 ** 31 - 1;
    for (let i = 0; i < 300; i++) {
      const entries: string[] = [];
      for (let k = 0; k < 6; k++) {
        const value = pick<unknown>([0, 1, 7, 4096, 2 ** 31 - 1, 2 ** 31, -3, 2.5, 1e21, null, true, '16', [3], { max_tokens: 9, n: 2 }]);
        entries.push(`${JSON.stringify(pick(keys))}:${JSON.stringify(value)}`); // duplicates on purpose
      }
      const text = `{${entries.join(random() < 0.5 ? ',' : ' ,\n ')}}`;
      const parsed = JSON.parse(text) as Record<string, unknown>;
      const limit = [parsed.max_completion_tokens, parsed.max_tokens, parsed.max_output_tokens].find((v) => isCount(v, 0));
      const expected = { maxTokens: limit as number | undefined, n: isCount(parsed.n, 1) ? (parsed.n as number) : undefined };
      assert.deepEqual(limits(text, i), expected, text);
    }
  });

  it("keeps the last stream_options value's text (a body streamed through is injected from it) and says when the object closed, at every split", () => {
    const body = Buffer.from('{"stream_options":{"a":1},"model":"m", "stream_options" : { "continuous_usage_stats" : true , "s":"}\\"" } ,"stream":true}  ');
    const last = '{ "continuous_usage_stats" : true , "s":"}\\"" }';
    for (const [at, result] of scansSplitInTwo(body)) {
      assert.ok(result.ok, `split at ${at}`);
      assert.equal(result.streamOptions?.text, last, `split at ${at}`);
      assert.equal(result.streamOptions?.isObject, true);
    }
    for (const [value, isObject] of [
      ['null', false],
      ['"x"', false],
      ['[1,2]', false],
    ] as const) {
      const r = scanFull(`{"stream_options":${value},"stream":true}`, 3);
      assert.deepEqual(r.ok && [r.streamOptions?.text, r.streamOptions?.isObject], [value, isObject], value);
    }
    const long = scanFull(`{"stream_options":{"x":"${'y'.repeat(2000)}"},"stream":true}`, 4);
    assert.ok(long.ok && long.streamOptions?.isObject === true && long.streamOptions.text === undefined, 'past its cap: no text');
    const scanner = createBodyScanner();
    scanner.feed(Buffer.from('{"stream":true'));
    assert.equal(scanner.done(), false);
    scanner.feed(Buffer.from('} \n'));
    assert.equal(scanner.done(), true, 'closed, white space after');
    scanner.feed(Buffer.from('x'));
    assert.equal(scanner.done(), false, 'not JSON after all');
  });
});
