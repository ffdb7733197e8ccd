// Continuous usage (INFERMETER_CONTINUOUS_USAGE): the injected field asks for usage on every
// chunk, and the strip removes each chunk's `"usage"` member (vLLM writes it last) with the
// comma before it, at any chunking; a read with nothing to remove is given back as it came.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { appendedUsage, injectUsage } from '../../src/data-plane/usage-injection.ts';
import { createBodyScanner } from '../../src/stream-tap/request-body-scanner.ts';
import { createUsageStrip, usageMember } from '../../src/stream-tap/usage-strip.ts';
import { rechunk, seededRandom } from '../helpers/random.ts';

const scanOf = (body: string) => {
  const scanner = createBodyScanner();
  scanner.feed(Buffer.from(body));
  return scanner.end();
};
const inject = (body: string) => injectUsage(Buffer.from(body), scanOf(body), true)?.toString();

const usage = (p: number, c: number) => `"usage":{"prompt_tokens":${p},"total_tokens":${p + c},"completion_tokens":${c},"prompt_tokens_details":null}`;
const chunk = (content: string) =>
  `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"logprobs":null,"finish_reason":null}]`;

/** A vLLM stream with continuous usage (`asked`), and what the client gets without it. */
function stream(eol: string): { asked: string; plain: string } {
  const contents = ['Hi', ',"usage":{}}', ' "usage": {"a":1}}', 'done'];
  let asked = `data: ${chunk('')},${usage(9, 0)}}${eol}${eol}`;
  let plain = `data: ${chunk('')}}${eol}${eol}`;
  contents.forEach((c, i) => {
    asked += `data: ${chunk(c)},${usage(9, i + 1)}}${eol}${eol}`;
    plain += `data: ${chunk(c)}}${eol}${eol}`;
  });
  asked += `: a comment${eol}${eol}data: {"id":"c1","choices":[],${usage(9, 4)}}${eol}${eol}data: [DONE]${eol}${eol}`;
  plain += `: a comment${eol}${eol}data: [DONE]${eol}${eol}`;
  return { asked, plain };
}

function strip(chunks: Buffer[]): { out: Buffer; writes: Array<Buffer | undefined> } {
  const filter = createUsageStrip({ maxEventBytes: 1 << 20, members: true, stripped: () => {} });
  const writes = chunks.map((c) => filter.pass(c));
  const out = Buffer.concat([...writes, filter.end()].filter((b): b is Buffer => b !== undefined));
  return { out, writes };
}

describe('continuous usage', () => {
  it('asks for continuous_usage_stats beside include_usage, held or appended', () => {
    assert.equal(inject('{"model":"m","stream":true}'), '{"stream_options":{"include_usage":true,"continuous_usage_stats":true},"model":"m","stream":true}');
    assert.equal(inject('{"stream":true,"stream_options":null}'), '{"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}');
    assert.equal(inject('{"stream":true,"stream_options":{}}'), '{"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}');
    assert.equal(inject('{"stream":true,"stream_options":{"include_usage":true}}'), undefined, "a client's own usage is left alone");
    assert.deepEqual(appendedUsage(scanOf('{"stream":true}'), true), [',"stream_options":{"include_usage":true,"continuous_usage_stats":true}']);
    assert.deepEqual(appendedUsage(scanOf('{"stream":true}')), [',"stream_options":{"include_usage":true}'], 'off: as before');
  });

  it("finds a chunk's usage member only where it is the top-level object's last", () => {
    const at = (s: string) => {
      const m = usageMember(Buffer.from(s), 0, s.length);
      return m === undefined ? undefined : s.slice(0, m[0]) + s.slice(m[1]);
    };
    assert.equal(at('data: {"a":1,"usage":{"p":1,"d":{"c":0}}}\n'), 'data: {"a":1}\n');
    assert.equal(at('data: {"a": 1 , "usage" : { "p": 1 } }\r'), 'data: {"a": 1  }\r', 'the whitespace JSON allows');
    assert.equal(at('data: {"a":{"b":1,"usage":{"p":1}}}'), undefined, 'nested deeper');
    assert.equal(at('data: {"usage":{"p":1},"a":1}'), undefined, 'not the last member');
    assert.equal(at('data: {"usage":{"p":1}}'), undefined, 'no comma: the only member');
    assert.equal(at('data: {"a":"x","usage":{"p":"}"}}'), 'data: {"a":"x"}', 'a brace in a string');
    assert.equal(at('data: {"a":"\\",\\"usage\\":{}}"}'), undefined, 'a token that spells it');
  });

  it('gives the client the stream without continuous usage, at any chunking, one write per read', () => {
    for (const eol of ['\n', '\r\n']) {
      const { asked, plain } = stream(eol);
      for (let seed = 0; seed <= 40; seed++) {
        const chunks = seed === 0 ? [Buffer.from(asked)] : rechunk(Buffer.from(asked), seededRandom(seed), seed % 2 === 0 ? 7 : 200);
        const { out, writes } = strip(chunks);
        assert.equal(out.toString(), plain, `seed ${seed}`);
        assert.equal(writes.length, chunks.length);
      }
    }
  });

  it('gives back a read with nothing to remove as the very Buffer it came in', () => {
    const read = Buffer.from(`data: ${chunk('a')}}\n\ndata: ${chunk('b')}}\n\n`);
    assert.equal(strip([read]).writes[0], read);
  });
});
