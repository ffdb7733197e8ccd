// Where the documented configuration table lives: the one path `npm run docs:config`
// (config-table.ts) rewrites and the tests of the variables table read (change it here when the
// table moves).
import { readFileSync } from 'node:fs';

export const CONFIGURATION_DOC = new URL('../docs/configuration.md', import.meta.url);

const ROW = /^\| `[A-Z][A-Z0-9_<>]*` \|/;

/** The rows of the documented configuration table (`| \`NAME\` | default | meaning |`), in order. */
export function documentedRows(text = readFileSync(CONFIGURATION_DOC, 'utf8')): string[] {
  return text.split('\n').filter((l) => ROW.test(l));
}

/** `text` with its one block of configuration rows replaced by `rows` (the table's rendering). */
export function replaceDocumentedRows(text: string, rows: readonly string[]): string {
  const lines = text.split('\n');
  const first = lines.findIndex((l) => ROW.test(l));
  const last = lines.findLastIndex((l) => ROW.test(l));
  if (first === -1) throw new Error('no configuration table rows found');
  if (lines.slice(first, last + 1).some((l) => !ROW.test(l))) throw new Error('the configuration rows are not one block: rewrite them by hand');
  return [...lines.slice(0, first), ...rows, ...lines.slice(last + 1)].join('\n');
}
