// Prices as the operator wrote them, turned into integer nano-units of the currency exactly:
// the decimal text's digits are shifted, never multiplied as a float (0.1 * 1e9 is fine, 0.29 *
// 1e9 is 290000000.00000006). At most nine digits after the point: a finer price has no nano-unit.

const DECIMAL = /^(\d{1,12})(?:\.(\d{1,9}))?$/;

/** `"0.20"` -> 200000000n; undefined for anything but a plain non-negative decimal. */
export function decimalNanos(text: string): bigint | undefined {
  const m = DECIMAL.exec(text.trim());
  if (m === null) return undefined;
  return BigInt(m[1]!) * 1_000_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'));
}

/** Nano-units as a decimal of the currency: 1234500000n -> "1.2345". */
export function nanosText(nanos: bigint): string {
  const negative = nanos < 0n;
  const n = negative ? -nanos : nanos;
  const whole = n / 1_000_000_000n;
  const fraction = (n % 1_000_000_000n).toString().padStart(9, '0').replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${fraction === '' ? '' : `.${fraction}`}`;
}
