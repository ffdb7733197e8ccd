// Which requests are inference: POST to a route any engine family serves inference on, under
// any path prefix (/v1/... as well as /openai/v1/... or /serving/llama/v1/...; llama-server
// takes an --api-prefix): the OpenAI endpoints and Anthropic's Messages API; llama-server's own
// (`/completion`, `/completions`, `/infill`, `/embedding(s)`, and `/chat/completions`,
// `/responses` without /v1: what the OpenAI SDK sends when its base URL lacks /v1); vLLM's
// SageMaker `/invocations`; SGLang's and TGI's `/generate` and `/generate_stream`; Ollama's
// `/api/chat`, `/api/generate`, `/api/embed(dings)`. Everything else is proxied untouched and not
// measured.
//
// The route is decided on the path as the engines route it, not on its raw spelling: a client
// that writes `/v1/chat%2Fcompletions`, `/%761/chat/completions` or `/v1/chat/completions#x`
// is served chat completions by uvicorn (vLLM's and SGLang's server: it drops the fragment and
// decodes %XX before Starlette routes), so it is metered as chat completions here; one that
// writes `/v1/%u0063hat/completions` is served it by cpp-httplib (llama-server's: it decodes
// `%uXXXX` too), so that reading is tried as well. A path is inference when any engine's reading
// routes it so. Dot segments and empty segments are resolved as Go's ServeMux and path-cleaning
// routers resolve them: a
// spelling an engine serves as inference after such cleaning is metered as inference, and one
// it refuses (uvicorn answers 404) is metered as a failed inference request, never skipped; so
// is one with backslashes, a separator to WHATWG URL parsers.
// The target sent upstream is the client's, unchanged. Which routes there are, and which API
// each is, is the API table's (measure/inference-apis.ts): the router is built from its rows.
import { INFERENCE_APIS, type InferenceApi, type InferenceApiRow, type RouteKind } from '../measure/inference-apis.ts';

/** An inference route: its API, and whether the engine's route takes OpenAI's `stream_options` (usage injection). */
export interface InferenceRoute {
  readonly api: InferenceApi;
  readonly streamOptions: boolean;
}

/** Which inference route a request is, if any: by its method and origin-form target. */
export type InferenceRouter = (method: string | undefined, url: string | undefined) => InferenceRoute | undefined;

/** The router of an API table; refuses a route two rows claim. */
export function createInferenceRouter(table: readonly InferenceApiRow[] = INFERENCE_APIS): InferenceRouter {
  // By route, then with /v1 before it and without (llama-server's own where it differs).
  const routes = new Map<string, readonly [v1: InferenceRoute, bare: InferenceRoute | undefined]>();
  for (const row of table) {
    // A test's own table may add names the type does not list; the rest of the code takes the name as given.
    const api = row.name as InferenceApi;
    const route = (kind: RouteKind | undefined): InferenceRoute | undefined =>
      kind === undefined ? undefined : { api, streamOptions: kind === 'openai' && row.streamOptions };
    for (const [segments, [v1, bare]] of Object.entries(row.routes)) {
      if (routes.has(segments)) throw new Error(`the route ${segments} is in two rows of the API table`);
      routes.set(segments, [route(v1)!, route(bare)]);
    }
  }
  // The routes as one alternation at the path's end (a trailing slash allowed), an optional /v1
  // before them: whatever the prefix.
  const escaped = [...routes.keys()].map((r) => r.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'));
  const pattern = new RegExp(`(\\/v1)?\\/(${escaped.join('|')})\\/?$`);
  const routeOf = (path: string): InferenceRoute | undefined => {
    const match = pattern.exec(path);
    if (match === null) return undefined;
    const both = routes.get(match[2]!)!;
    return match[1] === undefined ? both[1] : both[0];
  };
  return (method, url) => {
    if (method !== 'POST' || url === undefined) return undefined;
    // cpp-httplib's reading differs only where a `%u` escape is; where both route, its reading
    // (the engine that decodes the escape) names the API.
    const route = url.includes('%u') ? routeOf(routedPath(url, httplibDecode)) : undefined;
    return route ?? routeOf(routedPath(url));
  };
}

/** The real API table's router. */
export const inferenceRoute: InferenceRouter = createInferenceRouter();

/**
 * The path of an origin-form target as a server routes it: query and fragment cut off, `%XX`
 * decoded (once, as Python's `unquote`: a malformed escape stays as written), then `.` and
 * `..` segments resolved and empty segments dropped. Only ASCII matters to the routes, so a
 * decoded byte is one character (a non-ASCII byte never makes an ASCII one).
 */
export function routedPath(target: string, decode: (path: string) => string = percentDecode): string {
  let end = target.length;
  for (let i = 0; i < end; i++) {
    const c = target.charCodeAt(i);
    if (c === 0x3f || c === 0x23) end = i; // '?' or '#'
  }
  let path = end === target.length ? target : target.slice(0, end);
  if (path.includes('%')) path = decode(path);
  // A backslash is a separator to WHATWG URL parsers (and to Windows servers): one too here.
  if (path.includes('\\')) path = path.replaceAll('\\', '/');
  if (path.includes('/.') || path.includes('//')) path = resolveSegments(path);
  return path;
}

function percentDecode(path: string): string {
  return decodeEscapes(path, false);
}

/**
 * cpp-httplib's `decode_url` (and `decode_path_component`), which llama-server routes on: `%XX`
 * and `%uXXXX` (lower-case u) in one pass; a surrogate's `%uD800`-`%uDFFF` decodes to nothing.
 * A code point past ASCII stays one non-ASCII character: it never makes a route's.
 */
export function httplibDecode(path: string): string {
  return decodeEscapes(path, true);
}

/** `%XX` decoded once (a malformed escape stays as written), and `%uXXXX` too when `unicode`. */
function decodeEscapes(path: string, unicode: boolean): string {
  let out = '';
  let from = 0;
  for (let i = path.indexOf('%'); i !== -1 && i + 2 < path.length; i = path.indexOf('%', i + 1)) {
    if (unicode && path.charCodeAt(i + 1) === 0x75) {
      const code = i + 5 < path.length ? hex4(path, i + 2) : -1;
      if (code < 0) continue;
      out += path.slice(from, i) + (code >= 0xd800 && code < 0xe000 ? '' : String.fromCharCode(code));
      from = i + 6;
      i += 5;
      continue;
    }
    const hi = hex(path.charCodeAt(i + 1));
    const lo = hex(path.charCodeAt(i + 2));
    if (hi < 0 || lo < 0) continue;
    out += path.slice(from, i) + String.fromCharCode(hi * 16 + lo);
    from = i + 3;
    i += 2;
  }
  return from === 0 ? path : out + path.slice(from);
}

function hex4(s: string, at: number): number {
  let code = 0;
  for (let k = at; k < at + 4; k++) {
    const d = hex(s.charCodeAt(k));
    if (d < 0) return -1;
    code = code * 16 + d;
  }
  return code;
}

function hex(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  return l >= 0x61 && l <= 0x66 ? l - 0x61 + 10 : -1;
}

/** RFC 3986's remove_dot_segments, with empty segments dropped too (`//` as `/`). */
function resolveSegments(path: string): string {
  const kept: string[] = [];
  const segments = path.split('/');
  let trailing = false;
  for (let i = 1; i < segments.length; i++) {
    const s = segments[i]!;
    trailing = s === '' || s === '.' || s === '..';
    if (s === '..') kept.pop();
    else if (s !== '' && s !== '.') kept.push(s);
  }
  return `/${kept.join('/')}${trailing && kept.length > 0 ? '/' : ''}`;
}
