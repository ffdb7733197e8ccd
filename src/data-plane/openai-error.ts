// The one place where the proxy's own failures become responses, in the error shape the
// OpenAI SDKs parse ({"error": {message, type, param, code}}), so a client sees a familiar error.

export type ProxyErrorKind = 'upstream_unreachable' | 'upstream_timeout' | 'upstream_reset' | 'upstream_protocol' | 'overloaded' | 'body_too_large';

const STATUS: Readonly<Record<ProxyErrorKind, number>> = {
  upstream_unreachable: 502,
  upstream_timeout: 504,
  upstream_reset: 502,
  upstream_protocol: 502,
  overloaded: 503,
  body_too_large: 413,
};

const MESSAGE: Readonly<Record<ProxyErrorKind, string>> = {
  upstream_unreachable: 'infermeter could not reach the model server',
  upstream_timeout: 'the model server did not answer in time',
  upstream_reset: 'the model server closed the connection',
  upstream_protocol: 'the model server answered with something that is not valid HTTP',
  overloaded: 'too many requests in flight; try again later',
  body_too_large: 'the request body is too large for infermeter to give it a length the model server can read',
};

export interface ErrorResponse {
  readonly status: number;
  readonly body: string;
}

/** `detail` is an error code such as ECONNREFUSED, never a header or payload value. */
export function proxyErrorResponse(kind: ProxyErrorKind, detail: string | undefined): ErrorResponse {
  const message = detail === undefined ? MESSAGE[kind] : `${MESSAGE[kind]} (${detail})`;
  const body = JSON.stringify({ error: { message, type: 'upstream_error', param: null, code: kind } });
  return { status: STATUS[kind], body };
}
