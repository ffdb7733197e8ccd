// Where the documented configuration table lives: the one path the README-vs-code tests of the
// variables table read (change it here when the table moves).
import { readFileSync } from 'node:fs';

export const CONFIGURATION_DOC = new URL('../../README.md', import.meta.url);

/** The rows of the documented configuration table (`| \`NAME\` | default | meaning |`), in order. */
export function documentedRows(): string[] {
  return readFileSync(CONFIGURATION_DOC, 'utf8')
    .split('\n')
    .filter((l) => /^\| `[A-Z][A-Z0-9_<>]*` \|/.test(l));
}
