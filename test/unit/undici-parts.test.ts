// The data plane loads three parts of undici from their files (src/data-plane/undici-parts.ts):
// each must be the very object undici's index exports, so that an undici that moves or replaces
// one fails here rather than in production.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import * as undici from 'undici';
import * as parts from '../../src/data-plane/undici-parts.ts';

describe("undici's parts, loaded from their files", () => {
  it('are the objects the package exports: Client, Pool, buildConnector', () => {
    assert.equal(parts.Client, undici.Client);
    assert.equal(parts.Pool, undici.Pool);
    assert.equal(parts.buildConnector, undici.buildConnector);
  });
});
