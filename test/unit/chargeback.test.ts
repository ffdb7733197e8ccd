// Chargeback's pure parts: the prices file read exactly (decimals into nano-units from their
// digits, the parents' fallback, YAML and JSON alike) and refused naming the key that is wrong;
// a request's tokens by priced kind; a pool's interval split, whose idle line and shares add up
// to the pool's cost to the nano-unit whatever the occupancy.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, ftruncateSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { tokenKinds } from '../../src/chargeback/chargeback.ts';
import { decimalNanos, nanosText } from '../../src/chargeback/decimal.ts';
import { createPoolSplit, type Settled } from '../../src/chargeback/pool-split.ts';
import { parsePrices, parsePricesText, readPricesFile } from '../../src/chargeback/prices-file.ts';
import { seededRandom } from '../helpers/random.ts';

const ISSUE_EXAMPLE = `currency: USD
version: "2026-12"
models:
  - match: "llama-*"          # glob over the model name, first match wins
    per_million_tokens: { prompt: 0.20, cached_prompt: 0.05, completion: 0.60, reasoning: 0.60 }
  - match: "*"
    per_hour: 12.50           # the pool serving these models
`;

describe('prices file', () => {
  it("reads the issue's example exactly, and the same in JSON", () => {
    const read = parsePricesText(ISSUE_EXAMPLE);
    assert.ok(read.ok);
    assert.equal(read.table.currency, 'USD');
    assert.equal(read.table.version, '2026-12');
    assert.deepEqual(read.table.rules[0]!.perMillion, { prompt: 200_000_000n, cached_prompt: 50_000_000n, completion: 600_000_000n, reasoning: 600_000_000n });
    assert.equal(read.table.rules[1]!.perHour, 12_500_000_000n);
    const json = parsePricesText(
      JSON.stringify({ currency: 'EUR', version: 'v1', models: [{ match: 'q*', per_million_tokens: { prompt: '0.29', completion: '1' } }] }),
    );
    assert.ok(json.ok);
    // A kind left out costs as its parent; 0.29 from its digits (0.29 * 1e9 in floats is 290000000.00000006).
    assert.deepEqual(json.table.rules[0]!.perMillion, {
      prompt: 290_000_000n,
      cached_prompt: 290_000_000n,
      completion: 1_000_000_000n,
      reasoning: 1_000_000_000n,
    });
  });

  it('turns decimals into nano-units from their digits, and refuses what has no nano-unit', () => {
    assert.equal(decimalNanos('0.000000001'), 1n);
    assert.equal(decimalNanos('123456789012.123456789'), 123_456_789_012_123_456_789n);
    for (const bad of ['0.0000000001', '-1', '1e3', '0x10', '', '.5', '1.', 'NaN', '1,5']) assert.equal(decimalNanos(bad), undefined, bad);
    assert.equal(nanosText(1_234_500_000n), '1.2345');
    assert.equal(nanosText(7n), '0.000000007');
  });

  it('refuses a FIFO and a file over 1 MiB before reading a byte, like the other configuration files', (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-prices-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const fifo = join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    const refusedFifo = readPricesFile(fifo);
    assert.ok(!refusedFifo.ok && refusedFifo.expected.includes('a regular file (this is a FIFO)'), JSON.stringify(refusedFifo));
    const big = join(dir, 'big.yaml');
    const fd = openSync(big, 'w');
    ftruncateSync(fd, 600 * 1024 * 1024); // sparse: refused by its size, never read
    closeSync(fd);
    const refusedBig = readPricesFile(big);
    assert.ok(!refusedBig.ok && refusedBig.expected.includes('a file of at most 1 MiB'), JSON.stringify(refusedBig));
    const config = parsePrices({ INFERMETER_PRICES_FILE: big }, (variable, expected) => assert.equal(variable, 'INFERMETER_PRICES_FILE', expected));
    assert.equal(config.table, undefined);
  });

  it('refuses a bad file naming the key that is wrong', () => {
    const cases: [string, string][] = [
      [ISSUE_EXAMPLE.replace('per_hour: 12.50', 'per_hour: 12,50'), 'models[1].per_hour is not a decimal number'],
      [ISSUE_EXAMPLE.replace('completion: 0.60,', 'completion: -1,'), 'models[0].per_million_tokens.completion is not a decimal number'],
      [ISSUE_EXAMPLE.replace('cached_prompt:', 'cache:'), 'models[0].per_million_tokens.cache is not a kind'],
      [ISSUE_EXAMPLE.replace('currency: USD', 'currency: U$D'), 'currency is not 1 to 16 letters'],
      [ISSUE_EXAMPLE.replace('version: "2026-12"\n', ''), 'version is not'],
      [ISSUE_EXAMPLE.replace('match: "*"', 'matches: "*"'), 'models[1].matches is not a key of an entry'],
      [ISSUE_EXAMPLE.replace('    per_hour: 12.50           # the pool serving these models\n', ''), 'models[1] has neither per_million_tokens nor per_hour'],
      [`${ISSUE_EXAMPLE}extra: 1\n`, 'extra is not a key of the file'],
      [ISSUE_EXAMPLE.replace('prompt: 0.20, ', ''), 'models[0].per_million_tokens.prompt is missing'],
      ['currency: USD\ncurrency: EUR\n', 'the file is not valid YAML'],
      ['- 1\n', 'the file is not a mapping'],
      ['currency: USD\nversion: v\nmodels: []\n', 'models is not a list of at least one entry'],
      // A few bytes that would unfold into 10^9 strings: refused past 100 aliases.
      [
        `a: &a ["x","x","x","x","x","x","x","x","x","x"]\n${Array.from({ length: 8 }, (_, i) => `${'bcdefghi'[i]}: &${'bcdefghi'[i]} [${Array(10).fill(`*${'abcdefgh'[i]}`).join(',')}]`).join('\n')}\n`,
        'the file is not valid YAML',
      ],
    ];
    for (const [text, words] of cases) {
      const read = parsePricesText(text);
      assert.ok(!read.ok, words);
      assert.ok(read.expected.includes(words), `${read.expected} should say ${words}`);
    }
  });
});

