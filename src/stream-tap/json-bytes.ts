// JSON's byte classes, as the request body scanner reads them a byte at a time: white space,
// the bytes of a number or literal, a hex digit, and what each backslash escape stands for.

// What `\x` stands for in a JSON string, by x (0: not an escape JSON has; `\u` apart).
export const ESCAPES = new Uint8Array(128);
for (const [c, v] of [
  ['"', 0x22],
  ['\\', 0x5c],
  ['/', 0x2f],
  ['b', 0x08],
  ['f', 0x0c],
  ['n', 0x0a],
  ['r', 0x0d],
  ['t', 0x09],
] as const)
  ESCAPES[c.charCodeAt(0)] = v;

export function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

export function isPrimitiveByte(c: number): boolean {
  // digits, sign, point, exponent and the letters of true/false/null, NaN and Infinity
  return (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a);
}

export function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x66 ? l - 0x61 + 10 : -1;
}
