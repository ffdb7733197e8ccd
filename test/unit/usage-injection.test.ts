import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createInjectionSwitch, injectUsage, rejectsStreamOptions, trustedRefusal } from '../../src/data-plane/usage-injection.ts';
import { seededRandom } from '../helpers/random.ts';
import { createBodyScanner } from '../../src/stream-tap/request-body-scanner.ts';

function inject(body: string): string | undefined {
  const bytes = Buffer.from(body);
  const scanner = createBodyScanner();
  scanner.feed(bytes);
  return injectUsage(bytes, scanner.end())?.toString();
}

describe('usage injection', () => {
  it('adds stream_options to a streaming request, every other byte as it was', () => {
    assert.equal(inject('{"model":"m","stream":true}'), '{"stream_options":{"include_usage":true},"model":"m","stream":true}');
    assert.equal(inject('  {\n  "stream": true, "messages": []\n}'), '  {"stream_options":{"include_usage":true},\n  "stream": true, "messages": []\n}');
  });

  it('completes a stream_options object that lacks include_usage', () => {
    assert.equal(
      inject('{"stream":true,"stream_options":{"continuous_usage_stats":true}}'),
      '{"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}',
    );
    assert.equal(inject('{"stream":true,"stream_options":{ }}'), '{"stream":true,"stream_options":{"include_usage":true }}');
  });

  it("takes stream_options: null (a client's unset field) as absent: the null becomes the object", () => {
    assert.equal(inject('{"stream":true,"stream_options":null}'), '{"stream":true,"stream_options":{"include_usage":true}}');
    assert.equal(inject('{"stream_options": null ,"stream":true}'), '{"stream_options": {"include_usage":true} ,"stream":true}');
    const out = inject('{"model":"m","stream_options":null,"stream":true,"n":1}')!;
    assert.deepEqual(JSON.parse(out), { model: 'm', stream_options: { include_usage: true }, stream: true, n: 1 });
  });

  it('leaves alone what it must not change', () => {
    assert.equal(inject('{"model":"m"}'), undefined, 'not streaming');
    assert.equal(inject('{"stream":false}'), undefined);
    assert.equal(inject('{"stream":true,"stream_options":{"include_usage":true}}'), undefined, 'asked already');
    assert.equal(inject('{"stream":true,"stream_options":{"include_usage":false}}'), undefined, 'an explicit choice is respected');
    assert.equal(inject('{"stream":true,"stream_options":1}'), undefined, 'not an object');
    assert.equal(inject('{"stream":true,"stream_options":[]}'), undefined, 'not an object');
    assert.equal(inject('{"stream":true,'), undefined, 'not JSON');
  });

  it('reads stream_options as JSON.parse does, in the form clients send and any other', () => {
    const cases = [
      '{ "include_usage" : true }',
      '{"include_usage":false}',
      '{\n\t"include_usage": true\n}',
      '{"include\\u005fusage":true}',
      '{"x":{"include_usage":true}}',
      '{"x":"\\"include_usage\\""}',
      '{"continuous_usage_stats":true,"include_usage":true}',
      '{ }',
      '{}',
      '{"a":1}',
    ];
    for (const options of cases) {
      const body = `{"stream":true,"stream_options":${options}}`;
      const has = 'include_usage' in (JSON.parse(options) as object);
      const out = inject(body);
      if (has) assert.equal(out, undefined, options);
      else {
        assert.ok(out !== undefined, options);
        const sent = JSON.parse(out) as { stream_options: Record<string, unknown> };
        assert.deepEqual(sent.stream_options, { include_usage: true, ...(JSON.parse(options) as object) }, options);
      }
    }
    assert.equal(inject('{ \n}'), undefined, 'not streaming');
    assert.equal(inject('{"stream":true }'), '{"stream_options":{"include_usage":true},"stream":true }');
  });

  it('stops injecting while the engine states the counts unasked, and comes back on for good when it does not', () => {
    const active: boolean[] = [];
    const warnings: string[] = [];
    const sw = createInjectionSwitch(true, { active: (on) => active.push(on), injected() {}, stripped() {} }, (w) => warnings.push(w));
    sw.accept();
    let waited = 0;
    sw.countsMissing(); // nothing learned: nothing to undo
    assert.deepEqual([sw.active(), sw.accepted()], [true, true]);
    sw.countsStated();
    assert.deepEqual([sw.active(), sw.accepted()], [false, false]);
    sw.whenAccepted(() => waited++);
    assert.equal(waited, 1, 'a body that would wait for the field to be known goes on at once');
    sw.countsMissing();
    assert.deepEqual([sw.active(), sw.accepted()], [true, true]);
    sw.countsStated(); // not believed twice
    assert.equal(sw.active(), true);
    assert.deepEqual(active, [true, false, true]);
    assert.equal(warnings.length, 1);
    // Off by configuration or by a refusal: the sign changes nothing.
    const off = createInjectionSwitch(false, { active() {}, injected() {}, stripped() {} }, () => undefined);
    off.countsStated();
    off.countsMissing();
    assert.equal(off.active(), false);
  });

  it('recognises a refusal of the field', () => {
    assert.equal(rejectsStreamOptions(400, '{"error":{"message":"Unrecognized request argument supplied: stream_options"}}'), true);
    assert.equal(rejectsStreamOptions(422, '{"detail":[{"loc":["body","stream_options"],"msg":"extra fields not permitted"}]}'), true);
    assert.equal(rejectsStreamOptions(400, '{"error":{"message":"bad model"}}'), false);
    assert.equal(rejectsStreamOptions(500, 'stream_options'), false, 'a server error is not a refusal');
  });

  it('trusts a refusal only where the client cannot have written it', () => {
    const clean = Buffer.from('{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}');
    const refusals = [
      "[{'type': 'extra_forbidden', 'loc': ('body', 'stream_options'), 'msg': 'Extra inputs are not permitted', 'input': {'include_usage': True}}]",
      'Failed to deserialize the JSON body into the target type: unknown field `stream_options`, expected one of `model`',
      'Unrecognized request argument supplied: stream_options',
    ];
    for (const r of refusals) {
      assert.equal(trustedRefusal(400, JSON.stringify({ message: r }), clean), true, r);
      // The same words, with the client's text saying "not supported" (in any case, or escaped): not trusted.
      for (const text of ['not supported', 'NOT SUPPORTED', 'not \\u0073upported', 'extra inputs are not permitted', 'stream\\u005foptions']) {
        const echoing = Buffer.from(`{"model":"m","stream":true,"messages":[{"role":"user","content":"${text}"}]}`);
        assert.equal(trustedRefusal(400, JSON.stringify({ message: r }), echoing), false, `${r} / ${text}`);
      }
    }
    // The client's text in UTF-16 (which Python's json reads) is the client's text too.
    const wide = Buffer.from('{"model":"m","stream":true,"messages":[{"role":"user","content":"not supported"}]}', 'utf16le');
    assert.equal(trustedRefusal(400, JSON.stringify({ message: refusals[0] }), wide), false, 'a UTF-16 body saying "not supported"');
    // The field named far from any word of refusal: an echo of the injected body beside an unrelated error.
    const far = JSON.stringify({ message: `unsupported value for temperature${' '.repeat(200)}input: {'stream_options': {'include_usage': True}}` });
    assert.equal(rejectsStreamOptions(400, far, clean), true, 'suspected: re-sent without the field');
    assert.equal(trustedRefusal(400, far, clean), false, 'but not trusted');
  });

  it("agrees with JSON.parse over escaped and duplicated keys: the engine sees the client's fields and include_usage", () => {
    const random = seededRandom(31);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const names = ['model', 'stream', 'stream_options', 'messages', 'n'];
    const values: Record<string, readonly string[]> = {
      model: ['"a"', '"b"'],
      stream: ['true', 'false', '1', '"yes"', 'null'],
      stream_options: ['{}', '{"x":1}', '{"include_usage":false}', '{"include\\u005fusage":true}', 'null', '1'],
      messages: ['[]', '[{"content":"stream_options"}]'],
      n: ['1', '2'],
    };
    const spell = (key: string): string => [...key].map((ch) => (random() < 0.3 ? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}` : ch)).join('');
    for (let i = 0; i < 2000; i++) {
      const members: string[] = [];
      for (let m = 0, count = 1 + Math.floor(random() * 6); m < count; m++) {
        const name = pick(names);
        members.push(`"${spell(name)}":${pick(values[name]!)}`);
      }
      const body = `{${members.join(',')}}`;
      const parsed = JSON.parse(body) as Record<string, unknown>;
      const streams = parsed.stream === true || parsed.stream === 1 || parsed.stream === 'yes';
      const options = parsed.stream_options;
      const asked = typeof options === 'object' && options !== null && 'include_usage' in options;
      const out = inject(body);
      const expected =
        streams && (options === undefined || options === null || (typeof options === 'object' && !asked))
          ? { ...parsed, stream_options: { include_usage: true, ...((options as object | null) ?? {}) } }
          : undefined;
      if (expected === undefined) assert.equal(out, undefined, body);
      else {
        assert.ok(out !== undefined, body);
        assert.deepEqual(JSON.parse(out), expected, body);
      }
    }
  });
});
