// JSON bodies in UTF-16 or UTF-32, read as Python's json.loads reads bytes (vLLM's and SGLang's
// FastAPI servers take them): the encoding told by a byte order mark or by where the first
// bytes are zero (json.detect_encoding), decoded strictly. RFC 8259 wants UTF-8 between
// systems, but an engine that serves such a body must not be able to serve it unmetered: the
// held body is read (and injected) in UTF-8.

/** The body in UTF-8 when it is UTF-16 or UTF-32 JSON as Python detects it; undefined otherwise (UTF-8, or not decodable). */
export function utf8FromJsonEncoding(body: Buffer): Buffer | undefined {
  const encoding = detectJsonEncoding(body);
  if (encoding === undefined) return undefined;
  try {
    let text: string;
    if (encoding === 'utf-16le' || encoding === 'utf-16be') {
      text = new TextDecoder(encoding, { fatal: true, ignoreBOM: false }).decode(body);
    } else {
      const le = encoding === 'utf-32le';
      if (body.length % 4 !== 0) return undefined;
      let start = 0;
      const first = le ? body.readUInt32LE(0) : body.readUInt32BE(0);
      if (first === 0xfeff) start = 4;
      const points: string[] = [];
      for (let i = start; i < body.length; i += 4) {
        const cp = le ? body.readUInt32LE(i) : body.readUInt32BE(i);
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return undefined;
        points.push(String.fromCodePoint(cp));
      }
      text = points.join('');
    }
    return Buffer.from(text, 'utf8');
  } catch {
    return undefined;
  }
}

export type WideEncoding = 'utf-16le' | 'utf-16be' | 'utf-32le' | 'utf-32be';

/** Python's json.detect_encoding, for the encodings other than UTF-8 (from a body's first 4 bytes, or all of a shorter one). */
export function detectJsonEncoding(b: Uint8Array): WideEncoding | undefined {
  if (b.length >= 4 && b[0] === 0 && b[1] === 0 && b[2] === 0xfe && b[3] === 0xff) return 'utf-32be';
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xfe && b[2] === 0 && b[3] === 0) return 'utf-32le';
  if (b.length >= 2 && b[0] === 0xfe && b[1] === 0xff) return 'utf-16be';
  if (b.length >= 2 && b[0] === 0xff && b[1] === 0xfe) return 'utf-16le';
  if (b.length >= 4) {
    if (b[0] === 0) return b[1] !== 0 ? 'utf-16be' : 'utf-32be';
    if (b[1] === 0) return b[2] !== 0 || b[3] !== 0 ? 'utf-16le' : 'utf-32le';
  } else if (b.length === 2) {
    if (b[0] === 0) return 'utf-16be';
    if (b[1] === 0) return 'utf-16le';
  }
  return undefined;
}
