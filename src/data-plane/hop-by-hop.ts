// Hop-by-hop headers describe one connection, not the message (RFC 9110 §7.6.1): they are
// dropped at the proxy in both directions, along with any header the Connection header names.

/** The hop-by-hop names (besides those the Connection header lists). */
export const HOP_BY_HOP_HEADERS: readonly string[] = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'];

/** The header names a Connection header's value lists, in lower case; none for the common values. */
const NONE: readonly string[] = [];
function listedBy(connection: string): readonly string[] {
  // "keep-alive" and "close" name no other header: the common case needs no split, nor an array.
  if (connection === 'keep-alive' || connection === 'close' || connection === '') return NONE;
  const names: string[] = [];
  for (const token of connection.split(',')) {
    const name = token.trim().toLowerCase();
    // Content-Length frames the message: dropped because the Connection header named it, the
    // body's bytes would reach the next hop unframed (read there as a request of their own).
    if (name !== '' && name !== 'content-length') names.push(name);
  }
  return names;
}

/** Header names a raw list is filtered by: the hop-by-hop ones and some more, in lower case. */
export interface HeaderFilter {
  readonly names: ReadonlySet<string>;
  /** By name length: whether any name of that length is filtered (most names are not looked up). */
  readonly lengths: Uint8Array;
}

/** A filter for the hop-by-hop headers and `more` (lower case): those the proxy sets itself. */
export function headerFilter(more: readonly string[] = []): HeaderFilter {
  const names = new Set([...HOP_BY_HOP_HEADERS, ...more]);
  const lengths = new Uint8Array(64);
  for (const name of names) lengths[name.length] = 1;
  return { names, lengths };
}

/**
 * Appends to `out` a raw header list (name, value, name, value… as Node's rawHeaders holds it:
 * the sender's spelling, order and repeats) without the filter's names and those the Connection
 * header lists. Passed to Node as a list, the headers are written as they are, with no object
 * built, no header set one by one and no delete (which would turn an object into a slow
 * dictionary).
 */
export function forwardHeaders(raw: readonly string[], filter: HeaderFilter, out: string[]): string[] {
  let listed: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length !== 10 || name.toLowerCase() !== 'connection') continue;
    const names = listedBy(raw[i + 1]!);
    if (names.length > 0) (listed ??= []).push(...names);
  }
  const { names, lengths } = filter;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (lengths[name.length] === 1 || listed !== undefined) {
      const lower = name.toLowerCase();
      if (names.has(lower) || listed?.includes(lower) === true) continue;
    }
    out.push(name, raw[i + 1]!);
  }
  return out;
}
