// The glob patterns of the configuration files (the SLO classes', the prices'): `*` any run of
// characters, `?` one, the rest literal, matched in linear time.

/** A glob of the SLO file, ready to match: its characters (code points). */
export type Glob = readonly string[];

export const compileGlob = (pattern: string): Glob => Array.from(pattern);

/**
 * Whether `text` matches the glob (`*` any run of characters, `?` one, the rest literal), in
 * time linear in the product of their lengths at worst: a failure after a `*` goes back to the
 * last `*` only (an earlier one could not do better), never into the nested backtracking a
 * regular expression of the glob would (`*-*-*-*-*x` against a long name took seconds). `steps`,
 * when given, counts the comparisons (the tests' bound).
 */
export function globMatches(glob: Glob, text: string, steps?: { n: number }): boolean {
  const t = Array.from(text);
  let p = 0;
  let i = 0;
  let star = -1; // the last `*` seen in the glob
  let resume = 0; // where in the text that `*`'s run ends so far
  while (i < t.length) {
    if (steps !== undefined) steps.n++;
    const g = glob[p];
    if (g === '*') {
      star = p++;
      resume = i;
    } else if (g !== undefined && (g === '?' || g === t[i])) {
      p++;
      i++;
    } else if (star !== -1) {
      p = star + 1;
      i = ++resume;
    } else return false;
  }
  while (glob[p] === '*') p++;
  return p === glob.length;
}
