import { readFileSync } from 'node:fs';

/** The package version, read once; the same file serves src/ (npm start) and dist/ (published). */
export const VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
