// The access log rotates the usual way: after `mv access.log access.log.1` and SIGHUP, new lines
// go to a new access.log at the path (each worker's too), the lines before the signal stay in
// the moved file, and the process and its streams go on.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startSimServer } from '../../src/sim/model-server.ts';
import { spawnCli } from '../helpers/child-process.ts';
import { post } from '../helpers/post.ts';

const lines = (path: string): Array<{ request_id: string }> =>
  existsSync(path)
    ? readFileSync(path, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { request_id: string })
    : [];

describe('access log rotation', () => {
  for (const workers of ['1', '2']) {
    it(`reopens INFERMETER_ACCESS_LOG at its path on SIGHUP, after logrotate moved it (INFERMETER_WORKERS=${workers})`, async (t) => {
      const sim = await startSimServer({ ttftMs: 1, interTokenMs: 1, defaultTokens: 2 });
      t.after(() => sim.close());
      const dir = mkdtempSync(join(tmpdir(), 'infermeter-rotate-'));
      t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
      const log = join(dir, 'access.log');
      const child = spawnCli(t, { INFERMETER_UPSTREAM: sim.url, INFERMETER_WORKERS: workers, INFERMETER_ACCESS_LOG: log });
      let stderr = '';
      const seen = (pattern: RegExp, count: number) =>
        new Promise<void>((resolve, reject) => {
          // A guard against a hang, not a measure: the line comes at once.
          const timer = setTimeout(() => reject(new Error(`${count} lines of ${pattern} expected: ${stderr}`)), 20_000);
          const check = (): void => {
            if (stderr.split('\n').filter((l) => pattern.test(l)).length < count) return;
            child.stderr.off('data', check);
            clearTimeout(timer);
            resolve();
          };
          child.stderr.on('data', check);
          child.once('exit', () => reject(new Error(`exited: ${stderr}`)));
          check();
        });
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      await seen(/"infermeter started"/, 1);
      const started = JSON.parse(stderr.split('\n').find((l) => l.includes('"infermeter started"'))!) as Record<string, string>;
      const send = async (prefix: string, n: number) => {
        for (let i = 0; i < n; i++) {
          await post(`${started.data}/v1/chat/completions`, { model: 'sim-llama-8b', messages: [] }, { 'x-request-id': `${prefix}-${i}`, connection: 'close' });
        }
      };
      /** Until the file holds `n` lines (the log writes every 100 ms; a bounded wait). */
      const holds = async (path: string, n: number) => {
        for (let i = 0; i < 500 && lines(path).length < n; i++) await new Promise((r) => setTimeout(r, 10));
        return lines(path);
      };
      await send('before', 4);
      assert.equal((await holds(log, 4)).length, 4);
      renameSync(log, `${log}.1`);
      const reopened = seen(/access log reopened/, Number(workers) === 1 ? 1 : Number(workers));
      child.kill('SIGHUP');
      await reopened;
      await send('after', 4);
      const after = await holds(log, 4);
      assert.deepEqual(after.map((l) => l.request_id).sort(), ['after-0', 'after-1', 'after-2', 'after-3'], 'new lines at the path');
      assert.ok(
        lines(`${log}.1`).every((l) => l.request_id.startsWith('before-')),
        'the moved file keeps only the lines before',
      );
      assert.equal(lines(`${log}.1`).length, 4);
      assert.doesNotMatch(stderr, /worker exited/);
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      assert.equal(code, 0);
    });
  }
});
