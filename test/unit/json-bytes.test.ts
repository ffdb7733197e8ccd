// The one JSON byte module (src/json-bytes/) against JSON.parse, and through both of its readers:
// random JSON values (escapes, runs of backslashes and quotes, strings past the loop's reach,
// nesting, numbers in every form) are crossed whole and cut at every byte where the value ends
// JSON.parse says it ends; a count and a number read as JSON.parse reads them; and the same
// values, placed in a request body and in a chat chunk, are skipped alike by the request body
// scanner (at any chunking) and by the response skimmer, whose answers agree with JSON.parse's.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { skipSpace } from '../../src/json-bytes/bytes.ts';
import { jsonNumber, NOT_PLAIN, plainInteger } from '../../src/json-bytes/scalars.ts';
import { ESCAPED_AT_END, isString, stringEnd } from '../../src/json-bytes/strings.ts';
import { NestedValue, primitiveEnd, skipValue } from '../../src/json-bytes/values.ts';
import { classifyEvent } from '../../src/measure/openai-events.ts';
import { createSkimmer, skimTokenEvent } from '../../src/measure/skim-event.ts';
import { createBodyScanner, scanWhole } from '../../src/stream-tap/request-body-scanner.ts';
import { rechunk, seededRandom } from '../helpers/random.ts';

const PIECES = ['a', ' ', '"', '\\', '\\"', '\\\\', '\\\\"', '\\n', '\\u00e9', '\u00e9', '\u{1F680}', '}', ']', '{', '[', ',', ':', 'x'.repeat(70)];

