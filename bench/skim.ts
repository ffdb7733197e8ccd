// node bench/skim.ts: what the response skimmer's full walk costs (measure/skim-event.ts's
// skimTokenEvent, which reads every event a stream's template does not match: its first token
// chunk, a finish chunk, the usage-only chunk, llama.cpp's timings), in ns of CPU per event, for five
// shapes of event. BENCH_COMPARE=<another checkout> (several, comma-separated) runs that
// checkout's skimmer beside this one's in the same process, interleaved round by round; the
// figures are the median of 15 rounds of 20,000 walks, with each build's ratio to this one's.
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cpuMicros, interleaved } from './interleaved.ts';

type Skim = (b: Uint8Array, start?: number, end?: number) => unknown;

const chunk = (choice: object, more: object = {}) =>
  Buffer.from(
    JSON.stringify({
      id: 'chatcmpl-0123456789abcdef',
      object: 'chat.completion.chunk',
      created: 1700000000,
      model: 'Qwen/Qwen2.5-7B-Instruct',
      choices: [choice],
      ...more,
    }),
  );
const EVENTS: ReadonlyArray<readonly [string, Buffer]> = [
  ['token (content)', chunk({ index: 0, delta: { content: ' the' }, logprobs: null, finish_reason: null })],
  ['first chunk (role, empty content)', chunk({ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null })],
  [
    'tool call',
    chunk({ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } }] } }),
  ],
  [
    'finish + usage',
    chunk(
      { index: 0, delta: {}, finish_reason: 'stop' },
      { usage: { prompt_tokens: 1234, completion_tokens: 56, total_tokens: 1290, prompt_tokens_details: { cached_tokens: 512 } } },
    ),
  ],
  [
    'llama.cpp timings',
    chunk({ index: 0, delta: {}, finish_reason: 'stop' }, { timings: { prompt_n: 12, prompt_ms: 31.5, predicted_n: 100, predicted_ms: 812.25, cache_n: 4 } }),
  ],
];

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
const WALKS = 20_000;
const here = fileURLToPath(new URL('..', import.meta.url));
const roots = [here, ...(process.env.BENCH_COMPARE?.split(',') ?? [])];
const skims: Array<[string, Skim]> = [];
for (const root of roots) {
  const module = (await import(pathToFileURL(join(root, 'src/measure/skim-event.ts')).href)) as { skimTokenEvent: Skim };
  skims.push([root === here ? 'this build' : root, module.skimTokenEvent]);
}

let sink = 0;
function nsPerWalk(skim: Skim, event: Buffer): number {
  return (
    (cpuMicros(() => {
      for (let i = 0; i < WALKS; i++) if (skim(event, 0, event.length) !== undefined) sink++;
    }) *
      1000) /
    WALKS
  );
}

process.stdout.write(
  `ns per event (median of ${ROUNDS} rounds of ${WALKS.toLocaleString('en-US')} walks; ratio: each round's to this build's, median)\n\n` +
    `| event | bytes | ${skims.map(([name]) => name).join(' | ')} |${skims.length > 1 ? ' ratio |'.repeat(skims.length - 1) : ''}\n` +
    `|---|---|${'---|'.repeat(skims.length * 2 - 1)}\n`,
);
for (const [name, event] of EVENTS) {
  if (skims.some(([, skim]) => skim(event) === undefined)) throw new Error(`${name}: a skimmer deferred it`);
  const { medians, ratios } = interleaved(
    skims.map(
      ([, skim]) =>
        () =>
          nsPerWalk(skim, event),
    ),
    ROUNDS,
  );
  process.stdout.write(`| ${name} | ${event.length} | ${medians.map((t) => t.toFixed(0)).join(' | ')} |${ratios.map((x) => ` ${x.toFixed(2)} |`).join('')}\n`);
}
if (sink === 0) throw new Error('nothing was read');
