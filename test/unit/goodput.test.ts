// Goodput's configuration (INFERMETER_SLO, INFERMETER_SLO_FILE, INFERMETER_SLO_CLIENT_ALLOWANCE)
// as loadConfig reads it, and the verdict of one request by vLLM's rules: the boundary itself is
// good, tpot over n - 1 tokens and 0 for one token, a non-streamed answer's ttft is its e2e,
// failures and cancels never good, client errors not judged.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { compileGlob, globMatches } from '../../src/config/parse/glob.ts';
import { parseSloFile, parseTargets } from '../../src/goodput/slo-config.ts';
import type { RequestSample } from '../../src/measure/sample.ts';
import { exclusionOf, figuresOf, judge } from '../../src/goodput/goodput-verdict.ts';
import { createSloPolicy } from '../../src/goodput/slo-policy.ts';
import { createLogger, silentLogger } from '../../src/log.ts';
import { mkdtempSync, renameSync, rmSync, statSync, unwatchFile, watchFile, writeFileSync, type Stats } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seededRandom } from '../helpers/random.ts';

const problems = (env: Record<string, string>, files: Record<string, string> = {}): string[] => {
  try {
    loadConfig(env, { readFile: (p) => (p in files ? files[p]! : assert.fail(`read ${p}`)) });
    return [];
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return error.problems.map((p) => `${p.variable}: ${p.expected}`);
  }
};

const NO_ALLOWANCE = { ttft: 0, tpot: 0, e2el: 0 };

function sample(over: Partial<RequestSample>): RequestSample {
  return {
    api: 'chat',
    model: 'm',
    stream: true,
    status: 200,
    outcome: 'success',
    failure: undefined,
    cancelPhase: undefined,
    ttfb: 0.01,
    streamed: true,
    outputSeen: true,
    ttft: 0.1,
    lastToken: 0.5,
    e2e: 0.5,
    tpot: undefined,
    promptTokens: 10,
    completionTokens: 5,
    usageSource: 'upstream',
    tokenEvents: 5,
    finishReason: 'stop',
    ...over,
  };
}