/** A random JSON value's text: strings of escapes and quotes (some past 64 bytes), nesting, numbers, literals, white space. */
function randomValue(random: () => number, depth = 0): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const space = () => pick(['', '', ' ', '\n  ', '\t']);
  const kind = Math.floor(random() * (depth < 3 ? 6 : 3));
  if (kind === 0) return JSON.stringify(Array.from({ length: Math.floor(random() * 6) }, () => pick(PIECES)).join(''));
  if (kind === 1) return pick(['0', '7', '-3', '12.5', '1e3', '-0.25E-2', '123456789012345', '1234567890123456', 'true', 'false', 'null']);
  if (kind === 2) return `"${pick(['', 'plain', 'x'.repeat(100), `${'y'.repeat(63)}\\"z`, `${'w'.repeat(64)}\\\\`])}"`;
  const n = Math.floor(random() * 4);
  const items = Array.from(
    { length: n },
    () => `${space()}${kind === 3 ? `${JSON.stringify(pick(PIECES))}${space()}:${space()}` : ''}${randomValue(random, depth + 1)}${space()}`,
  );
  return kind === 3 ? `{${items.join(',')}}` : `[${items.join(',')}]`;
}

function* randomValues(seed: number, count: number): Generator<{ text: string; bytes: Buffer }> {
  const random = seededRandom(seed);
  for (let i = 0; i < count; i++) {
    const text = randomValue(random);
    JSON.parse(text); // the generator writes JSON only
    yield { text, bytes: Buffer.from(text) };
  }
}

describe('JSON byte module (src/json-bytes/) against JSON.parse', () => {
  it('ends every value where JSON.parse ends it, whole and with bytes after it', () => {
    for (const { text, bytes } of randomValues(1, 3000)) {
      assert.equal(skipValue(bytes, 0, bytes.length), bytes.length, text);
      const padded = Buffer.from(`${text},"k":"v"}`);
      assert.equal(skipValue(padded, 0, padded.length), bytes.length, text);
      if (bytes[0] === 0x22 || bytes[0] === 0x7b || bytes[0] === 0x5b) assert.ok(skipValue(bytes, 0, bytes.length - 1) < 0, `${text}: cut short, not closed`);
    }
  });

  it('crosses a nested value and finds a string end cut in two at every byte', () => {
    let nested = 0;
    let strings = 0;
    for (const { text, bytes } of randomValues(2, 600)) {
      const n = bytes.length;
      for (let at = 1; at <= n; at++) {
        if (bytes[0] === 0x7b || bytes[0] === 0x5b) {
          const value = new NestedValue();
          value.open();
          const first = value.cross(bytes.subarray(0, at), 1, at);
          const past = first >= 0 ? first : value.cross(bytes.subarray(at), 0, n - at) + at;
          assert.equal(past, n, `${text} cut at ${at}`);
          nested++;
        } else if (bytes[0] === 0x22) {
          // The string's text from byte 1, cut at `at`: the closing quote in the second piece.
          const q = stringEnd(bytes, 1, at, false);
          if (at < n) {
            assert.ok(q < 0, `${text} cut at ${at}: no quote yet`);
            const rest = stringEnd(bytes.subarray(at), 0, n - at, q === ESCAPED_AT_END);
            assert.equal(rest + at, n - 1, `${text} cut at ${at}`);
          } else assert.equal(q, n - 1, text);
          strings++;
        }
      }
      if (bytes[0] === 0x22) assert.ok(isString(bytes, 0, n), text);
    }
    assert.ok(nested > 1000 && strings > 1000, `${nested} nested, ${strings} string cuts`);
  });

  it('reads a plain count and a number as JSON.parse reads them', () => {
    const random = seededRandom(3);
    const digits = () => Array.from({ length: Math.floor(random() * 18) }, () => Math.floor(random() * 10)).join('');
    for (let i = 0; i < 5000; i++) {
      const text = `${random() < 0.2 ? '-' : ''}${digits()}${random() < 0.2 ? `.${digits()}` : ''}${random() < 0.1 ? `e${digits()}` : ''}`;
      const b = Buffer.from(text);
      const valid = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/.test(text);
      const parsed = valid ? (JSON.parse(text) as number) : undefined;
      const plain = /^(?:0|[1-9]\d*)$/.test(text) && parsed! <= 999_999_999_999_999;
      assert.equal(plainInteger(b, 0, b.length, 999_999_999_999_999), plain ? parsed : NOT_PLAIN, text);
      assert.equal(jsonNumber(text), parsed !== undefined && Number.isFinite(parsed) ? parsed : undefined, text);
      assert.equal(primitiveEnd(b, 0, b.length), b.length, text);
    }
    assert.equal(skipSpace(Buffer.from(' \t\r\n1'), 0, 5), 4);
  });
});

describe('JSON byte module: both readers skip the same values', () => {
  it('the request body scanner reads the keys around any value as JSON.parse does, at any chunking', () => {
    let seed = 100;
    for (const { text } of randomValues(4, 1500)) {
      const body = Buffer.from(`{"messages":${text},"model":"m","tools":${text},"stream":true,"max_tokens":7,"n":${text}}`);
      const doc = JSON.parse(body.toString()) as { n: unknown };
      const n = typeof doc.n === 'number' && Number.isInteger(doc.n) && doc.n >= 1 && /^[1-9]\d*$/.test(text) && doc.n <= 0x7fffffff ? doc.n : undefined;
      const expected = { ok: true, model: 'm', stream: true, maxTokens: 7, n };
      const pick = (r: ReturnType<typeof scanWhole>) => (r.ok ? { ok: r.ok, model: r.model, stream: r.stream, maxTokens: r.maxTokens, n: r.n } : r);
      assert.deepEqual(pick(scanWhole(body)), expected, text);
      const scanner = createBodyScanner();
      for (const chunk of rechunk(body, seededRandom(seed++), 7)) scanner.feed(chunk);
      assert.deepEqual(pick(scanner.end()), expected, `${text} (seed ${seed - 1})`);
    }
  });

  it('the response skimmer skips any value and agrees with the full classifier', () => {
    for (const { text } of randomValues(5, 1500)) {
      for (const content of ['', 'hi']) {
        const chunk = `{"id":"c","extra":${text},"choices":[{"index":0,"logprobs":${text},"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}]}`;
        const full = classifyEvent(chunk);
        assert.equal(skimTokenEvent(Buffer.from(chunk)), full.token, chunk);
        // And the template of a stream of them (createSkimmer) agrees chunk after chunk.
        const skimmer = createSkimmer();
        const b = Buffer.from(chunk);
        assert.equal(skimmer(b, 0, b.length), full.token, chunk);
        assert.equal(skimmer(b, 0, b.length), full.token, chunk);
      }
    }
  });
});
