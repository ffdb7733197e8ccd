// The metrics token: only the exact token opens the ports. Wrong tokens of the right length
// (one byte changed at its start, middle or end), its prefixes and extensions, and a token in
// another scheme all get 401; a length check alone, or a comparison of a prefix, would let some
// through.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Hono } from 'hono';
import { requireBearer } from '../../src/bearer-token.ts';

const TOKEN = 'metrics-token-0123456789abcdef';

function app(): Hono {
  const a = new Hono();
  a.use(
    '*',
    requireBearer(TOKEN, (path) => path === '/dashboard'),
  );
  for (const path of ['/metrics', '/health', '/ready', '/dashboard']) a.get(path, (c) => c.text('data'));
  return a;
}

const status = async (a: Hono, authorization: string | undefined, path = '/metrics'): Promise<number> =>
  (await a.request(path, authorization === undefined ? {} : { headers: { authorization } })).status;

/** The token with the byte at `i` replaced by another printable one. */
const changedAt = (i: number): string => TOKEN.slice(0, i) + (TOKEN[i] === 'x' ? 'y' : 'x') + TOKEN.slice(i + 1);

describe('bearer token', () => {
  it('opens with the exact token only', async () => {
    const a = app();
    assert.equal(await status(a, `Bearer ${TOKEN}`), 200);
    const sameLength = [0, Math.floor(TOKEN.length / 2), TOKEN.length - 1].map(changedAt);
    for (const wrong of sameLength) assert.equal(wrong.length, TOKEN.length);
    const wrongs = [
      ...sameLength,
      TOKEN.toUpperCase(),
      TOKEN.slice(0, -1),
      `${TOKEN}0`,
      TOKEN.slice(0, 1),
      `${TOKEN} x`, // a second word is not part of a token68
    ];
    for (const wrong of wrongs) {
      const res = await a.request('/metrics', { headers: { authorization: `Bearer ${wrong}` } });
      assert.equal(res.status, 401, `"${wrong}" (${wrong.length} characters)`);
      assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="infermeter"');
      assert.doesNotMatch(await res.text(), /data/);
    }
    for (const authorization of [undefined, '', 'Bearer ', `Basic ${TOKEN}`, TOKEN, `Token ${TOKEN}`]) {
      assert.equal(await status(a, authorization), 401, `authorization: ${authorization}`);
    }
    // RFC 9110 11.4: the scheme is case-insensitive and 1*SP separates it from the token68.
    for (const authorization of [`bearer ${TOKEN}`, `BEARER ${TOKEN}`, `Bearer  ${TOKEN}`]) assert.equal(await status(a, authorization), 200, authorization);
  });

  it('leaves the probes and the open paths open, and only those', async () => {
    const a = app();
    for (const path of ['/health', '/ready', '/dashboard']) assert.equal(await status(a, undefined, path), 200, path);
    for (const path of ['/metrics', '/health/', '/dashboard/data', '/readyz']) assert.equal(await status(a, undefined, path), 401, path);
  });
});
