// The fast classifier against the full one: on any payload it either defers (undefined) or
// agrees; and it does decide the shapes real engines send, or it would save nothing.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classifyEvent } from '../../src/measure/openai-events.ts';
import { createSkimmer, skimTokenEvent } from '../../src/measure/skim-event.ts';
import { assertRealStreamsIn, ownStreams, realStreamCorpus, realStreamsSkip } from '../helpers/fixtures.ts';
import { seededRandom } from '../helpers/random.ts';
import { runTap, sseBlocks } from '../helpers/tap-harness.ts';

const skim = (s: string) => skimTokenEvent(Buffer.from(s));

describe('skimTokenEvent', () => {
  it('decides the common chunk shapes', () => {
    assert.equal(skim('{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}'), true);
    assert.equal(skim('{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}'), false);
    // Reasoning is a token, not visible output.
    assert.deepEqual(
      skim('{"choices":[{"delta":{"role":null,"content":null,"reasoning_content":"x","tool_calls":null}}]}'),
      classifyEvent('{"choices":[{"delta":{"reasoning_content":"x"}}]}'),
    );
    assert.equal(classifyEvent('{"choices":[{"delta":{"reasoning_content":"x"}}]}').reasoning, true);
    assert.equal(skim('{"choices":[{"delta":{"reasoning":"x","content":"y"}}]}'), true, 'visible output beside reasoning: visible');
    assert.equal(skim('{"choices":[{"delta":{"reasoning":"x"}},{"delta":{"tool_calls":[{"index":0}]}}]}'), true, 'visible in another choice');
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
    assert.equal(skim('{"object":"error","message":"x"}'), undefined);
    assert.equal(skim('{"error":{"message":"x"}}'), undefined);
    assert.equal(skim('{"type":"response.output_text.delta","delta":"x"}'), undefined);
    assert.equal(skim('{"choices":[{"delta":{"content":"x"'), undefined, 'truncated');
    // What it does not decode: escapes and non-ASCII in a finish reason, escapes in the model,
    // numbers that are not plain non-negative integers, a usage that is an array.
    assert.equal(skim('{"choices":[{"delta":{},"finish_reason":"st\\u006fp"}]}'), undefined);
    assert.equal(skim('{"choices":[{"delta":{},"finish_reason":"arrêt"}]}'), undefined);
    assert.equal(skim('{"model":"m\\"1","choices":[{"delta":{},"finish_reason":"stop"}]}'), undefined);
    for (const n of ['1.0', '1e2', '-1', '01', '1234567890123456']) {
      assert.equal(skim(`{"choices":[],"usage":{"prompt_tokens":${n},"completion_tokens":2}}`), undefined, n);
    }
    assert.equal(skim('{"choices":[],"usage":[1]}'), undefined);
  });

  it('reads a plain finish reason, usage and the model as the full classifier does', () => {
    for (const payload of [
      '{"choices":[{"delta":{}, "finish_reason":"stop"}]}',
      '{"choices":[{"text":"","index":0,"finish_reason":"length"}],"model":"m"}',
      '{"model":"llama","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop","stop_reason":null}]}',
      '{"choices":[{"delta":{"content":"a"},"finish_reason":null},{"delta":{},"finish_reason":"length"}]}',
      '{"choices":[{"delta":{},"finish_reason":"length"},{"delta":{},"finish_reason":""}]}',
      `{"choices":[{"delta":{},"finish_reason":"${'x'.repeat(80)}"}]}`,
      '{"id":"c","model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":128,"total_tokens":140,"prompt_tokens_details":{"cached_tokens":0}}}',
      '{"choices":[],"usage":{"input_tokens":3,"output_tokens":null}}',
      // The usage's details (cached and reasoning tokens), in each provider's spelling.
      '{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":339,"completion_tokens":83,"total_tokens":422,"prompt_tokens_details":{"cached_tokens":320},"completion_tokens_details":{"reasoning_tokens":39},"prompt_cache_hit_tokens":320,"prompt_cache_miss_tokens":19}}',
      '{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"prompt_cache_hit_tokens":4,"prompt_cache_miss_tokens":5}}',
      '{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":null,"audio_tokens":0}}}',
      '{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"completion_tokens_details":{"audio_tokens":0,"reasoning_tokens":2}}}',
      '{"choices":[],"usage":{"input_tokens":9,"output_tokens":3,"input_tokens_details":{},"output_tokens_details":{"reasoning_tokens":0}}}',
      '{"choices":[],"usage":{"prompt_tokens":0}}',
      '{"choices":[],"usage":{"total_tokens":5}}',
      '{"choices":[],"usage":"n/a","model":""}',
      '{"model":"模型","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":7}}',
    ]) {
      const fast = skim(payload);
      assert.notEqual(fast, undefined, payload);
      const full = classifyEvent(payload);
      if (typeof fast === 'boolean') assert.deepEqual([fast, full.usage, full.finishReason], [full.token, undefined, undefined], payload);
      else assert.deepEqual(fast, full, payload);
    }
  });

  it('agrees with the full classifier on random chunks whenever it decides', () => {
    const random = seededRandom(11);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const values = [
      '""',
      '" "',
      '"x"',
      '"\\"}{[\\\\"',
      'null',
      '[]',
      '[{"index":0,"function":{"arguments":"}"}}]',
      '{}',
      '{"data":"AA"}',
      '0',
      'true',
      '"\u00e9\u{1F680}"',
    ];
    const keys = ['role', 'content', 'reasoning_content', 'reasoning', 'tool_calls', 'refusal', 'audio', 'function_call', 'other', 'delta'];
    let decided = 0;
    for (let i = 0; i < 5000; i++) {
      // Engines never repeat a key in one object: neither do these.
      const chosen = [...new Set(Array.from({ length: Math.floor(random() * 4) }, () => pick(keys)))];
      const members = chosen.map((key) => `${pick(['', ' '])}"${key}":${pick(['', ' '])}${pick(values)}`);
      const delta = `{${members.join(',')}}`;
      const finish = random() < 0.2 ? pick(['"stop"', '"length"', '"tool_calls"', '""', '1', '"st\\"op"', '"é"']) : 'null';
      const choice =
        random() < 0.15
          ? `{"index":0,"text":${pick(values)},"finish_reason":${finish}}`
          : `{"index":0,"delta":${random() < 0.05 ? 'null' : delta},"finish_reason":${finish}}`;
      const choices = random() < 0.2 ? `[${choice},${choice}]` : `[${choice}]`;
      const count = () => pick(['3', '0', '17', 'null', '"4"', '1.5', '-2', '2e1', '{}']);
      const usage = `{${pick(['prompt_tokens', 'input_tokens', 'total_tokens'])}:${count()},${pick(['completion_tokens', 'output_tokens', 'x'])}:${count()}}`
        .replace(/\{(\w+):/, '{"$1":')
        .replace(/,(\w+):/, ',"$1":');
      const details = pick([
        '',
        ',"prompt_tokens_details":{"cached_tokens":' + count() + '}',
        ',"completion_tokens_details":{"audio_tokens":0,"reasoning_tokens":' + count() + '}',
        ',"prompt_cache_hit_tokens":' + count(),
        ',"prompt_tokens_details":null',
      ]);
      const detailed = usage.slice(0, -1) + details + '}';
      const extra = pick([
        '',
        ',"usage":null',
        `,"usage":${usage}`,
        `,"usage":${detailed}`,
        ',"usage":{}',
        ',"usage":7',
        ',"model":"m\\"x"',
        ',"model":"m"',
        ',"model":""',
        ',"model":3',
        ',"error":null',
      ]);
      const payload = `{"id":"c","choices":${choices}${extra}}`;
      const fast = skim(payload);
      if (fast === undefined) continue;
      decided++;
      const full = classifyEvent(payload);
      if (typeof fast === 'boolean') {
        assert.equal(fast, full.token, payload);
        assert.equal(full.reasoning, undefined, payload);
        // Deciding alone must lose nothing the full classifier would have read.
        assert.deepEqual([full.usage, full.finishReason, full.error], [undefined, undefined, false], payload);
      } else assert.deepEqual(fast, full, payload);
    }
    assert.ok(decided > 2500, `decided ${decided} of 5000`);
  });

  const chat = (r: { api: string }) => r.api === 'chat' || r.api === 'completions';
  it('has the real recorded chat streams among the recordings below', { skip: realStreamsSkip }, () => {
    assertRealStreamsIn(realStreamCorpus(chat), chat);
  });

  it('takes the fast path for the token, finish and usage events of the recorded chat streams', () => {
    const streams = [...ownStreams().map((f) => f.bytes), ...realStreamCorpus(chat)];
    let tokens = 0;
    let fast = 0;
    let reporting = 0;
    let reportingFast = 0;
    for (const bytes of streams) {
      for (const block of sseBlocks(bytes)) {
        const text = block.bytes.toString().trim();
        if (!text.startsWith('data: {') || text.includes('\n')) continue;
        const payload = text.slice(6);
        const full = classifyEvent(payload);
        if (full.usage !== undefined || full.finishReason !== undefined) {
          // A stream's last chunks (finish reason, usage): read here too, the same as in full.
          reporting++;
          const fast = skim(payload);
          if (fast !== undefined && typeof fast !== 'boolean') {
            assert.deepEqual(fast, full, payload);
            reportingFast++;
          }
          continue;
        }
        if (!full.token) continue;
        tokens++;
        if (skim(payload) === true) fast++;
      }
    }
    assert.ok(fast / tokens > 0.9, `${fast} of ${tokens} token events skimmed`);
    assert.ok(reporting > 0 && reportingFast === reporting, `${reportingFast} of ${reporting} finish/usage events read without JSON.parse`);
  });
});

describe('usage that lies (issue 49), on the skim path and the full one', () => {
  it('is cut or refused alike whether the skimmer reads the event or defers it', () => {
    const tokenEvent = 'data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}\n\n';
    for (const [usage, expected] of [
      [
        '{"prompt_tokens":4,"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":9}}',
        ['upstream', 4, 3, 3, undefined, ['reasoning_over_completion']],
      ],
      ['{"prompt_tokens":4,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":10}}', ['upstream', 4, 3, undefined, 4, ['cached_over_prompt']]],
      ['{"prompt_tokens":4,"completion_tokens":3,"prompt_cache_hit_tokens":5}', ['upstream', 4, 3, undefined, 4, ['cached_over_prompt']]],
      [`{"prompt_tokens":${2 ** 31},"completion_tokens":3}`, ['fallback', 0, 0, undefined, undefined, ['too_large']]],
      [`{"prompt_tokens":4,"completion_tokens":${2 ** 53 - 1}}`, ['fallback', 0, 0, undefined, undefined, ['too_large']]],
      [`{"prompt_tokens":${2 ** 31 - 1},"completion_tokens":3}`, ['upstream', 2 ** 31 - 1, 3, undefined, undefined, undefined]],
    ] as const) {
      const payload = `{"choices":[],"usage":${usage}}`;
      // One data line: the skimmer's shape. The same JSON over two data lines: read in full.
      const skimmed = `data: ${payload}\n\n`;
      const full = `data: {"choices":[],\ndata: "usage":${usage}}\n\n`;
      const [a, b] = [skimmed, full].map((event) => {
        const { sample: s } = runTap({ api: 'chat', chunks: [Buffer.from(tokenEvent + tokenEvent + event + 'data: [DONE]\n\n')] });
        return [s.usageSource, s.promptTokens, s.completionTokens, s.reasoningTokens, s.cachedPromptTokens, s.usageRejections];
      });
      assert.deepEqual(a, expected, `skimmed: ${usage}`);
      assert.deepEqual(b, expected, `read in full: ${usage}`);
    }
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
      // A reasoning model's stream: runs of reasoning_content deltas, then content ones (each a template in turn).
      const key = Math.floor(i / 50) % 2 === 0 ? 'reasoning_content' : 'content';
      const payload =
        shape < 0.8
          ? `{"id":"c1","created":1,"choices":[{"index":0,"delta":{"${key}":${text}},"finish_reason":null}]}`
          : shape < 0.9
            ? `{"id":"c1","created":2,"choices":[{"index":0,"delta":{"${key}":${text}},"finish_reason":null}]}`
            : `{"id":"c1","created":1,"choices":[{"index":0,"delta":{"${key}":${text}},"finish_reason":null}],"usage":{"prompt_tokens":1}}`;
      const bytes = Buffer.from(`data: ${payload}`);
      const fast = skimmer(bytes, 6, bytes.length);
      if (typeof fast === 'boolean') {
        assert.equal(fast, classifyEvent(payload).token, payload);
        assert.equal(classifyEvent(payload).reasoning, undefined, payload);
      } else if (fast !== undefined) assert.deepEqual(fast, classifyEvent(payload), payload);
      if (fast !== undefined && shape < 0.8) templated++;
    }
    assert.ok(templated > 2000);
    // A chunk that looks like the template but is not one string in the middle: walked in full.
    const tricky = Buffer.from('{"id":"c1","created":1,"choices":[{"index":0,"delta":{"content":"a","refusal":"b"},"finish_reason":null}]}');
    assert.equal(skimmer(tricky, 0, tricky.length), true);
    // The template's last chunk, with its finish reason: read, and never taken for the template.
    const last = '{"id":"c1","created":1,"choices":[{"index":0,"delta":{"content":"."},"finish_reason":"stop"}]}';
    assert.deepEqual(skimmer(Buffer.from(last), 0, Buffer.byteLength(last)), classifyEvent(last));
    const again = Buffer.from(last.replace('"."', '"!"'));
    assert.deepEqual(skimmer(again, 0, again.length), classifyEvent(again.toString()), 'still read in full');
  });
});
