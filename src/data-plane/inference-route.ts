// Which requests are inference: POST to the OpenAI endpoints or Anthropic's Messages API, under
// any path prefix (/v1/... as well as /openai/v1/... or /serving/llama/v1/...). Everything else
// is proxied untouched and not measured.
//
// The route is decided on the path as the engines route it, not on its raw spelling: a client
// that writes `/v1/chat%2Fcompletions`, `/%761/chat/completions` or `/v1/chat/completions#x`
// is served chat completions by uvicorn (vLLM's and SGLang's server: it drops the fragment and
// decodes %XX before Starlette routes), so it is metered as chat completions here. Dot segments
// and empty segments are resolved as Go's ServeMux and path-cleaning routers resolve them: a
// spelling an engine serves as inference after such cleaning is metered as inference, and one
// it refuses (uvicorn answers 404) is metered as a failed inference request, never skipped; so
// is one with backslashes, a separator to WHATWG URL parsers.
// The target sent upstream is the client's, unchanged.
import type { InferenceApi } from '../measure/sample.ts';

const ROUTE = /\/v1\/(chat\/completions|completions|responses|embeddings|messages)\/?$/;

const APIS: Readonly<Record<string, InferenceApi>> = {
  'chat/completions': 'chat',
  completions: 'completions',
  responses: 'responses',
  embeddings: 'embeddings',
  messages: 'messages',
};

export function inferenceApi(method: string | undefined, url: string | undefined): InferenceApi | undefined {
  if (method !== 'POST' || url === undefined) return undefined;
  const match = ROUTE.exec(routedPath(url));
  return match === null ? undefined : APIS[match[1]!];
}

/**
 * The path of an origin-form target as a server routes it: query and fragment cut off, `%XX`
 * decoded (once, as Python's `unquote`: a malformed escape stays as written), then `.` and
 * `..` segments resolved and empty segments dropped. Only ASCII matters to the routes, so a
 * decoded byte is one character (a non-ASCII byte never makes an ASCII one).
 */
export function routedPath(target: string): string {
  let end = target.length;
  for (let i = 0; i < end; i++) {
    const c = target.charCodeAt(i);
    if (c === 0x3f || c === 0x23) end = i; // '?' or '#'
  }
  let path = end === target.length ? target : target.slice(0, end);
  if (path.includes('%')) path = percentDecode(path);
  // A backslash is a separator to WHATWG URL parsers (and to Windows servers): one too here.
  if (path.includes('\\')) path = path.replaceAll('\\', '/');
  if (path.includes('/.') || path.includes('//')) path = resolveSegments(path);
  return path;
}

function percentDecode(path: string): string {
  let out = '';
  let from = 0;
  for (let i = path.indexOf('%'); i !== -1 && i + 2 < path.length; i = path.indexOf('%', i + 1)) {
    const hi = hex(path.charCodeAt(i + 1));
    const lo = hex(path.charCodeAt(i + 2));
    if (hi < 0 || lo < 0) continue;
    out += path.slice(from, i) + String.fromCharCode(hi * 16 + lo);
    from = i + 3;
    i += 2;
  }
  return from === 0 ? path : out + path.slice(from);
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