describe('tokens by priced kind', () => {
  it('prices cached tokens out of the prompt and reasoning out of the completion', () => {
    assert.deepEqual(tokenKinds({ promptTokens: 1000, cachedPromptTokens: 400, completionTokens: 500, reasoningTokens: 100 }), {
      prompt: 600,
      cached_prompt: 400,
      completion: 400,
      reasoning: 100,
    });
    assert.deepEqual(tokenKinds({ promptTokens: undefined, completionTokens: 7, cachedPromptTokens: undefined, reasoningTokens: undefined }), {
      prompt: 0,
      cached_prompt: 0,
      completion: 7,
      reasoning: 0,
    });
  });
});

describe('pool split', () => {
  const labels = (tenant: string, model: string) => ({ tenant, model });
  const pair = (key: string, tenant: string, model: string) => ({ key, tenant, model });
  it('gives idle the time with nothing in flight, the rest by request-seconds, the remainder to the largest fraction', () => {
    const settled: Settled = new Map();
    // 12.50/h, one interval of 60 s: A 0-20 s, B 10-30 s, D 40-50 s (as the live test).
    const pool = createPoolSplit(12_500_000_000n, 0, '*', settled, labels);
    const a = pair('a', 'acme', 'llama');
    const b = pair('b', 'globex', 'qwen');
    const d = pair('d', 'globex', 'llama');
    pool.change(0, a, 1);
    pool.change(10_000_000, b, 1);
    pool.change(20_000_000, a, -1);
    pool.change(30_000_000, b, -1);
    pool.change(40_000_000, d, 1);
    pool.change(50_000_000, d, -1);
    pool.advance(60_000_000);
    const got = Object.fromEntries([...settled.values()].map((s) => [`${s.tenant}/${s.model}`, s.nanos]));
    assert.deepEqual(got, { 'idle/*': 69_444_445n, 'acme/llama': 55_555_555n, 'globex/qwen': 55_555_555n, 'globex/llama': 27_777_778n });
    assert.equal(pool.total(), 208_333_333n);
  });

  it("starts each interval's busy time from nothing: a request's first minute is not charged again in the next", () => {
    const settled: Settled = new Map();
    // 1 nano-unit per microsecond; one request from 0 to 90 s, settled at 60 s and at 120 s.
    const pool = createPoolSplit(3_600_000_000n, 0, '*', settled, labels);
    pool.change(0, pair('a', 'acme', 'm'), 1);
    pool.change(90_000_000, pair('a', 'acme', 'm'), -1);
    pool.advance(120_000_000);
    const got = Object.fromEntries([...settled.values()].map((s) => [`${s.tenant}/${s.model}`, s.nanos]));
    assert.deepEqual(got, { 'acme/m': 90_000_000n, 'idle/*': 30_000_000n });
  });

  it('gives a remainder between equal fractions to the first in label order, whatever order they came in', () => {
    const settled: Settled = new Map();
    // 3 nano-units a minute, two tenants in flight all of it: 1 each, and the one left over to `a`.
    const pool = createPoolSplit(180n, 0, '*', settled, labels);
    pool.change(0, pair('kb', 'b', 'm'), 1);
    pool.change(0, pair('ka', 'a', 'm'), 1);
    pool.advance(60_000_000);
    const got = Object.fromEntries([...settled.values()].map((s) => [`${s.tenant}/${s.model}`, s.nanos]));
    assert.deepEqual(got, { 'a/m': 2n, 'b/m': 1n });
  });

  it('idle + shares == the pool cost to the nano-unit, over random occupancy across many intervals', () => {
    const random = seededRandom(51);
    for (let run = 0; run < 50; run++) {
      const settled: Settled = new Map();
      const perHour = BigInt(Math.floor(random() * 1e12));
      const pool = createPoolSplit(perHour, 0, '*', settled, labels, 1 + Math.floor(random() * 5_000_000));
      const inFlight = [0, 0, 0];
      let t = 0;
      for (let step = 0; step < 400; step++) {
        t += Math.floor(random() * 1_000_000);
        const i = Math.floor(random() * 3);
        const delta = inFlight[i]! > 0 && random() < 0.5 ? -1 : 1;
        inFlight[i]! += delta;
        pool.change(t, pair(`k${i}`, `t${i}`, 'm'), delta);
      }
      pool.finish(t + 1);
      const sum = [...settled.values()].reduce((s, v) => s + v.nanos, 0n);
      assert.equal(sum, pool.total());
      for (const v of settled.values()) assert.ok(v.nanos >= 0n, `${v.tenant}: ${v.nanos} nano-units`);
      assert.equal(pool.total(), (perHour * BigInt(t + 1)) / 3_600_000_000n, 'the intervals add up to the pool cost over the whole run');
    }
  });

  it('keeps at most 10 000 ended pairs as sent per interval, the rest under their labels at once: the same split', () => {
    const settled: Settled = new Map();
    // 20 000 tenants as sent (api keys, say), each one request of 1 s, counted under 2 labels.
    const pool = createPoolSplit(3_600_000_000n, 0, '*', settled, (tenant, model) => ({ tenant: Number(tenant.slice(1)) % 2 === 0 ? 'even' : 'odd', model }));
    for (let i = 0; i < 20_000; i++) {
      pool.change(i * 1_000, pair(`k${i}`, `t${i}`, 'm'), 1);
      pool.change(i * 1_000 + 1_000, pair(`k${i}`, `t${i}`, 'm'), -1);
    }
    pool.advance(60_000_000);
    // 1 nano-unit per microsecond: 20 s busy of 60, split evenly; 40 s idle.
    const got = Object.fromEntries([...settled.values()].map((x) => [x.tenant, x.nanos]));
    assert.deepEqual(got, { idle: 40_000_000n, even: 10_000_000n, odd: 10_000_000n });
  });
});
