// `le` in the vllm dialect is written as vLLM's Python prometheus_client writes it
// (floatToGoString over repr()); the expected strings are what Python 3 prints for
// prometheus_client.utils.floatToGoString(x).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatPythonFloat } from '../../src/metrics/exposition/text-format.ts';

describe('formatPythonFloat', () => {
  it('writes bounds as prometheus_client does', () => {
    const cases: Array<[number, string]> = [
      [1, '1.0'],
      [10, '10.0'],
      [2560, '2560.0'],
      [0.1, '0.1'],
      [0.025, '0.025'],
      [0.001, '0.001'],
      [0.0001, '0.0001'],
      [0.00001, '1e-05'],
      [100000, '100000.0'],
      [1000000, '1e+06'],
      [1234567, '1.234567e+06'],
      [5000000, '5e+06'],
      [1e16, '1e+16'],
      [Number.POSITIVE_INFINITY, '+Inf'],
    ];
    for (const [x, expected] of cases) assert.equal(formatPythonFloat(x), expected, String(x));
  });
});
