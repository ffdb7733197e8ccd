// The label caps filled as the scrape benchmarks fill them: one request for every (model, tenant)
// pair, names of 128 characters, 16 at a time.

/** A model or tenant name at the label cap's length: `<kind>-<i>-` padded to 128 characters. */
export const capName = (kind: string, i: number): string => `${kind}-${i}-`.padEnd(128, 'x');

/** Sends one request per (model, tenant) pair, `lanes` at a time; resolves once all are answered. */
export async function fillCaps(models: number, tenants: number, send: (model: string, tenant: string) => Promise<unknown>, lanes = 16): Promise<void> {
  let next = 0;
  const pairs = models * tenants;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < pairs) {
        const i = next++;
        await send(capName('model', i % models), capName('tenant', Math.floor(i / models)));
      }
    }),
  );
}
