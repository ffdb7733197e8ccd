// Seeded randomness, so a failing re-chunking can be replayed from the seed in its message.

/** mulberry32: small, fast, good enough for test data. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Splits bytes at random boundaries (1..maxLen bytes a piece), multibyte characters included. */
export function rechunk(bytes: Uint8Array, random: () => number, maxLen = 64): Buffer[] {
  const chunks: Buffer[] = [];
  let i = 0;
  while (i < bytes.length) {
    const len = 1 + Math.floor(random() * maxLen);
    chunks.push(Buffer.from(bytes.subarray(i, i + len)));
    i += len;
  }
  return chunks;
}
