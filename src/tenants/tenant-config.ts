// Per-tenant metering's configuration: where a request's tenant comes from (INFERMETER_TENANT),
// the readable names of tenants (INFERMETER_TENANT_ALIASES, a JSON file read here at start and
// again on reload through parseTenantAliases) and how many get series of their own
// (INFERMETER_MAX_TENANTS, a row of the variables table). config.ts calls parseTenant with its
// problem list.
import { nonEmpty, parseJson, readJsonText, utf8Capped, type Env, type Problem } from '../config/parse/parse.ts';
import { NO_TENANT, OTHER_TENANT, UNAUTHENTICATED_TENANT } from '../metrics/state/tenant-label.ts';

/** Where the tenant comes from: nowhere, a request header's value, or the client's API key (hashed). */
export type TenantSource = { readonly kind: 'off' } | { readonly kind: 'header'; readonly header: string } | { readonly kind: 'api-key' };

export interface TenantConfig {
  readonly source: TenantSource;
  /** The alias file's path; undefined: no aliases. */
  readonly aliasesFile: string | undefined;
  /** Its mapping as read at start: a hashed key (`key-…`) or header value -> a readable name. */
  readonly aliases: ReadonlyMap<string, string>;
  /** Distinct tenant values with series of their own (aliased ones not counted against it). */
  readonly max: number;
}

// An RFC 9110 field name.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
// Headers that carry credentials: metered by their hash (api-key), never by their value.
const SECRET_HEADERS = new Set(['authorization', 'proxy-authorization', 'api-key', 'x-api-key', 'cookie']);
const MAX_ALIASES = 10_000;
const MAX_ALIAS_FILE_MIB = 4;
const readAliasText = utf8Capped(MAX_ALIAS_FILE_MIB * 1024 * 1024);
const ALIAS_NAME = /^[^\u0000-\u001f\u007f]{1,128}$/;

/** The tenant's source and aliases (the cap is the table's: config.ts adds it). */
export function parseTenant(env: Env, problem: Problem, readFile: (path: string) => string = readAliasText): Omit<TenantConfig, 'max'> {
  const source = parseSource(env.INFERMETER_TENANT, problem);
  const aliasesFile = nonEmpty(env.INFERMETER_TENANT_ALIASES);
  let aliases: ReadonlyMap<string, string> = new Map();
  if (aliasesFile !== undefined) {
    if (source.kind === 'off') problem('INFERMETER_TENANT_ALIASES', 'INFERMETER_TENANT to be header:<name> or api-key (aliases name tenants)', aliasesFile);
    const read = readTenantAliases(aliasesFile, readFile);
    if (read.ok) aliases = read.aliases;
    else problem('INFERMETER_TENANT_ALIASES', read.expected, aliasesFile);
  }
  return { source, aliasesFile, aliases };
}

function parseSource(raw: string | undefined, problem: Problem): TenantSource {
  const value = raw?.trim() ?? '';
  if (value === '' || value.toLowerCase() === 'off') return { kind: 'off' };
  if (value.toLowerCase() === 'api-key') return { kind: 'api-key' };
  const header = /^header:(.*)$/i.exec(value)?.[1]?.trim().toLowerCase();
  if (header !== undefined && TOKEN.test(header)) {
    if (!SECRET_HEADERS.has(header)) return { kind: 'header', header };
    // Its value would be a label: the key in plain text on /metrics.
    problem('INFERMETER_TENANT', `api-key for a credential header (${header} is never used as a label value)`, raw);
    return { kind: 'off' };
  }
  problem('INFERMETER_TENANT', 'off, header:<header name> (e.g. header:x-tenant-id) or api-key', raw);
  return { kind: 'off' };
}

export type AliasRead = { readonly ok: true; readonly aliases: ReadonlyMap<string, string> } | { readonly ok: false; readonly expected: string };

/** Reads and checks an alias file; what is wrong with it, when something is. */
export function readTenantAliases(path: string, readFile: (path: string) => string = readAliasText): AliasRead {
  const read = readJsonText(path, readFile);
  return read.ok ? parseTenantAliases(read.text) : read;
}

/**
 * `{"key-3f2a9c01b7d4": "search-team", "acme": "Acme Corp"}`: a JSON object of at most 10000
 * entries, each a tenant as it arrives (a hashed key or a header value) and its readable name
 * (1 to 128 printable characters, not `none` or `other`). Nothing in the file is ever printed:
 * a message names the entry by its position, not its content.
 */
export function parseTenantAliases(text: string): AliasRead {
  const expected = (what: string): AliasRead => ({ ok: false, expected: `a JSON object mapping tenants to names: ${what}` });
  const json = parseJson(text, MAX_ALIAS_FILE_MIB);
  if (!json.ok) return expected(json.what);
  const parsed = json.value;
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return expected('the file holds no object');
  const entries = Object.entries(parsed as Record<string, unknown>);
  if (entries.length > MAX_ALIASES) return expected(`more than ${MAX_ALIASES} entries`);
  const aliases = new Map<string, string>();
  for (const [i, [from, to]] of entries.entries()) {
    if (from === '') return expected(`entry ${i + 1} has an empty tenant`);
    if (typeof to !== 'string' || !ALIAS_NAME.test(to)) return expected(`entry ${i + 1}'s name is not 1 to 128 printable characters`);
    if (to === NO_TENANT || to === OTHER_TENANT || to === UNAUTHENTICATED_TENANT)
      return expected(`entry ${i + 1}'s name is reserved (none, other and unauthenticated are infermeter's)`);
    aliases.set(from, to);
  }
  return { ok: true, aliases };
}
