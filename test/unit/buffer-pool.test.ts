import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startInfermeter } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { boundBufferPool } from '../../src/data-plane/buffer-pool.ts';
import { silentLogger } from '../../src/log.ts';

/** The slab a small buffer is cut from once the current one is used up. */
function nextSlabBytes(): number {
  const first = Buffer.allocUnsafe(64).buffer;
  for (let i = 0; i < 4096; i++) {
    const b = Buffer.allocUnsafe(64);
    if (b.buffer !== first) return b.buffer.byteLength;
  }
  throw new Error('no new slab after 256 KiB of small buffers');
}

describe('buffer pool', () => {
  it('caps Node’s slab at 8 KiB, so a small buffer kept alive pins no more', () => {
    const was = Buffer.poolSize;
    try {
      Buffer.poolSize = 64 * 1024;
      boundBufferPool();
      assert.equal(Buffer.poolSize, 8 * 1024);
      assert.equal(nextSlabBytes(), 8 * 1024);
      Buffer.poolSize = 4 * 1024; // a smaller size the embedding process chose stays
      boundBufferPool();
      assert.equal(Buffer.poolSize, 4 * 1024);
    } finally {
      Buffer.poolSize = was;
    }
  });

  it('is capped by the data plane at start', async () => {
    const was = Buffer.poolSize;
    Buffer.poolSize = 64 * 1024;
    const app = await startInfermeter(
      loadConfig({
        INFERMETER_UPSTREAM: 'http://127.0.0.1:9',
        INFERMETER_PORT: '0',
        INFERMETER_MANAGEMENT_PORT: '0',
        INFERMETER_METRICS_PORT: '0',
      }),
      {
        log: silentLogger,
      },
    );
    try {
      assert.equal(Buffer.poolSize, 8 * 1024);
    } finally {
      await app.close();
      Buffer.poolSize = was;
    }
  });
});
