// A request's tenant, read where it arrives: a header's value, or the client's API key as
// `key-` + the first 12 hex digits of its SHA-256 (the key itself is never kept, logged or
// labelled); then the readable name of the alias file, if it has one; else the value made safe
// for a label like model_name. Reads the headers only: the forwarded request is not changed.
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { NO_TENANT } from '../metrics/state/tenant-label.ts';
import type { TenantSource } from './tenant-config.ts';
import { bearerCredentials } from '../bearer-token.ts';
import { sanitizeLabel } from '../metrics/exposition/label-guard.ts';

/** The tenant of a request's headers: never empty, `none` when it names none. */
export type TenantOf = (headers: IncomingHttpHeaders) => string;

/** The tenant an API key is metered as. */
export function keyTenant(key: string): string {
  return `key-${createHash('sha256').update(key).digest('hex').slice(0, 12)}`;
}

/**
 * The key of `Authorization: Bearer <key>`, else of Azure OpenAI's `api-key: <key>`, else of
 * Anthropic's `x-api-key: <key>`; '' when the request carries none.
 */
export function apiKeyOf(headers: IncomingHttpHeaders): string {
  const bearer = bearerCredentials(headers.authorization);
  if (bearer !== '') return bearer;
  for (const name of ['api-key', 'x-api-key']) {
    const v = headers[name];
    const key = typeof v === 'string' ? v.trim() : '';
    if (key !== '') return key;
  }
  return '';
}

/** `aliases()`: the mapping now (it may be reloaded while requests arrive); undefined when off. */
export function createTenantOf(source: TenantSource, aliases: () => ReadonlyMap<string, string>): TenantOf | undefined {
  const named = (raw: string): string => aliases().get(raw) ?? sanitizeLabel(raw);
  switch (source.kind) {
    case 'off':
      return undefined;
    case 'api-key':
      return (headers) => {
        const key = apiKeyOf(headers);
        return key === '' ? NO_TENANT : named(keyTenant(key));
      };
    case 'header': {
      const { header } = source;
      return (headers) => {
        const v = headers[header];
        // Node joins a repeated field with ", " (set-cookie aside, which is refused as a source).
        const value = utf8((Array.isArray(v) ? v.join(', ') : (v ?? '')).trim());
        return value === '' ? NO_TENANT : named(value);
      };
    }
  }
}

/**
 * A header value as its sender wrote it: Node reads header bytes as Latin-1, so a UTF-8 `café`
 * arrives as `cafÃ©`; read back as UTF-8 (bytes that are not UTF-8 become U+FFFD), it matches
 * an alias keyed `café`. ASCII, the usual case, is returned as it is.
 */
function utf8(value: string): string {
  for (let i = 0; i < value.length; i++) if (value.charCodeAt(i) > 0x7f) return Buffer.from(value, 'latin1').toString('utf8');
  return value;
}
