// Embeddings as OpenAI serves them, for the simulated server: one vector per input, of the
// requested `dimensions` (16 by default), unit length and the same for the same text, as
// float arrays or, with `encoding_format: "base64"` (the openai SDK's default), as the base64
// of little-endian float32s.
import { createHash } from 'node:crypto';

const DEFAULT_DIMENSIONS = 16;

export function embeddingsResponse(body: Readonly<Record<string, unknown>>, model: string, promptTokens: number): Record<string, unknown> {
  const inputs = Array.isArray(body.input) ? body.input : [body.input];
  const dimensions =
    typeof body.dimensions === 'number' && Number.isInteger(body.dimensions) && body.dimensions > 0 && body.dimensions <= 4096
      ? body.dimensions
      : DEFAULT_DIMENSIONS;
  const base64 = body.encoding_format === 'base64';
  return {
    object: 'list',
    data: inputs.map((input, index) => {
      const vector = embed(JSON.stringify(input ?? ''), dimensions);
      return {
        object: 'embedding',
        index,
        embedding: base64 ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64') : Array.from(vector),
      };
    }),
    model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}

/** A unit vector drawn from the text's hash: the same text, the same vector. */
function embed(text: string, dimensions: number): Float32Array {
  const vector = new Float32Array(dimensions);
  let seed = createHash('sha256').update(text).digest();
  for (let i = 0; i < dimensions; i++) {
    if (i % 16 === 0 && i > 0) seed = createHash('sha256').update(seed).digest();
    vector[i] = (seed.readUInt16LE((i % 16) * 2) / 65535) * 2 - 1;
  }
  const norm = Math.hypot(...vector) || 1;
  for (let i = 0; i < dimensions; i++) vector[i] = vector[i]! / norm;
  // Float32Array writes in the platform's byte order: little-endian on every platform Node runs on.
  return vector;
}
