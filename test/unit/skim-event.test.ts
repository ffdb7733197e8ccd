// The fast classifier against the full one: on any payload it either defers (undefined) or
// agrees; and it does decide the shapes real engines send, or it would save nothing.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classifyEvent } from '../../src/measure/openai-events.ts';
import { createSkimmer, skimTokenEvent } from '../../src/measure/skim-event.ts';
import { ownStreams, REAL_STREAMS, realStreamBytes, realStreamsAvailable } from '../helpers/fixtures.ts';
import { seededRandom } from '../helpers/random.ts';
import { sseBlocks } from '../helpers/tap-harness.ts';

const skim = (s: string) => skimTokenEvent(Buffer.from(s));

describe('skimTokenEvent', () => {
  it('decides the common chunk shapes', () => {
    assert.equal(skim('{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}'), true);
    assert.equal(skim('{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}'), false);
    assert.equal(skim('{"choices":[{"delta":{"role":null,"content":null,"reasoning_content":"x","tool_calls":null}}]}'), true);
    assert.equal(skim('{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"a\\":1}"}}]}}]}'), true);
    assert.equal(skim('{"choices":[{"delta":{"tool_calls":[]}}]}'), false);
    assert.equal(skim('{"choices":[{"delta":{"content":[{"type":"text","text":"x"}]}}]}'), true);
    assert.equal(skim('{"choices":[{"delta":{}, "finish_reason":null}]}'), false);
    assert.equal(skim('{"choices":[{"text":" the","index":0}],"model":"m"}'), true);
    assert.equal(skim('{"choices":[{"text":"","index":0,"finish_reason" : null}]}'), false);
    assert.equal(skim('{"choices":[{"delta":{"content":"a"}},{"delta":{"content":""}}]}'), true);
  });

  it('defers what it must not decide', () => {
    assert.equal(skim('[DONE]'), undefined);
    assert.equal(skim('{not json'), undefined);
    assert.equal(skim('{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}'), undefined);
    assert.equal(skim('{"object":"error","message":"x"}'), undefined);
    assert.equal(skim('{"error":{"message":"x"}}'), undefined);
    assert.equal(skim('{"type":"response.output_text.delta","delta":"x"}'), undefined);
    assert.equal(skim('{"choices":[{"delta":{"content":"x"'), undefined, 'truncated');
    // Why generation stopped is read by the full classifier (once a stream, per choice).
    assert.equal(skim('{"choices":[{"delta":{}, "finish_reason":"stop"}]}'), undefined);
    assert.equal(skim('{"choices":[{"text":"","index":0,"finish_reason":"length"}]}'), undefined);
    assert.equal(skim('{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop","stop_reason":null}]}'), undefined);
    assert.equal(skim('{"choices":[{"delta":{"content":"a"},"finish_reason":null},{"delta":{},"finish_reason":"length"}]}'), undefined);
  });

  it('agrees with the full classifier on random chunks whenever it decides', () => {
    const random = seededRandom(11);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const values = ['""', '" "', '"x"', '"\\"}{[\\\\"', 'null', '[]', '[{"index":0,"function":{"arguments":"}"}}]', '{}', '{"data":"AA"}', '0', 'true', '"\u00e9\u{1F680}"'];
    const keys = ['role', 'content', 'reasoning_content', 'reasoning', 'tool_calls', 'refusal', 'audio', 'function_call', 'other', 'delta'];
    let decided = 0;
    for (let i = 0; i < 5000; i++) {
      // Engines never repeat a key in one object: neither do these.
      const chosen = [...new Set(Array.from({ length: Math.floor(random() * 4) }, () => pick(keys)))];
      const members = chosen.map((key) => `${pick(['', ' '])}"${key}":${pick(['', ' '])}${pick(values)}`);
      const delta = `{${members.join(',')}}`;
      const finish = random() < 0.2 ? pick(['"stop"', '"length"', '"tool_calls"', '""', '1']) : 'null';
      const choice = random() < 0.15 ? `{"index":0,"text":${pick(values)},"finish_reason":${finish}}` : `{"index":0,"delta":${random() < 0.05 ? 'null' : delta},"finish_reason":${finish}}`;
      const choices = random() < 0.2 ? `[${choice},${choice}]` : `[${choice}]`;
      const extra = pick(['', ',"usage":null', ',"usage":{"prompt_tokens":3,"completion_tokens":4}', ',"model":"m\\"x"', ',"error":null']);
      const payload = `{"id":"c","choices":${choices}${extra}}`;
      const fast = skim(payload);
      if (fast === undefined) continue;
      decided++;
      const full = classifyEvent(payload);
      assert.equal(fast, full.token, payload);
      // Deciding alone must lose nothing the full classifier would have read.
      assert.deepEqual([full.usage, full.finishReason, full.error], [undefined, undefined, false], payload);
    }
    assert.ok(decided > 2500, `decided ${decided} of 5000`);
  });

  it('takes the fast path for the token events of the recorded chat streams', () => {
    const streams = [...ownStreams().map((f) => f.bytes), ...(realStreamsAvailable() ? REAL_STREAMS.filter((s) => s.api !== 'responses').map((s) => realStreamBytes(s.file)) : [])];
    let tokens = 0;
    let fast = 0;
    for (const bytes of streams) {
      for (const block of sseBlocks(bytes)) {
        const text = block.bytes.toString().trim();
        if (!text.startsWith('data: {') || text.includes('\n')) continue;
        const payload = text.slice(6);
        if (!classifyEvent(payload).token) continue;
        tokens++;
        if (skim(payload) === true) fast++;
      }
    }
    assert.ok(fast / tokens > 0.9, `${fast} of ${tokens} token events skimmed`);
  });
});

