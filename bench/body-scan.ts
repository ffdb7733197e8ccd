// npm run bench:body-scan: what reading a request body for its labels costs (the scanner of
// stream-tap/request-body-scanner.ts, which every chat or completions body goes through before it
// is sent upstream), in µs per body, for four shapes of body of 10 to 40 KB: a prompt of prose
// with quotes and newlines, retrieved passages (long text, few escapes), code (quotes escaped
// every few bytes), and a tools array with many short strings. BENCH_COMPARE=<another checkout>
// (several, comma-separated) runs that checkout's scanner beside this one's, in the same process,
// interleaved round by round: the figures are CPU time, the median of 15 rounds of 200 scans, and
// each build's ratio to this one's, so a busy machine's noise is mostly left out.
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cpuMicros, interleaved } from './interleaved.ts';

type Scan = (body: Uint8Array) => { ok: boolean };

const prose = 'Measure the hop, not the model: a "quoted" phrase, a list,\n- and an item.\n'.repeat(450);
const passages =
  `${'Retrieved passage. The committee met on Tuesday and agreed to the proposal; members noted the budget, the schedule and the risks. '.repeat(6)}\n\n`.repeat(
    40,
  );
const code = 'def f(x):\n    return {"key": x, "other": [1, 2, "three"], \'q\': "\\\\n"}\n'.repeat(400);
const tools = Array.from({ length: 40 }, (_, i) => ({
  type: 'function',
  function: {
    name: `tool_${i}`,
    description: 'Look a thing up by its name and return it.',
    parameters: { type: 'object', properties: { name: { type: 'string', description: 'the name' }, limit: { type: 'integer' } }, required: ['name'] },
  },
}));
const turns = Array.from({ length: 30 }, (_, i) => ({ role: i % 2 === 1 ? 'assistant' : 'user', content: `turn ${i}: a short message` }));

const BODIES: ReadonlyArray<readonly [string, Buffer]> = [
  ['prose prompt', { model: 'm', stream: true, messages: [{ role: 'user', content: prose }] }],
  [
    'retrieved passages',
    {
      model: 'm',
      stream: true,
      messages: [
        { role: 'system', content: passages },
        { role: 'user', content: 'Summarise.' },
      ],
    },
  ],
  ['code', { model: 'm', stream: true, messages: [{ role: 'user', content: code }] }],
  ['tools and short turns', { model: 'm', stream: true, tools, messages: turns }],
].map(([name, doc]) => [name as string, Buffer.from(JSON.stringify(doc))] as const);

/** One round of 200 scans, in µs of CPU per body. */
function microsPerBody(scan: Scan, body: Buffer): number {
  return (
    cpuMicros(() => {
      for (let i = 0; i < 200; i++) if (!scan(body).ok) throw new Error('the scanner refused a valid body');
    }) / 200
  );
}

const ROUNDS = 15;
const here = fileURLToPath(new URL('..', import.meta.url));
const roots = [here, ...(process.env.BENCH_COMPARE?.split(',') ?? [])];
const scanners: Array<[string, Scan]> = [];
for (const root of roots) {
  const module = (await import(pathToFileURL(join(root, 'src/stream-tap/request-body-scanner.ts')).href)) as { scanWhole: Scan };
  scanners.push([root === here ? 'this build' : root, module.scanWhole]);
}

process.stdout.write(
  `µs of CPU per body (median of ${ROUNDS} rounds of 200 scans, the builds interleaved; ratio: each round's to this build's, median)\n\n` +
    `| body | bytes | ${scanners.map(([name]) => name).join(' | ')} |${' ratio |'.repeat(scanners.length - 1)}\n|---|---|${'---|'.repeat(scanners.length * 2 - 1)}\n`,
);
for (const [name, body] of BODIES) {
  const { medians, ratios } = interleaved(
    scanners.map(
      ([, scan]) =>
        () =>
          microsPerBody(scan, body),
    ),
    ROUNDS,
  );
  process.stdout.write(
    `| ${name} | ${body.length.toLocaleString('en-US')} | ${medians.map((t) => t.toFixed(1)).join(' | ')} |${ratios.map((x) => ` ${x.toFixed(2)} |`).join('')}\n`,
  );
}
