// The prices file and SIGHUP, in the real command (one process and two workers): a changed file
// is in use from the signal on, with its version; a bad one keeps the prices in use, and the
// warning names the key that is wrong.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startSimServer } from '../../src/sim/model-server.ts';
import { lineMatching, spawnCli } from '../helpers/child-process.ts';

const prices = (version: string, completion: string): string =>
  `currency: EUR\nversion: "${version}"\nmodels:\n  - match: "sim-*"\n    per_million_tokens: { prompt: 0.10, completion: ${completion} }\n    per_hour: 3.00\n`;

describe('INFERMETER_PRICES_FILE and SIGHUP', () => {
  for (const workers of ['1', '2']) {
    it(`applies new prices from the signal on, and keeps them on a bad file naming the key (INFERMETER_WORKERS=${workers})`, async (t) => {
      const dir = mkdtempSync(join(tmpdir(), 'infermeter-prices-'));
      t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
      const file = join(dir, 'prices.yaml');
      writeFileSync(file, prices('v1', '0.60'));
      const sim = await startSimServer({ ttftMs: 1, interTokenMs: 1, defaultTokens: 4 });
      t.after(() => sim.close());
      const child = spawnCli(t, { INFERMETER_UPSTREAM: sim.url, INFERMETER_WORKERS: workers, INFERMETER_PRICES_FILE: file });
      const started = JSON.parse(await lineMatching(child.stderr, /"infermeter started"/)) as Record<string, string>;
      const version = async (): Promise<string | undefined> =>
        /^infermeter_prices_info\{version="([^"]*)",currency="EUR"\} 1$/m.exec(await (await fetch(started.metrics!)).text())?.[1];
      assert.equal(await version(), 'v1');

      writeFileSync(file, prices('v2', '1.20'));
      const reloaded = lineMatching(child.stderr, /INFERMETER_PRICES_FILE reloaded/);
      child.kill('SIGHUP');
      assert.match(await reloaded, /"version":"v2"/);
      assert.equal(await version(), 'v2');

      writeFileSync(file, prices('v3', '1.2.0'));
      const kept = lineMatching(child.stderr, /INFERMETER_PRICES_FILE not reloaded/);
      child.kill('SIGHUP');
      assert.match(await kept, /models\[0\]\.per_million_tokens\.completion is not a decimal number/);
      assert.equal(await version(), 'v2');

      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      assert.equal(code, 0);
    });
  }
});