describe('createSkimmer (stream templates)', () => {
  it('agrees with the full classifier on a stream of chunks that share a template, and on those that break it', () => {
    const skimmer = createSkimmer();
    const random = seededRandom(5);
    const texts = ['"a"', '""', '" "', '"\\""', '"\\\\"', '"x\\"y"', '"é"', '"}]}"'];
    let templated = 0;
    for (let i = 0; i < 3000; i++) {
      const text = texts[Math.floor(random() * texts.length)]!;
      const shape = random();
      const payload =
        shape < 0.8
          ? `{"id":"c1","created":1,"choices":[{"index":0,"delta":{"content":${text}},"finish_reason":null}]}`
          : shape < 0.9
            ? `{"id":"c1","created":2,"choices":[{"index":0,"delta":{"content":${text}},"finish_reason":null}]}`
            : `{"id":"c1","created":1,"choices":[{"index":0,"delta":{"content":${text}},"finish_reason":null}],"usage":{"prompt_tokens":1}}`;
      const bytes = Buffer.from(`data: ${payload}`);
      const fast = skimmer(bytes, 6, bytes.length);
      if (fast !== undefined) assert.equal(fast, classifyEvent(payload).token, payload);
      if (fast !== undefined && shape < 0.8) templated++;
    }
    assert.ok(templated > 2000);
    // A chunk that looks like the template but is not one string in the middle: walked in full.
    const tricky = Buffer.from('{"id":"c1","created":1,"choices":[{"index":0,"delta":{"content":"a","refusal":"b"},"finish_reason":null}]}');
    assert.equal(skimmer(tricky, 0, tricky.length), true);
    // The template's last chunk, with its finish reason: never taken for the template.
    const last = '{"id":"c1","created":1,"choices":[{"index":0,"delta":{"content":"."},"finish_reason":"stop"}]}';
    assert.equal(skimmer(Buffer.from(last), 0, Buffer.byteLength(last)), undefined);
    assert.deepEqual([classifyEvent(last).token, classifyEvent(last).finishReason], [true, 'stop']);
  });
});
