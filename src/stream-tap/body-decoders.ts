// The content-encodings a JSON response body is decoded from before its usage is read (gzip,
// deflate, brotli, zstd), each bounded: a body that would decode past the cap throws
// ERR_BUFFER_TOO_LARGE instead of filling memory.
import { brotliDecompressSync, gunzipSync, inflateSync, zstdDecompressSync } from 'node:zlib';

export type Decode = (body: Buffer, maxOutputLength: number) => Buffer;

const DECODERS: Readonly<Record<string, Decode>> = {
  gzip: (b, max) => gunzipSync(b, { maxOutputLength: max }),
  'x-gzip': (b, max) => gunzipSync(b, { maxOutputLength: max }),
  deflate: (b, max) => inflateSync(b, { maxOutputLength: max }),
  br: (b, max) => brotliDecompressSync(b, { maxOutputLength: max }),
  zstd: (b, max) => zstdDecompressSync(b, { maxOutputLength: max }),
};

/** The decoder for a content-encoding value (trimmed, any case), or undefined when none is known. */
export function decoderFor(encoding: string): Decode | undefined {
  const name = encoding.trim().toLowerCase();
  return Object.hasOwn(DECODERS, name) ? DECODERS[name] : undefined;
}
