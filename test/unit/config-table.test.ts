// Adding a variable is adding a row: a dummy row appended to the variables table is read by
// loadConfig (its default, its value, its refusal naming it and its range), printed by
// `--help`, and rendered into the documented table's rows, with no other change; without the
// row the same variable is refused as unknown. A row of group `limits` lands in Config.limits
// and in the defaults the data plane uses.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { helpText } from '../../src/cli/help.ts';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { DEFAULT_LIMITS } from '../../src/config/limits.ts';
import { integer, onOff } from '../../src/config/parse/parse.ts';
import { groupDefaults, markdownRows, variable } from '../../src/config/variables/variable-table.ts';
import { CONFIGURATION_TABLE } from '../../src/config/variables.ts';
import { documentedRows } from '../../scripts/configuration-doc.ts';

const WINDOW = variable({
  name: 'INFERMETER_DUMMY_WINDOW',
  key: 'dummyWindow',
  parse: integer(2, 40),
  value: 7,
  meaning: ['a dummy window of the test,', 'written over two source lines, {range}'],
});
const SLACK = variable({
  name: 'INFERMETER_DUMMY_SLACK_MS',
  group: 'limits',
  key: 'dummySlackMs',
  parse: integer(0, 5000),
  value: 250,
  meaning: 'a dummy timeout of the test',
});
const SWITCH = variable({ name: 'INFERMETER_DUMMY_SWITCH', key: 'dummySwitch', parse: onOff(), value: true, shown: '`on`', meaning: 'a dummy switch' });
const TABLE = [...CONFIGURATION_TABLE, WINDOW, SLACK, SWITCH];

const field = (config: object, key: string): unknown => (config as Record<string, unknown>)[key];

describe('a new variable is one row', () => {
  it('is refused as unknown without its row', () => {
    assert.throws(() => loadConfig({ INFERMETER_DUMMY_WINDOW: '9' }), /INFERMETER_DUMMY_WINDOW: expected a variable infermeter reads/);
  });

  it('is read by loadConfig from its row: the default, a value, a refusal naming it and its range', () => {
    const defaults = loadConfig({}, { table: TABLE });
    assert.deepEqual([field(defaults, 'dummyWindow'), field(defaults, 'dummySwitch'), field(defaults.limits, 'dummySlackMs')], [7, true, 250]);
    const set = loadConfig({ INFERMETER_DUMMY_WINDOW: ' 40 ', INFERMETER_DUMMY_SWITCH: 'off', INFERMETER_DUMMY_SLACK_MS: '0' }, { table: TABLE });
    assert.deepEqual([field(set, 'dummyWindow'), field(set, 'dummySwitch'), field(set.limits, 'dummySlackMs')], [40, false, 0]);
    assert.equal(set.limits.drainTimeoutMs, 30_000, 'the other rows are read as before');
    assert.throws(
      () => loadConfig({ INFERMETER_DUMMY_WINDOW: '41', INFERMETER_DUMMY_SWITCH: 'maybe' }, { table: TABLE }),
      (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.deepEqual(e.problems, [
          { variable: 'INFERMETER_DUMMY_WINDOW', expected: 'an integer from 2 to 40', got: '41' },
          { variable: 'INFERMETER_DUMMY_SWITCH', expected: '1 or 0 (also true/false, on/off)', got: 'maybe' },
        ]);
        return true;
      },
    );
  });

  it('is in --help, with its default and its range', () => {
    const help = helpText('0.0.0', TABLE);
    assert.match(help, /\n {2}INFERMETER_DUMMY_WINDOW\n {6}default: 7\n {6}a dummy window of the test, written over two source lines, 2 to 40\n/);
    assert.match(help, /\n {2}INFERMETER_DUMMY_SLACK_MS\n {6}default: 250\n/);
    assert.doesNotMatch(helpText('0.0.0'), /INFERMETER_DUMMY/);
  });

  it('is a row of the documented table, which the README-vs-code check then asks for', () => {
    const rows = markdownRows(TABLE);
    assert.deepEqual(rows.slice(-3), [
      '| `INFERMETER_DUMMY_WINDOW` | `7` | a dummy window of the test, written over two source lines, 2 to 40 |',
      '| `INFERMETER_DUMMY_SLACK_MS` | `250` | a dummy timeout of the test |',
      '| `INFERMETER_DUMMY_SWITCH` | `on` | a dummy switch |',
    ]);
    // The documented table is the table's rendering: with the row added it is one row short.
    assert.deepEqual(documentedRows(), markdownRows(CONFIGURATION_TABLE));
    assert.notDeepEqual(documentedRows(), rows);
  });

  it("gives a limits row's default to the data plane's defaults", () => {
    assert.equal(groupDefaults(TABLE, 'limits').dummySlackMs, 250);
    assert.deepEqual(groupDefaults(CONFIGURATION_TABLE, 'limits'), { ...DEFAULT_LIMITS });
    assert.deepEqual({ ...loadConfig({}).limits }, { ...DEFAULT_LIMITS }, "the data plane's defaults are loadConfig's");
  });
});
