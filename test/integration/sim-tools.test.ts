// The simulator answers a chat completion that offers `tools` with a function call as OpenAI
// does (streamed in fragments: the name first, then the arguments a few characters at a time),
// read back through infermeter with the openai SDK, whose stream helper assembles the fragments;
// infermeter counts the call's deltas as output.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import OpenAI from 'openai';
import { startSimServer } from '../../src/sim/model-server.ts';
import { nextFinished, startProxy } from '../helpers/proxy-harness.ts';

const TOOLS = [
  { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } } },
  {
    type: 'function' as const,
    function: {
      name: 'get_weather',
      description: 'Current weather',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer' } },
        required: ['city'],
      },
    },
  },
];
const messages = [{ role: 'user' as const, content: 'Weather in Paris?' }];

describe('the simulator with tools', () => {
  it('streams a tool call in fragments that the openai SDK assembles, and infermeter measures', async (t) => {
    const sim = await startSimServer({ ttftMs: 5, interTokenMs: 1, models: ['m'] });
    t.after(() => sim.close());
    const app = await startProxy(t, sim.url);
    const openai = new OpenAI({ baseURL: `${app.dataUrl}/v1`, apiKey: 'sk-none', maxRetries: 0 });

    const finished = nextFinished(app, 1);
    const stream = await openai.chat.completions.create({
      model: 'm',
      messages,
      tools: TOOLS,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    const deltas = chunks.flatMap((c) => c.choices.flatMap((ch) => ch.delta.tool_calls ?? []));
    assert.equal(deltas[0]!.id?.startsWith('call_'), true);
    assert.equal(deltas[0]!.function?.name, 'get_weather');
    assert.equal(deltas[0]!.function?.arguments, '');
    const fragments = deltas.slice(1).map((d) => d.function?.arguments ?? '');
    assert.ok(fragments.length > 3 && fragments.every((f) => f.length > 0 && f.length <= 4), `fragments: ${JSON.stringify(fragments)}`);
    assert.ok(
      deltas.slice(1).every((d) => d.index === 0 && d.id === undefined && d.function?.name === undefined),
      'later deltas carry only arguments',
    );
    assert.deepEqual(JSON.parse(fragments.join('')), { city: 'sim', unit: 'celsius', days: 1 });
    assert.equal(
      chunks.find((c) => c.choices[0]?.finish_reason !== null && c.choices[0]?.finish_reason !== undefined)?.choices[0]?.finish_reason,
      'tool_calls',
    );
    const usage = chunks.at(-1)!.usage!;
    assert.equal(usage.completion_tokens, fragments.length + 1);

    const [sample] = await finished;
    assert.equal(sample!.outcome, 'success');
    assert.equal(sample!.finishReason, 'tool_calls');
    assert.equal(sample!.tokenEvents, fragments.length + 1, 'every delta of the call is output');
    assert.equal(sample!.completionTokens, usage.completion_tokens);
    assert.ok(sample!.ttft !== undefined && sample!.ttft <= sample!.lastToken!, `TTFT ${sample!.ttft} <= last token ${sample!.lastToken}`);

    // The SDK's own helper assembles the same call.
    const runner = openai.chat.completions.stream({ model: 'm', messages, tools: TOOLS });
    const final = await runner.finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls![0]!;
    assert.equal(call.type === 'function' && call.function.name, 'get_time', 'without tool_choice: the first tool');
    assert.deepEqual(call.type === 'function' && JSON.parse(call.function.arguments), { zone: 'sim' });
  });

  it('answers a non-streamed request with the whole call, text with tool_choice none, and cuts a call at max_tokens', async (t) => {
    const sim = await startSimServer({ ttftMs: 1, interTokenMs: 1, models: ['m'] });
    t.after(() => sim.close());
    const openai = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: 'sk-none', maxRetries: 0 });
    const whole = await openai.chat.completions.create({ model: 'm', messages, tools: TOOLS, tool_choice: 'required' });
    assert.equal(whole.choices[0]!.finish_reason, 'tool_calls');
    assert.equal(whole.choices[0]!.message.content, null);
    const call = whole.choices[0]!.message.tool_calls![0]!;
    assert.deepEqual(call.type === 'function' && [call.function.name, JSON.parse(call.function.arguments)], ['get_time', { zone: 'sim' }]);
    const none = await openai.chat.completions.create({ model: 'm', messages, tools: TOOLS, tool_choice: 'none', max_tokens: 3 });
    assert.equal(none.choices[0]!.message.tool_calls, undefined);
    assert.equal(typeof none.choices[0]!.message.content, 'string');
    const cut = await openai.chat.completions.create({ model: 'm', messages, tools: TOOLS, max_tokens: 3 });
    assert.equal(cut.choices[0]!.finish_reason, 'length');
    assert.equal(cut.usage!.completion_tokens, 3);
    assert.equal(
      cut.choices[0]!.message.tool_calls![0]!.type === 'function' && cut.choices[0]!.message.tool_calls![0]!.function.arguments,
      '{"zone":',
      'two fragments of the arguments',
    );
  });
});
