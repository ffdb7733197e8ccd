import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { injectUsage, rejectsStreamOptions } from '../../src/data-plane/usage-injection.ts';
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
    assert.equal(inject('{"stream":true,"stream_options":{"continuous_usage_stats":true}}'), '{"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}');
    assert.equal(inject('{"stream":true,"stream_options":{ }}'), '{"stream":true,"stream_options":{"include_usage":true }}');
  });

  it('takes stream_options: null (a client\'s unset field) as absent: the null becomes the object', () => {
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
    const cases = ['{ "include_usage" : true }', '{"include_usage":false}', '{\n\t"include_usage": true\n}', '{"include\\u005fusage":true}', '{"x":{"include_usage":true}}', '{"x":"\\"include_usage\\""}', '{"continuous_usage_stats":true,"include_usage":true}', '{ }', '{}', '{"a":1}'];
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

  it('recognises a refusal of the field', () => {
    assert.equal(rejectsStreamOptions(400, '{"error":{"message":"Unrecognized request argument supplied: stream_options"}}'), true);
    assert.equal(rejectsStreamOptions(422, '{"detail":[{"loc":["body","stream_options"],"msg":"extra fields not permitted"}]}'), true);
    assert.equal(rejectsStreamOptions(400, '{"error":{"message":"bad model"}}'), false);
    assert.equal(rejectsStreamOptions(500, 'stream_options'), false, 'a server error is not a refusal');
  });
});
