// The prices in use (src/chargeback/price-book.ts): each kind of price from its own first
// matching entry, the answers cached per model name within a bound (docs/security.md: at most
// 10 000 names), and a reload logged with the version and entries it took into use.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { createPriceBook } from '../../src/chargeback/price-book.ts';
import { parsePricesText } from '../../src/chargeback/prices-file.ts';
import { createLogger, silentLogger } from '../../src/log.ts';

const PRICES = `currency: USD
version: "v1"
models:
  - match: "llama-*"
    per_million_tokens: { prompt: 1, completion: 2 }
  - match: "*"
    per_hour: 10
`;

function table(text: string) {
  const read = parsePricesText(text);
  if (!read.ok) throw new Error(read.expected);
  return read.table;
}

describe('the price book', () => {
  it('prices tokens and pool each by its own first matching entry', () => {
    const book = createPriceBook({ file: undefined, initial: table(PRICES), log: silentLogger });
    const llama = book.pricesOf('llama-3');
    assert.equal(llama.perMillion?.prompt, 1_000_000_000n);
    assert.equal(llama.pool, 1, 'the per_hour entry after the per-token one');
    assert.deepEqual(book.pricesOf('qwen'), { perMillion: undefined, pool: 1 });
    book.close();
    // A later entry with both kinds gives the pool only: the tokens keep the first entry's price.
    const both = createPriceBook({
      file: undefined,
      initial: table(PRICES.replace('per_hour: 10', 'per_million_tokens: { prompt: 5, completion: 5 }\n    per_hour: 10')),
      log: silentLogger,
    });
    assert.deepEqual([both.pricesOf('llama-3').perMillion?.prompt, both.pricesOf('llama-3').pool], [1_000_000_000n, 1]);
    assert.equal(both.pricesOf('qwen').perMillion?.prompt, 5_000_000_000n);
    both.close();
  });

  it('caches at most 10 000 model names, and answers the same past them', () => {
    const book = createPriceBook({ file: undefined, initial: table(PRICES), log: silentLogger });
    let most = 0;
    for (let i = 0; i < 25_000; i++) {
      assert.equal(book.pricesOf(`llama-${i}`).pool, 1);
      most = Math.max(most, book.cached());
    }
    assert.equal(most, 10_000, 'names cached at most');
    assert.equal(book.pricesOf('llama-0').perMillion?.completion, 2_000_000_000n);
    book.close();
  });

  it('logs a reload with the version and the number of entries it took into use', (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'price-book-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const file = join(dir, 'prices.yaml');
    writeFileSync(file, PRICES);
    const lines: string[] = [];
    const book = createPriceBook({ file, initial: table(PRICES), log: createLogger('info', (line) => lines.push(line)), watchIntervalMs: 3_600_000 });
    t.after(() => book.close());
    writeFileSync(file, PRICES.replace('"v1"', '"v2"').replace('per_hour: 10\n', 'per_hour: 10\n  - match: "x"\n    per_hour: 1\n'));
    assert.equal(book.reload(), true);
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'INFERMETER_PRICES_FILE reloaded');
    assert.deepEqual([logged?.version, logged?.entries], ['v2', 3]);
    assert.equal(book.pricesOf('x').pool, 1, 'the new prices are in use (the cache forgotten)');
  });
});