describe('goodput configuration', () => {
  it("reads vLLM's --goodput syntax: spaces or commas, ttft, tpot, e2el in milliseconds", () => {
    assert.deepEqual(parseTargets('ttft:500 tpot:50'), { ok: true, targets: { ttft: 500, tpot: 50 } });
    assert.deepEqual(parseTargets('ttft:500,tpot:50, e2el:1e4'), { ok: true, targets: { ttft: 500, tpot: 50, e2el: 10000 } });
    assert.deepEqual(parseTargets('TTFT:0.5'), { ok: true, targets: { ttft: 0.5 } });
    assert.deepEqual(loadConfig({}).slo, { classes: [], file: undefined, allowance: NO_ALLOWANCE });
    assert.deepEqual(loadConfig({ INFERMETER_SLO: 'ttft:150 tpot:25' }).slo.classes, [
      { name: 'default', model: '*', tenant: '*', targets: { ttft: 150, tpot: 25 } },
    ]);
    assert.deepEqual(loadConfig({ INFERMETER_SLO: 'ttft:150', INFERMETER_SLO_CLIENT_ALLOWANCE: 'ttft:5' }).slo.allowance, { ttft: 5, tpot: 0, e2el: 0 });
  });

  it('refuses a bad key or value, naming the variable', () => {
    for (const bad of ['ttfb:500', 'ttft:-1', 'ttft:abc', 'ttft', 'ttft:500 ttft:400', 'ttft:inf', 'ttft:0x10', ',', 'tpot:5:5']) {
      assert.match(problems({ INFERMETER_SLO: bad }).join(), /INFERMETER_SLO: key:milliseconds pairs/, bad);
    }
    assert.match(problems({ INFERMETER_SLO_CLIENT_ALLOWANCE: 'ttft:5' }).join(), /INFERMETER_SLO_CLIENT_ALLOWANCE: INFERMETER_SLO or INFERMETER_SLO_FILE/);
    assert.match(problems({ INFERMETER_SLO: 'ttft:5', INFERMETER_SLO_CLIENT_ALLOWANCE: 'ttft:x' }).join(), /INFERMETER_SLO_CLIENT_ALLOWANCE: key:milliseconds/);
    assert.match(problems({ INFERMETER_SLO_FILE: '/missing.json' }).join(), /INFERMETER_SLO_FILE: a readable JSON file/);
    assert.match(
      problems({ INFERMETER_SLO_FILE: '/s.json' }, { '/s.json': '{"classes": [{"name": "a", "slo": "ttft:x"}]}' }).join(),
      /INFERMETER_SLO_FILE: .*class 1's slo/,
    );
    assert.match(problems({ INFERMETER_SLO_TYPO: 'ttft:1' }).join(), /INFERMETER_SLO_TYPO: a variable infermeter reads/);
  });

  it('reads the SLO file: classes in order, globs, off, names unique', () => {
    const read = parseSloFile(
      JSON.stringify({
        classes: [
          { name: 'batch', tenant: 'batch-*', slo: 'off' },
          { name: 'chat', model: 'llama-?b*', slo: 'ttft:500 tpot:50' },
        ],
      }),
    );
    assert.deepEqual(read, {
      ok: true,
      classes: [
        { name: 'batch', model: '*', tenant: 'batch-*', targets: undefined },
        { name: 'chat', model: 'llama-?b*', tenant: '*', targets: { ttft: 500, tpot: 50 } },
      ],
    });
    for (const [text, what] of [
      ['[]', /no "classes" array/],
      ['{"classes": [], "x": 1}', /the key "x": only "classes" is known/],
      ['{"classes": [{"name": "a", "slo": "ttft:1"}, {"name": "a", "slo": "ttft:1"}]}', /class 2's name is used twice/],
      ['{"classes": [{"name": "default", "slo": "ttft:1"}]}', /reserved/],
      ['{"classes": [{"name": "a"}]}', /class 1 has no slo/],
      // The bad key named (issue 52): which one of the file is wrong, not only that one is.
      ['{"classes": [{"name": "a", "slo": "ttft:1", "models": "x"}]}', /class 1 has the key "models": the keys are name, model, tenant and slo/],
      ['{"classes": [{"name": "a", "slo": "ttft:1", "SECRET!! key": "x"}]}', /class 1 has the key a key of 12 characters/],
      ['{"classes": [{"name": "a", "slo": "ttft:500 tpt:50"}]}', /class 1's slo is not .*: "tpt" is not one of ttft, tpot, e2el/],
      ['{"classes": [{"name": "a", "slo": "ttft:500 ttft:50"}]}', /class 1's slo is not .*: ttft is given twice/],
      ['{"classes": [{"name": "a", "slo": "ttft:fast"}]}', /class 1's slo is not .*: "ttft"'s value is not a number of ms/],
      ['not json', /not valid JSON/],
    ] as const) {
      const r = parseSloFile(text);
      assert.equal(r.ok, false, text);
      if (!r.ok) assert.match(r.expected, what, text);
      if (!r.ok) assert.doesNotMatch(r.expected, /SECRET/, 'a key that is not plain is not echoed');
    }
    const glob = (pattern: string, text: string): boolean => globMatches(compileGlob(pattern), text);
    assert.ok(glob('llama-?b*', 'llama-8b-instruct'));
    assert.ok(!glob('llama-?b*', 'llama-70b'));
    assert.ok(glob('a.b(c)', 'a.b(c)') && !glob('a.b(c)', 'axb(c)'));
  });

  it('matches globs as a regular expression of them would, in at most (name + 1) x (glob + 1) steps however they backtrack', () => {
    // The reference: the glob as the regular expression it stood for before.
    const reference = (pattern: string): RegExp => {
      let source = '';
      for (const ch of pattern) source += ch === '*' ? '.*' : ch === '?' ? '.' : ch.replace(/[\\^$.|+(){}[\]]/g, '\\$&');
      return new RegExp(`^${source}$`, 'su');
    };
    const random = seededRandom(49);
    const pick = (alphabet: string, max: number): string =>
      Array.from({ length: Math.floor(random() * max) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
    for (let k = 0; k < 5000; k++) {
      const pattern = pick('ab*?.é', 7);
      const text = pick('ab.é', 9);
      assert.equal(globMatches(compileGlob(pattern), text), reference(pattern).test(text), `${pattern} against ${text}`);
    }
    // The finding: `*-*-*-*-*x` against 127-character names (seconds of backtracking as a RegExp).
    for (const [pattern, name] of [
      ['*-*-*-*-*x', '-'.repeat(127)],
      ['*-*-*-*-*x', 'a-'.repeat(63) + 'a'],
      ['*a*a*a*a*a*a*b', 'a'.repeat(127)],
      ['?*?*?*?*?*?*?*?*x', 'é'.repeat(127)],
    ] as const) {
      const steps = { n: 0 };
      assert.equal(globMatches(compileGlob(pattern), name, steps), false);
      assert.ok(steps.n <= (Array.from(name).length + 1) * (Array.from(pattern).length + 1), `${pattern}: ${steps.n} steps`);
    }
  });

  it('puts a request in the first class whose model and tenant globs match; without tenants only in a class for every tenant', () => {
    const config = loadConfig(
      { INFERMETER_SLO_FILE: '/s.json', INFERMETER_SLO: 'ttft:1000' },
      {
        readFile: () =>
          JSON.stringify({
            classes: [
              { name: 'batch', tenant: 'batch-*', slo: 'e2el:60000' },
              { name: 'llama', model: 'llama-*', slo: 'ttft:200' },
            ],
          }),
      },
    );
    const policy = createSloPolicy({ config: config.slo, log: silentLogger, watchIntervalMs: 0 });
    assert.equal(policy.classOf('llama-8b', 'batch-1')?.name, 'batch');
    assert.equal(policy.classOf('llama-8b', 'acme')?.name, 'llama');
    assert.equal(policy.classOf('qwen', 'acme')?.name, 'default');
    assert.equal(policy.classOf('llama-8b', undefined)?.name, 'llama');
    assert.equal(policy.classOf('qwen', undefined)?.name, 'default');
    policy.close();
  });
});

describe('the SLO classes, live', () => {
  it('are read again when the file changes (polled), and a bad file keeps those in use with a warning', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-slo-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const file = join(dir, 'slo.json');
    writeFileSync(file, JSON.stringify({ classes: [{ name: 'a', slo: 'ttft:100' }] }));
    const config = loadConfig({ INFERMETER_SLO_FILE: file, INFERMETER_SLO: 'e2el:9000' });
    let heard: (line: string) => void = () => undefined;
    const log = createLogger('info', (line) => heard(line));
    const next = () => new Promise<string>((resolve) => (heard = resolve));
    const policy = createSloPolicy({ config: config.slo, log, watchIntervalMs: 20 });
    t.after(() => policy.close());
    assert.deepEqual(
      policy.classes().map((c) => c.name),
      ['a', 'default'],
    );
    // The watcher's first look at the file is asynchronous: a write before it is its starting
    // point, not a change. So the first change is written (its size different each time) until
    // the reload is heard, a bounded number of times.
    let line = next();
    let reloaded: string | undefined;
    for (let i = 0; i < 100 && reloaded === undefined; i++) {
      writeFileSync(
        file,
        JSON.stringify({
          classes: [
            { name: 'b', model: 'x*', slo: 'tpot:10' },
            { name: 'c', slo: 'off' },
          ],
        }) + ' '.repeat(i),
      );
      reloaded = await Promise.race([line, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 50))]);
    }
    assert.match(reloaded ?? 'not heard', /INFERMETER_SLO_FILE reloaded/);
    assert.deepEqual(
      policy.classes().map((c) => c.name),
      ['b', 'c', 'default'],
      'INFERMETER_SLO stays the last class',
    );
    assert.equal(policy.classOf('x1', undefined)?.name, 'b', 'the cache was emptied');
    assert.equal(policy.classOf('y', undefined)?.name, 'c');
    line = next();
    writeFileSync(file, '{"classes": [{"name": "SECRET!!"}]}');
    const warning = await line;
    assert.match(warning, /INFERMETER_SLO_FILE not reloaded: the SLO classes in use are kept/);
    assert.doesNotMatch(warning, /SECRET/, "the file's content is not echoed");
    assert.deepEqual(
      policy.classes().map((c) => c.name),
      ['b', 'c', 'default'],
    );
  });
});

describe('a reload of the SLO file', () => {
  it('is logged once when both the poll and a SIGHUP see the same edit, whichever comes first', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'infermeter-slo-'));
    t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
    const file = join(dir, 'slo.json');
    // Replaced as an editor or a ConfigMap does (a rename): never seen half written.
    let n = 0;
    const edit = (): number => {
      writeFileSync(`${file}.new`, JSON.stringify({ classes: [{ name: `c${++n}`, slo: 'ttft:100' }] }));
      renameSync(`${file}.new`, file);
      return statSync(file).ino;
    };
    edit();
    const config = loadConfig({ INFERMETER_SLO_FILE: file });
    const lines: string[] = [];
    const policy = createSloPolicy({ config: config.slo, log: createLogger('info', (line) => lines.push(line)), watchIntervalMs: 20 });
    t.after(() => policy.close());
    // Our listener on the same poll runs after the policy's: when it hears a version, so has the policy.
    let heard: (ino: number) => void = () => undefined;
    const listener = (now: Stats): void => heard(now.ino);
    watchFile(file, { interval: 20, persistent: false }, listener);
    t.after(() => unwatchFile(file, listener));
    const polled = async (make: () => number, looks = 200): Promise<boolean> => {
      const ino = make();
      for (let i = 0; i < looks; i++) {
        const seen = await new Promise<number | undefined>((resolve) => {
          heard = resolve;
          setTimeout(() => resolve(undefined), 50);
        });
        if (seen === ino) return true;
      }
      return false;
    };
    const reloaded = () => lines.filter((l) => l.includes('INFERMETER_SLO_FILE reloaded')).length;
    // The poll's first look is asynchronous: an edit before it is never heard. Edits until one
    // is heard, each given a short while (200 looks each, 10 s, made every first edit cost 10 s).
    let first = false;
    for (let i = 0; i < 200 && !first; i++) first = await polled(edit, 4);
    assert.ok(first, 'the poll heard an edit');
    assert.equal(reloaded(), 1, 'the poll reloaded it');
    assert.equal(policy.reload(), true, 'SIGHUP after the poll: the classes in use are the file');
    assert.equal(reloaded(), 1, 'SIGHUP after the poll: not logged again');
    assert.ok(
      await polled(() => {
        const ino = edit();
        policy.reload(); // SIGHUP before the poll
        return ino;
      }),
    );
    assert.equal(reloaded(), 2, 'SIGHUP before the poll: logged once');
    assert.deepEqual(
      policy.classes().map((c) => c.name),
      [`c${n}`],
    );
  });
});

