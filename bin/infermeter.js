#!/usr/bin/env -S node --max-semi-space-size=32 --initial-heap-size=64
// The command's launcher, in plain JavaScript so that any Node can read it: it checks the Node
// version before loading the rest, which needs Node >= 22.18 (TypeScript run as it is, zstd,
// and more), and says so in one line instead of a SyntaxError or ERR_UNKNOWN_FILE_EXTENSION.
// It runs the sources in a clone and the compiled dist/ in the package.
import { existsSync } from 'fs';

const NEEDED = [22, 18];
const found = process.versions.node.split('.').map(Number);
if (found[0] < NEEDED[0] || (found[0] === NEEDED[0] && found[1] < NEEDED[1])) {
  process.stderr.write(
    `infermeter: needs Node.js >= ${NEEDED.join('.')} (24 LTS recommended), found ${process.versions.node} at ${process.execPath}; ` +
      'install Node 24 (https://nodejs.org/en/download, or `npm i -g --prefix ~/.node24 node@24` and put ~/.node24/bin first on PATH); ' +
      'in a clone, `npm ci` without --ignore-scripts sets up the node@24 dev dependency that npm scripts run\n',
  );
  process.exit(1);
}

const source = new URL('../src/cli.ts', import.meta.url);
// No top-level await: an older Node must parse this file to print the line above.
import(existsSync(source) ? source.href : new URL('../dist/cli.js', import.meta.url).href).catch((error) => {
  process.stderr.write(`infermeter: ${error && error.stack ? error.stack : String(error)}\n`);
  process.exit(1);
});
