// A family of thousands of series is read as the render goes, a part at a time: its first part
// is a small share of the whole, and a pair counted after it is in the rest of that render (the
// series were not copied out whole before the first part).
import assert from 'node:assert/strict';
import type { Family } from '../../src/metrics/exposition/families.ts';

/** `countLate` counts a request of tenant `tenant-late` and model `model-late` on the family. */
export function assertReadAsRendered(family: Family, countLate: () => void): void {
  const whole = family.renderText();
  const parts = family.renderParts!()[Symbol.iterator]();
  const first = parts.next();
  assert.equal(first.done, false);
  assert.ok(first.value.length < whole.length / 10, `the first part: ${first.value.length} of ${whole.length} characters`);
  countLate();
  let rest = '';
  for (let part = parts.next(); part.done !== true; part = parts.next()) rest += part.value;
  assert.ok(rest.includes('tenant="tenant-late"'), 'the pair counted during the render is in it');
  assert.ok((first.value + rest).startsWith(whole), 'the parts begin with the whole text rendered before the pair');
}
