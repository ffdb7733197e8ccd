// The strict object reader (src/json-bytes/strict-object.ts) against JSON.parse: random JSON
// objects and the same bytes mutated (a byte changed, dropped or doubled, the text cut short,
// a byte from JSON's edges put in) are judged valid exactly when JSON.parse takes them, and the
// values of the keys asked for begin where JSON.parse's last member of that key says. Then the
// usage strip, whose single-line usage chunks it decides, against the JSON.parse reading it
// replaced, over the same kinds of mutation.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { asciiBytes } from '../../src/json-bytes/bytes.ts';
import { NOT_JSON, OBJECT, objectMembers, UNREADABLE } from '../../src/json-bytes/strict-object.ts';
import { createUsageStrip } from '../../src/stream-tap/usage-strip.ts';
import { seededRandom } from '../helpers/random.ts';

type Pick = <T>(xs: readonly T[]) => T;
const picker =
  (random: () => number): Pick =>
  (xs) =>
    xs[Math.floor(random() * xs.length)]!;

const NUMBERS = ['0', '-0', '7', '-3', '12.5', '1e3', '1E+3', '-0.25E-2', '123456789012345678901234567890', '0.0', '1.5e-7'];
const STRINGS = ['', 'plain', 'é', '🚀', '\\"', '\\\\', '\\/', '\\b\\f\\n\\r\\t', '\\u00e9', '\\uD83D\\uDE80', '\\uDEAD', '[]{}:,', 'x'.repeat(70)];
const KEYS = ['choices', 'usage', 'timings', 'id', 'model', 'usage_x', 'Usage', 'choice'];

function randomValue(random: () => number, depth: number): string {
  const pick = picker(random);
  const space = () => pick(['', '', ' ', '\n', '\t ', '\r\n']);
  const kind = Math.floor(random() * (depth < 4 ? 7 : 4));
  if (kind === 0) return pick(NUMBERS);
  if (kind === 1) return pick(['true', 'false', 'null']);
  if (kind === 2 || kind === 3) return `"${pick(STRINGS)}${pick(STRINGS)}"`;
  const n = Math.floor(random() * 4);
  if (kind === 4 || kind === 5)
    return `{${Array.from({ length: n }, () => `${space()}"${pick(KEYS)}"${space()}:${space()}${randomValue(random, depth + 1)}${space()}`).join(',')}}`;
  return `[${Array.from({ length: n }, () => `${space()}${randomValue(random, depth + 1)}${space()}`).join(',')}]`;
}

function randomObject(random: () => number): string {
  const pick = picker(random);
  const members = Array.from({ length: Math.floor(random() * 6) }, () => {
    const key = pick(KEYS);
    const value =
      key === 'choices'
        ? pick(['[]', '[ ]', '[{}]', 'null', '[\n]'])
        : key === 'usage' || key === 'timings'
          ? pick(['{"prompt_tokens":1}', '{}', '[]', 'null', '3'])
          : randomValue(random, 1);
    return `${pick(['', ' '])}"${key}"${pick(['', ' '])}:${pick(['', ' ', '\t'])}${value}`;
  });
  return `${pick(['', ' '])}{${members.join(',')}}${pick(['', ' ', '\t'])}`;
}

/** The bytes changed the ways a broken upstream changes them. */
function mutate(bytes: Buffer, random: () => number): Buffer {
  const pick = picker(random);
  const at = Math.floor(random() * bytes.length);
  const byte = pick([0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x20, 0x0a, 0x00, 0x1f, 0x7f, 0x30, 0x2d, 0x2e, 0x65, 0x75, 0x41, 0xc3, 0xff, 0xef]);
  const kind = Math.floor(random() * 4);
  if (kind === 0) return Buffer.concat([bytes.subarray(0, at), Buffer.from([byte]), bytes.subarray(at + 1)]);
  if (kind === 1) return Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 1)]);
  if (kind === 2) return Buffer.concat([bytes.subarray(0, at), Buffer.from([byte]), bytes.subarray(at)]);
  return bytes.subarray(0, at);
}

const ASKED = ['choices', 'usage', 'timings'];
const asked = ASKED.map(asciiBytes);

/** JSON.parse's answer: whether the text is an object, and each asked key's last value's text, re-serialized. */
function parsed(text: string): { object: boolean; values: Array<string | undefined> } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { object: false, values: [] };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { object: false, values: [] };
  const o = value as Record<string, unknown>;
  return { object: true, values: ASKED.map((k) => (Object.hasOwn(o, k) ? JSON.stringify(o[k]) : undefined)) };
}

function check(bytes: Buffer, where: string): number {
  const starts = new Int32Array(asked.length);
  const got = objectMembers(bytes, 0, bytes.length, asked, starts);
  if (got === UNREADABLE) return got;
  const want = parsed(bytes.toString('utf8'));
  assert.equal(got === OBJECT, want.object, `${where}: ${JSON.stringify(bytes.toString('latin1'))}`);
  if (got === OBJECT) {
    for (let k = 0; k < asked.length; k++) {
      const start = starts[k]!;
      if (want.values[k] === undefined) assert.equal(start, -1, `${where}: ${ASKED[k]}`);
      else {
        // The value that begins there, as JSON.parse reads it alone, is the member's.
        const rest = bytes.toString('utf8', start);
        let alone: unknown;
        for (let end = rest.length; end > 0; end--) {
          try {
            alone = JSON.parse(rest.slice(0, end));
            break;
          } catch {}
        }
        assert.equal(JSON.stringify(alone), want.values[k], `${where}: ${ASKED[k]} at ${start}`);
      }
    }
  } else assert.equal(got, NOT_JSON);
  return got;
}

