// The engine's URLs: INFERMETER_UPSTREAM, the model server every request goes to (refused with
// credentials, a query, a fragment or the clients' trailing /v1, each said so), and the URLs of
// its own metrics (INFERMETER_UPSTREAM_METRICS, INFERMETER_UPSTREAM_METRICS_JSON), `off` allowed.
import { nonEmpty, type Problem } from './parse/parse.ts';

export function parseUpstream(raw: string | undefined, required: boolean, problem: Problem): URL | undefined {
  const value = nonEmpty(raw);
  const expected = 'an http:// or https:// URL of the model server, e.g. http://127.0.0.1:8000';
  if (value === undefined) {
    if (required) problem('INFERMETER_UPSTREAM', expected, raw);
    return undefined;
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problem('INFERMETER_UPSTREAM', expected, raw);
    return undefined;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    problem('INFERMETER_UPSTREAM', expected, raw);
    return undefined;
  }
  if (url.username !== '' || url.password !== '' || url.hash !== '' || url.search !== '') {
    problem('INFERMETER_UPSTREAM', `${expected} without credentials, query or fragment`, redactUrl(url));
    return undefined;
  }
  // The base URL OpenAI clients are given ends in /v1; the model server's does not: clients'
  // paths already start with /v1, and every request would go to /v1/v1/... and get a 404.
  if (/\/v1\/?$/.test(url.pathname)) {
    const fixed = new URL(url.href);
    fixed.pathname = url.pathname.replace(/\/v1\/?$/, '');
    problem(
      'INFERMETER_UPSTREAM',
      `the model server's URL without the trailing /v1 (clients' paths start with /v1 already; with it, requests would go to /v1/v1/...): set ${fixed.href.replace(/\/$/, '')}`,
      raw,
    );
    return undefined;
  }
  return url;
}

function redactUrl(url: URL): string {
  const copy = new URL(url.href);
  if (copy.password !== '') copy.password = '***';
  return copy.href;
}

/** A metrics URL: unset gives `fallback`, `off` gives undefined. */
export function parseMetricsUrl(variable: string, raw: string | undefined, fallback: URL | undefined, problem: Problem): URL | undefined {
  const value = nonEmpty(raw);
  if (value === undefined) return fallback;
  if (value.toLowerCase() === 'off') return undefined;
  try {
    const url = new URL(value);
    if (url.protocol === 'http:' || url.protocol === 'https:') return url;
  } catch {
    // reported below
  }
  problem(variable, 'an http:// or https:// URL, or off', raw);
  return undefined;
}
