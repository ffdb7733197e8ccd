// The tests' one POST: a body (a string or a Buffer as it is, anything else as JSON) sent with
// content-type application/json and the headers given, over fetch; and the same request as raw
// bytes, for a target fetch would normalise.
import { rawExchange } from './raw-peers.ts';

type Body = string | Buffer | object;

/** The answer, read whole. */
export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly bytes: Buffer;
  /** The bytes as UTF-8, as Response.text() reads them. */
  readonly text: string;
}

/** The request, its answer unread: for a test that reads the stream as it comes, or not at all. */
export function postResponse(url: string, body: Body, headers: Record<string, string> = {}): Promise<Response> {
  const bytes = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: bytes });
}

export async function post(url: string, body: Body, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await postResponse(url, body, headers);
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, bytes, text: new TextDecoder().decode(bytes) };
}

/**
 * A POST of `body` to `target` as written (no URL normalisation), on a connection of its own
 * (Connection: close): the status, the engine's `x-served` header and the body as text.
 */
export async function rawPost(base: string, target: string, body: string): Promise<{ status: number; served: string | undefined; body: string }> {
  const head = `POST ${target} HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
  const { text } = await rawExchange(base, head + body);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
  const served = /\r\nx-served: ([a-z]+)\r\n/i.exec(text)?.[1];
  const split = text.indexOf('\r\n\r\n');
  return { status, served, body: split === -1 ? '' : text.slice(split + 4) };
}