describe('the goodput verdict', () => {
  const slo = { ttft: 150, tpot: 25 };
  it('is good exactly at the SLO (inclusive), missed just past it', () => {
    // ttft 0.15 s and tpot (0.25 - 0.15) / 4 = 0.025 s: both exactly at their SLO.
    const at = sample({ ttft: 0.15, e2e: 0.25, completionTokens: 5 });
    assert.deepEqual(figuresOf(at, 5), { ttft: 0.15, tpot: (0.25 - 0.15) / 4, e2el: 0.25 });
    assert.deepEqual(judge(at, { ttft: 150, e2el: 250 }, NO_ALLOWANCE), { verdict: 'good', missed: [], tokens: 5 });
    // ttft 0.125 s and tpot 0.125 / 5 = 0.025 s, exactly at ttft:125 tpot:25 (vLLM's floating
    // point: 0.2 - 0.15 would not be 0.05, so the boundary is taken where the figures are exact).
    assert.deepEqual(judge(sample({ ttft: 0.125, e2e: 0.25, completionTokens: 6 }), { ttft: 125, tpot: 25 }, NO_ALLOWANCE), {
      verdict: 'good',
      missed: [],
      tokens: 6,
    });
    assert.deepEqual(judge(sample({ ttft: 0.150001, e2e: 0.2 }), slo, NO_ALLOWANCE).missed, ['ttft']);
    assert.deepEqual(judge(sample({ ttft: 0.1, e2e: 0.2001, completionTokens: 5 }), slo, NO_ALLOWANCE).missed, ['tpot']);
    assert.deepEqual(judge(sample({ ttft: 0.2, e2e: 1, completionTokens: 5 }), slo, NO_ALLOWANCE), { verdict: 'missed', missed: ['ttft', 'tpot'], tokens: 5 });
  });

  it("takes tpot as 0 for one token, and a non-streamed answer's ttft as its e2e", () => {
    assert.equal(figuresOf(sample({ ttft: 0.1, e2e: 9, completionTokens: 1 }), 1)?.tpot, 0);
    assert.equal(judge(sample({ ttft: 0.1, e2e: 9, completionTokens: 1, tokenEvents: 1 }), slo, NO_ALLOWANCE).verdict, 'good');
    const plain = sample({ stream: false, streamed: false, ttft: undefined, e2e: 0.12, completionTokens: 40, tokenEvents: 0 });
    assert.deepEqual(figuresOf(plain, 40), { ttft: 0.12, tpot: 0, e2el: 0.12 });
    assert.deepEqual(judge(plain, { ttft: 100 }, NO_ALLOWANCE).missed, ['ttft']);
    // Without usage, the tokens are the events seen.
    assert.equal(judge(sample({ usageSource: 'fallback', completionTokens: 0, tokenEvents: 7 }), slo, NO_ALLOWANCE).tokens, 7);
  });

  it("never makes a failed or cancelled request good; a stream without a token is failed, as vLLM's client marks it", () => {
    assert.equal(judge(sample({ outcome: 'failed', status: 500, failure: 'upstream_status', e2e: undefined }), slo, NO_ALLOWANCE).verdict, 'failed');
    assert.equal(judge(sample({ outcome: 'cancelled', cancelPhase: 'decoding', e2e: undefined }), slo, NO_ALLOWANCE).verdict, 'cancelled');
    assert.equal(judge(sample({ ttft: undefined, completionTokens: 0, tokenEvents: 0 }), slo, NO_ALLOWANCE).verdict, 'failed');
  });

  it('leaves client errors and embeddings unjudged; 408 and 429 are failures', () => {
    for (const status of [400, 401, 404, 413, 422])
      assert.equal(exclusionOf(sample({ outcome: 'failed', status, failure: 'upstream_status' })), 'client_error', String(status));
    for (const status of [408, 429, 500, 502, 503])
      assert.equal(exclusionOf(sample({ outcome: 'failed', status, failure: 'upstream_status' })), undefined, String(status));
    assert.equal(exclusionOf(sample({ api: 'embeddings' })), 'embeddings');
  });

  it('adds the client allowance before comparing', () => {
    const s = sample({ ttft: 0.146, e2e: 0.2, completionTokens: 1 });
    assert.equal(judge(s, slo, NO_ALLOWANCE).verdict, 'good');
    assert.deepEqual(judge(s, slo, { ttft: 5, tpot: 0, e2el: 0 }).missed, ['ttft']);
  });
});
