// model_name comes from client input: left as is, a client could create series without bound.
// The guard keeps at most N distinct values (the models the upstream lists at /v1/models always
// get their own); later new ones are counted under "other". Values are made safe for a label
// first: well-formed (a lone UTF-16 surrogate becomes U+FFFD, as UTF-8 encoding would make it
// anyway: names differing only there would otherwise be two series here and one on the wire),
// control characters replaced, length capped.

export interface LabelGuard {
  /** The label value to use for a model; `count` when a request starts (counts overflows once). */
  model(raw: string, count?: boolean): string;
  /** The label a value has now, without giving it a place: undefined when it has none. */
  kept(raw: string): string | undefined;
  /** Models the upstream serves: always kept. */
  admitListed(models: Iterable<string>): void;
  /** Distinct values kept so far. */
  readonly distinct: number;
}

const OTHER = 'other';
const MAX_LENGTH = 128;

export function sanitizeLabel(value: string): string {
  let v = value.isWellFormed() ? value : value.toWellFormed();
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(v)) v = v.replace(/[\u0000-\u001f\u007f]/g, '_');
  if (v.length > MAX_LENGTH) {
    v = v.slice(0, MAX_LENGTH);
    // Do not leave half of a surrogate pair at the end.
    const last = v.charCodeAt(v.length - 1);
    if (last >= 0xd800 && last <= 0xdbff) v = v.slice(0, -1);
  }
  return v;
}

/** `reserved`: values always kept besides `other` (`unknown` for models, `none` for tenants). */
export function createLabelGuard(max: number, overflow: () => void, reserved: readonly string[] = ['unknown']): LabelGuard {
  const kept = new Set<string>([...reserved, OTHER]);
  const listed = new Set<string>();
  let counted = 0; // values kept against the cap (listed ones and the reserved ones do not count)
  return {
    get distinct() {
      return kept.size;
    },
    model(raw, count = false) {
      if (kept.has(raw)) return raw;
      const v = sanitizeLabel(raw);
      if (kept.has(v)) return v;
      if (listed.has(v)) {
        kept.add(v);
        return v;
      }
      if (counted < max) {
        counted++;
        kept.add(v);
        return v;
      }
      if (count) overflow();
      return OTHER;
    },
    kept(raw) {
      if (kept.has(raw)) return raw;
      const v = sanitizeLabel(raw);
      return kept.has(v) ? v : undefined;
    },
    admitListed(models) {
      for (const m of models) listed.add(sanitizeLabel(m));
    },
  };
}
