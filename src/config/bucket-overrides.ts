// INFERMETER_BUCKETS_<FAMILY>: histogram buckets replaced by family. A name that is no family's
// is refused with the list of those that are (it would otherwise be ignored in silence).
import { bucketVariable, parseBuckets, type BucketOverrides } from '../metrics/exposition/buckets.ts';
import type { Env, Problem } from './parse/parse.ts';

export function parseBucketOverrides(env: Env, problem: Problem, families: readonly string[]): BucketOverrides {
  const overrides: Record<string, readonly number[]> = {};
  const known = new Map(families.map((f) => [bucketVariable(f), f]));
  for (const [variable, raw] of Object.entries(env)) {
    if (!variable.startsWith('INFERMETER_BUCKETS_') || raw === undefined) continue;
    const family = known.get(variable);
    if (family === undefined) {
      problem(variable, `the name of a histogram family: one of ${[...known.keys()].join(', ')}`, raw);
      continue;
    }
    const buckets = parseBuckets(raw);
    if (buckets === undefined) problem(variable, 'strictly increasing positive numbers separated by commas, e.g. 0.1,0.5,1,2', raw);
    else overrides[family] = buckets;
  }
  return Object.freeze(overrides);
}