describe('strict object reader against JSON.parse', () => {
  it('judges random objects and their mutations as JSON.parse does, and finds the last member of each key asked for', () => {
    const random = seededRandom(54);
    const seen = { [OBJECT]: 0, [NOT_JSON]: 0, [UNREADABLE]: 0 } as Record<number, number>;
    for (let i = 0; i < 4000; i++) {
      let bytes: Buffer = Buffer.from(randomObject(random));
      seen[check(bytes, `case ${i}`)]!++;
      for (let m = 0; m < 3; m++) {
        bytes = mutate(bytes, random);
        seen[check(bytes, `case ${i}, mutation ${m}`)]!++;
      }
    }
    // Both answers given many times, and the escape in a key (left to JSON.parse) met.
    assert.ok(seen[OBJECT]! > 3000 && seen[NOT_JSON]! > 3000, JSON.stringify(seen));
  });

  it('leaves an escaped key and deep nesting to JSON.parse, and takes the values JSON.parse takes', () => {
    const starts = new Int32Array(asked.length);
    const read = (text: string) => objectMembers(Buffer.from(text), 0, Buffer.byteLength(text), asked, starts);
    assert.equal(read('{"\\u0075sage":{}}'), UNREADABLE);
    assert.equal(read(`{"a":${'['.repeat(100)}${']'.repeat(100)}}`), UNREADABLE);
    assert.equal(read(`{"a":${'['.repeat(63)}${']'.repeat(63)}}`), OBJECT);
    for (const bad of [
      '{"a":01}',
      '{"a":1.}',
      '{"a":.5}',
      '{"a":+1}',
      '{"a":1e}',
      '{"a":"\\x"}',
      '{"a":"\\u12"}',
      '{"a":"\t"}',
      '{"a":tru}',
      '{"a":1,}',
      '{,}',
      '{"a" 1}',
      '{"a":1}}',
      '{"a":1} x',
      '\ufeff{}',
      '[]',
      '{"a":[1,]}',
      '{"a":{"b"}}',
    ])
      assert.equal(read(bad), NOT_JSON, bad);
    for (const good of ['{}', ' { } ', '{"a":-0.0e-0}', '{"a":"\u007f\u2028"}', '{"a":[[],{}]}', '{"a":"\\uDEAD"}', '\t\r\n{"a":1}\n'])
      assert.equal(read(good), OBJECT, good);
    // Bytes past `end` are not read, whatever they are: an escape cut there is not finished by them.
    const cut = Buffer.from('{"a":"\\u00e9"}');
    for (let end = 1; end < cut.length; end++) assert.equal(objectMembers(cut, 0, end, asked, starts), NOT_JSON, `cut at ${end}`);
  });
});

/** The usage strip's decision before this reader: JSON.parse of the event's data lines. */
function stripsByParse(event: string): boolean {
  const data: string[] = [];
  for (const line of event.split(/\r\n|\r|\n/)) {
    if (line.startsWith('data:')) data.push(line.slice(line.charCodeAt(5) === 0x20 ? 6 : 5));
    else if (line !== '' && !line.startsWith(':')) return false;
  }
  try {
    const p = JSON.parse(data.join('\n')) as { choices?: unknown; usage?: unknown };
    return Array.isArray(p.choices) && p.choices.length === 0 && typeof p.usage === 'object' && p.usage !== null;
  } catch {
    return false;
  }
}

describe('usage strip on single-line usage chunks', () => {
  it('strips exactly the events JSON.parse reads as usage-only, mutated usage chunks among them', () => {
    const random = seededRandom(55);
    const pick = picker(random);
    let stripped = 0;
    let kept = 0;
    for (let i = 0; i < 3000; i++) {
      const usage = pick(['{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}', '{}', '[]', 'null']);
      const json = `{"id":"c${i}","object":"chat.completion.chunk","choices":${pick(['[]', '[ ]', '[{"index":0,"delta":{}}]'])},"usage":${usage}${pick(['', ',"timings":{"predicted_n":1}'])}}`;
      let bytes: Buffer = Buffer.from(json);
      const mutations = Math.floor(random() * 3);
      for (let m = 0; m < mutations; m++) bytes = mutate(bytes, random);
      // A mutation that put a line end in makes two lines, another path's business: one line here.
      if (bytes.includes(0x0a) || bytes.includes(0x0d)) continue;
      const event = Buffer.concat([Buffer.from(pick(['data:', 'data: ', 'data:  '])), bytes, Buffer.from('\n\n')]);
      const filter = createUsageStrip({ maxEventBytes: 1 << 20, stripped: () => {} });
      const out = Buffer.concat([filter.pass(event), filter.end()].filter((b): b is Buffer => b !== undefined));
      const want = stripsByParse(event.toString('utf8'));
      assert.equal(out.length === 0, want, `case ${i}: ${JSON.stringify(event.toString('latin1'))}`);
      if (want) stripped++;
      else {
        kept++;
        assert.ok(out.equals(event), `case ${i}: kept whole`);
      }
    }
    assert.ok(stripped > 500 && kept > 500, `${stripped} stripped, ${kept} kept`);
  });
});
