// The parsing helpers every configuration module shares: the environment's type, the problem
// callback that collects what is wrong (config.ts turns the list into one ConfigError), and the
// parsers of the variables table (variables.ts), each a function from the trimmed text to a
// value, or undefined when the text is not one, with the words a refusal says it expected; and
// the reading of the JSON files some variables name (the tenant aliases, the SLO classes).
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';

export type Env = Readonly<Record<string, string | undefined>>;

/** Notes one bad value: the variable (or config.json key), what it expects, what it got. */
export type Problem = (variable: string, expected: string, got: string | undefined) => void;

/** Where a setting came from (a variable or a config.json key) and its raw value. */
export type Source = readonly [variable: string, value: string | number | undefined];

/** The value trimmed, or undefined when unset or blank. */
export function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/** The first source with a value (blank strings do not count), in the order given. */
export function firstDefined(...sources: Source[]): Source | undefined {
  for (const source of sources) {
    const value = source[1];
    if (value === undefined) continue;
    if (typeof value === 'string' && value.trim() === '') continue;
    return source;
  }
  return undefined;
}

/** Why a configuration file was refused before any of it was read: what a refusal says it expected. */
export class FileRefused extends Error {
  readonly expected: string;
  constructor(expected: string) {
    super(expected);
    this.expected = expected;
    this.name = 'FileRefused';
  }
}

// O_NONBLOCK: opening a FIFO for reading does not wait for a writer (the size and type are
// checked on the open descriptor, so a file swapped in between is the one checked).
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOCTTY ?? 0);
const READ_PIECE = 64 * 1024;

/**
 * A configuration file's bytes, read on the event loop (at start, on SIGHUP, when it changes):
 * refused before a byte is read when it is not a regular file (a FIFO would block the loop, a
 * device never end) or when its size is over `maxBytes`, and never more than `maxBytes` + 1
 * bytes read (a file that grew after the check).
 */
function readCapped(path: string, maxBytes: number): Buffer {
  const fd = openSync(path, OPEN_FLAGS);
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new FileRefused(`a regular file (this is ${fileKind(stat)})`);
    const over = (size: string): FileRefused => new FileRefused(`a file of at most ${sizeWords(maxBytes)} (this one has ${size})`);
    if (stat.size > maxBytes) throw over(`${stat.size} bytes`);
    const pieces: Buffer[] = [];
    let total = 0;
    for (;;) {
      const piece = Buffer.allocUnsafe(Math.min(READ_PIECE, maxBytes + 1 - total));
      const n = readSync(fd, piece, 0, piece.length, null);
      if (n === 0) break;
      pieces.push(n === piece.length ? piece : piece.subarray(0, n));
      total += n;
      if (total > maxBytes) throw over('more bytes');
    }
    return Buffer.concat(pieces, total);
  } finally {
    closeSync(fd);
  }
}

/** readCapped's bytes as UTF-8 text: the reader of the JSON configuration files. */
export const utf8Capped =
  (maxBytes: number) =>
  (path: string): string =>
    readCapped(path, maxBytes).toString('utf8');

function fileKind(stat: Stats): string {
  if (stat.isDirectory()) return 'a directory';
  if (stat.isFIFO()) return 'a FIFO';
  if (stat.isSocket()) return 'a socket';
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return 'a device';
  return 'something else';
}

const sizeWords = (bytes: number): string => (bytes % (1024 * 1024) === 0 ? `${bytes / 1024 / 1024} MiB` : `${bytes} bytes`);

type Read<T> = ({ readonly ok: true } & T) | { readonly ok: false; readonly expected: string };

/** A JSON file's text read with `readFile`, or what a refusal says of an unreadable one. */
export function readJsonText(path: string, readFile: (path: string) => string): Read<{ readonly text: string }> {
  try {
    return { ok: true, text: readFile(path) };
  } catch (error) {
    if (error instanceof FileRefused) return { ok: false, expected: `a JSON file: ${error.expected}` };
    return { ok: false, expected: `a readable JSON file (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})` };
  }
}

/** JSON of at most `maxMiB` MiB parsed, or what is wrong with it (the end of a refusal's words). */
export type JsonRead = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly what: string };

export function parseJson(text: string, maxMiB: number): JsonRead {
  if (text.length > maxMiB * 1024 * 1024) return { ok: false, what: `the file is larger than ${maxMiB} MiB` };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, what: 'the file is not valid JSON' };
  }
}

