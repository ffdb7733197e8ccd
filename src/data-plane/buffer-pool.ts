// Node's buffer pool in 8 KiB slabs. Buffer.allocUnsafe (and Buffer.from, Buffer.concat and
// Buffer.copyBytesFrom) hand a small buffer out as a slice of one shared slab, and a slice alive
// keeps its whole slab alive. Node 24's slabs are 64 KiB (8 KiB before): a small frame waiting in
// a slow client's socket, or an event held between reads, pinned 64 KiB; outliving a young
// collection, the slab went to the old generation, freed only at a full collection, and the
// resident set grew with stream length (docs/performance.md, "Memory bounds").
const POOL_BYTES = 8 * 1024;

/** Caps the pool's slab at 8 KiB (a smaller size set by the embedding process stays). */
export function boundBufferPool(): void {
  if (Buffer.poolSize > POOL_BYTES) Buffer.poolSize = POOL_BYTES;
}
