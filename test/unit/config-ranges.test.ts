// The ranges of the variables table, at their edges, for every row with an integer parser: the
// smallest and largest values are taken as given, one past either end stops the start naming
// the variable and the range. A test of a far-off value only (0, or 99999999) passes a range
// that is off by one. The rows are the table's own: a new ranged row is tested here unasked.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig, type Config } from '../../src/config/config.ts';
import { docOf, groupDefaults, isValueRow, type ValueRow } from '../../src/config/variables/variable-table.ts';
import { CONFIGURATION_TABLE } from '../../src/config/variables.ts';

/** Where a row's value lands in Config. */
function landedValue(config: Config, row: ValueRow): unknown {
  const group = row.group === 'config' || row.group === 'listen' ? config : config[row.group];
  return (group as unknown as Record<string, unknown>)[row.key];
}

const ranged = CONFIGURATION_TABLE.filter(isValueRow).filter((r) => r.parse.range !== undefined);

describe('configuration ranges, at their edges', () => {
  it('covers the ranged rows (the limits, the caps, the windows and intervals)', () => {
    assert.ok(ranged.length >= 20, `${ranged.length} ranged rows`);
    for (const name of ['INFERMETER_WORKERS', 'INFERMETER_DRAIN_TIMEOUT_MS', 'INFERMETER_MAX_TENANTS', 'INFERMETER_AOM_PERIOD_SECONDS']) {
      assert.ok(
        ranged.some((r) => r.name === name),
        name,
      );
    }
  });

  for (const row of ranged) {
    const { min, max } = row.parse.range!;
    it(`${row.name}: ${min} to ${max}`, () => {
      for (const edge of [min, max]) assert.equal(landedValue(loadConfig({ [row.name]: String(edge) }), row), edge, `${row.name}=${edge} is taken`);
      for (const outside of [min - 1, max + 1]) {
        assert.throws(
          () => loadConfig({ [row.name]: String(outside) }),
          (e: Error) => e.message.includes(`${row.name}: expected ${row.parse.expected}`) && e.message.includes(`got "${outside}"`),
          `${row.name}=${outside} stops the start`,
        );
      }
    });
  }

  it('has every default inside its range, and the range in its documentation', () => {
    for (const row of ranged) {
      const { min, max } = row.parse.range!;
      assert.match(row.parse.expected, new RegExp(`\\bfrom ${min} to ${max}\\b`), `${row.name}'s refusal states its range`);
      const value = groupDefaults(CONFIGURATION_TABLE, row.group)[row.key];
      assert.ok(typeof value === 'number' && value >= min && value <= max, `${row.name}'s default ${String(value)} in ${min} to ${max}`);
      assert.equal(landedValue(loadConfig({}), row), value, `${row.name}: loadConfig's default is the table's`);
      assert.ok(row.meaning.join(' ').includes('{range}'), `${row.name}'s meaning says where its range goes ({range})`);
      assert.match(docOf(row).meaning, new RegExp(`\\b${min} to ${max}\\b`), `${row.name}: --help and the documented table state the range`);
    }
  });
});