export interface Parser<T> {
  /** What a refusal says the variable expects: "an integer from 1 to 3600". */
  readonly expected: string;
  /** The value of a set (trimmed, not blank) text; undefined: not one. */
  readonly read: (text: string) => T | undefined;
  /** A default as the documentation shows it (Markdown). A method: a table holds parsers of every type. */
  show(value: T): string;
  /** An integer's bounds: the documentation's `{range}`, and the range tests' edges. */
  readonly range?: { readonly min: number; readonly max: number };
  /** More words for a refusal of this text in particular (a likely cause), appended to `expected`. */
  readonly explain?: (text: string) => string;
}

const code = (value: unknown): string => `\`${String(value)}\``;

/** A decimal integer from min to max, both included. */
export function integer(min: number, max: number, expected = `an integer from ${min} to ${max}`): Parser<number> {
  return {
    expected,
    range: { min, max },
    show: code,
    read: (text) => {
      if (!/^\d+$/.test(text)) return undefined;
      const n = Number(text);
      return Number.isSafeInteger(n) && n >= min && n <= max ? n : undefined;
    },
  };
}

const SERVICE_LINK_HINT =
  '; this looks like a Kubernetes service link from a Service named after the variable: set enableServiceLinks: false on the pod or rename the Service';

/** A TCP port, 0 for a free one. */
export function port(): Parser<number> {
  return {
    expected: 'an integer port from 0 to 65535 (0 picks a free port)',
    range: { min: 0, max: 65535 },
    show: code,
    read: (text) => (/^\d{1,5}$/.test(text) && Number(text) <= 65535 ? Number(text) : undefined),
    // Kubernetes sets <SERVICE>_PORT=tcp://ip:port for every Service of the namespace: a Service
    // named infermeter (or infermeter-metrics, ...) lands here. Say so rather than only refuse.
    explain: (text) => (/^tcp:\/\//.test(text) ? SERVICE_LINK_HINT : ''),
  };
}

const MiB = 1024 * 1024;

/** A byte count: an integer, its default shown with its size in MiB when it is a whole number of them. */
export function byteSize(min: number, max: number): Parser<number> {
  const base = integer(min, max);
  return { ...base, show: (n) => (n >= MiB && n % MiB === 0 ? `${code(n)} (${n / MiB} MiB)` : code(n)) };
}

/** 1 or 0, also true/false and on/off, in any case. */
export function onOff(): Parser<boolean> {
  return {
    expected: '1 or 0 (also true/false, on/off)',
    show: (on) => code(on ? 1 : 0),
    read: (text) => switchWord(text),
  };
}

/** A switch word as MindIE's config.json and the variables spell it; undefined: not one. */
export function switchWord(text: string): boolean | undefined {
  const v = text.toLowerCase();
  if (v === '1' || v === 'true' || v === 'on') return true;
  if (v === '0' || v === 'false' || v === 'off') return false;
  return undefined;
}

/** One word of a list, in any case. */
export function oneOf<const T extends string>(words: readonly T[], expected: string): Parser<T> {
  return {
    expected,
    show: code,
    read: (text) => {
      const v = text.toLowerCase();
      return (words as readonly string[]).includes(v) ? (v as T) : undefined;
    },
  };
}

/** Another parser's values, or the word `auto` (which the caller resolves). */
export function orAuto<T>(parser: Parser<T>): Parser<T | 'auto'> {
  return {
    ...parser,
    show: (v) => (v === 'auto' ? '`auto`' : parser.show(v)),
    read: (text) => (text.toLowerCase() === 'auto' ? 'auto' : parser.read(text)),
  };
}

/** Label values end up in series: printable and of reasonable size. */
export const LABEL_VALUE = /^[^\u0000-\u001f\u007f]{1,256}$/;

/** A text matching `pattern` (printable characters, a length). */
export function text(pattern: RegExp, expected: string): Parser<string> {
  return { expected, show: code, read: (t) => (pattern.test(t) ? t : undefined) };
}

/**
 * Reads one variable with a parser: its default when unset or blank, else the parsed value; a
 * value the parser refuses is noted (with the text as given) and the default kept.
 */
export function readWith<T>(parser: Parser<T>, variable: string, raw: string | undefined, fallback: T, problem: Problem): T {
  const value = nonEmpty(raw);
  if (value === undefined) return fallback;
  const parsed = parser.read(value);
  if (parsed !== undefined) return parsed;
  problem(variable, parser.expected + (parser.explain?.(value) ?? ''), raw);
  return fallback;
}
