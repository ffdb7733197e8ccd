// The reference docs stay references: bounded in length, so that history goes to git rather than
// into them (performance.md and metrics.md grew into lab notebooks of 1,700 lines before).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

const root = join(import.meta.dirname, '..', '..');
const lines = (file: string) => readFileSync(join(root, file), 'utf8').split('\n').length - 1;

describe('the reference docs', () => {
  it('are within their length: performance.md under 350 lines, metrics.md under 900', () => {
    assert.ok(lines('docs/performance.md') < 350, `docs/performance.md: ${lines('docs/performance.md')} lines`);
    assert.ok(lines('docs/metrics.md') < 900, `docs/metrics.md: ${lines('docs/metrics.md')} lines`);
  });

  it("include the operator's page and the benchmarks' index", () => {
    for (const file of ['docs/operating.md', 'bench/README.md']) assert.ok(existsSync(join(root, file)), file);
  });
});
