// The request target as the routes may use it. Node's parser accepts targets that URL does
// not (`http://[::1/v1/...`), and both routes resolve a target against the upstream: a target
// that cannot be resolved is refused here, before any route sees it, instead of throwing inside
// one. An absolute-form target (what a client sends a forward proxy) is reduced to its path and
// query, so that every route sees origin form.

/** The target in origin form (`/path?query`), or undefined when it cannot be proxied. */
export function originForm(target: string | undefined): string | undefined {
  if (target === undefined || target === '') return undefined;
  // The common case, `/v1/...`: nothing to parse.
  if (target.charCodeAt(0) === 0x2f && target.charCodeAt(1) !== 0x2f) return target;
  // `//x` is a path here, not an authority (URL would read a host from it).
  if (target.charCodeAt(0) === 0x2f) return URL.canParse(`http://base.invalid${target}`) ? target : undefined;
  if (!/^https?:\/\//i.test(target)) return undefined; // asterisk form, authority form, a bare word
  let parsed: URL;
  try {
    parsed = new URL(target);
  } catch {
    return undefined;
  }
  return `${parsed.pathname}${parsed.search}`;
}

/** The answer to a target that cannot be proxied, in the OpenAI error shape; the connection closes. */
export const BAD_TARGET_BODY = JSON.stringify({
  error: { message: 'the request target is not a valid path or URL', type: 'invalid_request_error', param: null, code: 'invalid_request_target' },
});
