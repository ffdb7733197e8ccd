// `npm run docs:config`: writes the documented configuration table's rows from the variables
// table (src/config/variables.ts), where configuration-doc.ts says the table lives.
// The test of test/unit/config.test.ts checks them row by row; this is the way to make it pass
// after a row changed.
import { readFileSync, writeFileSync } from 'node:fs';
import { markdownRows } from '../src/config/variables/variable-table.ts';
import { CONFIGURATION_TABLE } from '../src/config/variables.ts';
import { CONFIGURATION_DOC, replaceDocumentedRows } from './configuration-doc.ts';

const before = readFileSync(CONFIGURATION_DOC, 'utf8');
const after = replaceDocumentedRows(before, markdownRows(CONFIGURATION_TABLE));
if (after === before) console.log(`${CONFIGURATION_DOC.pathname}: the configuration rows are current`);
else {
  writeFileSync(CONFIGURATION_DOC, after);
  console.log(`${CONFIGURATION_DOC.pathname}: configuration rows rewritten (${CONFIGURATION_TABLE.length})`);
}
