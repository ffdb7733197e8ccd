// Request smuggling, differentially: a corpus of framing variants (Transfer-Encoding and
// Content-Length, alone, together, duplicated, obs-folded, nominated by Connection) on every
// method, sent raw to the proxy in front of a strict upstream (node:http's own parser). What
// the proxy read and what the upstream parsed must agree: never a request the proxy did not see
// (the body's bytes read as a request of their own), never a body changed on the way.
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, it } from 'node:test';
import { rawExchange } from '../helpers/raw-peers.ts';
import { startProxy } from '../helpers/proxy-harness.ts';
import { listen } from '../helpers/listen.ts';

const METHODS = ['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH'];
// What an upstream would read as a second request if the body lost its framing.
const SMUGGLED = 'GET /smuggled HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n';

function chunked(body: string, extension = ''): string {
  return `${body.length.toString(16)}${extension}\r\n${body}\r\n0\r\n\r\n`;
}

/** Framing variants: name, the headers after the request line, the body bytes, the body meant. */
const VARIANTS: ReadonlyArray<{ name: string; headers: string; bytes: string; body: string }> = [
  { name: 'chunked', headers: 'Transfer-Encoding: chunked\r\n', bytes: chunked(SMUGGLED), body: SMUGGLED },
  { name: 'chunked, upper case', headers: 'transfer-encoding: Chunked\r\n', bytes: chunked(SMUGGLED), body: SMUGGLED },
  { name: 'chunked with an extension', headers: 'Transfer-Encoding: chunked\r\n', bytes: chunked(SMUGGLED, ';ext=1'), body: SMUGGLED },
  {
    name: 'chunked, named by Connection',
    headers: 'Connection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n',
    bytes: chunked(SMUGGLED),
    body: SMUGGLED,
  },
  { name: 'gzip, chunked', headers: 'Transfer-Encoding: gzip, chunked\r\n', bytes: chunked(SMUGGLED), body: SMUGGLED },
  { name: 'chunked twice', headers: 'Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n', bytes: chunked(SMUGGLED), body: SMUGGLED },
  { name: 'content-length', headers: `Content-Length: ${SMUGGLED.length}\r\n`, bytes: SMUGGLED, body: SMUGGLED },
  {
    name: 'content-length, named by Connection',
    headers: `Connection: content-length\r\nContent-Length: ${SMUGGLED.length}\r\n`,
    bytes: SMUGGLED,
    body: SMUGGLED,
  },
  {
    name: 'content-length twice, equal',
    headers: `Content-Length: ${SMUGGLED.length}\r\nContent-Length: ${SMUGGLED.length}\r\n`,
    bytes: SMUGGLED,
    body: SMUGGLED,
  },
  { name: 'content-length twice, different', headers: `Content-Length: 0\r\nContent-Length: ${SMUGGLED.length}\r\n`, bytes: SMUGGLED, body: SMUGGLED },
  { name: 'both', headers: `Content-Length: ${SMUGGLED.length}\r\nTransfer-Encoding: chunked\r\n`, bytes: chunked(SMUGGLED), body: SMUGGLED },
  { name: 'obs-folded transfer-encoding', headers: 'Transfer-Encoding:\r\n chunked\r\n', bytes: chunked(SMUGGLED), body: SMUGGLED },
  { name: 'obs-folded content-length', headers: `Content-Length:\r\n ${SMUGGLED.length}\r\n`, bytes: SMUGGLED, body: SMUGGLED },
  { name: 'transfer-encoding with a space before the colon', headers: 'Transfer-Encoding : chunked\r\n', bytes: chunked(SMUGGLED), body: SMUGGLED },
  { name: 'identity', headers: 'Transfer-Encoding: identity\r\n', bytes: SMUGGLED, body: SMUGGLED },
];

describe('request framing', () => {
  it('never lets a body reach the upstream as a request of its own, on any method or framing', async (t) => {
    const parsed: Array<{ method: string; url: string; tag: string | undefined; body: string }> = [];
    const upstream = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        parsed.push({
          method: req.method ?? '',
          url: req.url ?? '',
          tag: req.headers['x-tag'] as string | undefined,
          body: Buffer.concat(chunks).toString('latin1'),
        });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': 2 });
        res.end('{}');
      });
    });
    const app = await startProxy(t, (await listen(t, upstream)).url);
    const read = new Map<string, number>();
    app.dataServer!.on('request', (req: http.IncomingMessage) => {
      const tag = req.headers['x-tag'] as string;
      read.set(tag, (read.get(tag) ?? 0) + 1);
    });

    const summary: string[] = [];
    for (const method of METHODS) {
      for (const path of ['/v1/models', '/v1/chat/completions']) {
        for (const variant of VARIANTS) {
          const tag = `${method} ${path} ${variant.name}`;
          const request = `${method} ${path} HTTP/1.1\r\nHost: x\r\nX-Tag: ${tag}\r\nConnection: close\r\n${variant.headers}\r\n${variant.bytes}`;
          const { text, closed } = await rawExchange(app.dataUrl, request, 5000);
          assert.equal(closed, true, `${tag}: the proxy answered and closed (${JSON.stringify(text.slice(0, 40))})`);
          const status = /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1];
          const reached = parsed.filter((p) => p.tag === tag);
          summary.push(`${tag}: ${status ?? 'none'}, upstream ${reached.length}`);
          assert.ok(reached.length <= (read.get(tag) ?? 0), `${tag}: the upstream parsed ${reached.length} requests, the proxy read ${read.get(tag) ?? 0}`);
          for (const p of reached) {
            assert.equal(p.method, method, tag);
            // HEAD and GET bodies may be dropped by an upstream; none may be changed or split.
            if (p.body !== '') assert.equal(p.body, variant.body, `${tag}: the body arrived whole`);
          }
        }
      }
    }
    const smuggled = parsed.filter((p) => p.url.includes('smuggled') || p.tag === undefined);
    assert.deepEqual(smuggled, [], `no request the proxy did not read reached the upstream\n${summary.join('\n')}`);
    assert.ok(parsed.length > METHODS.length * 2 * 4, `most variants were forwarded (${parsed.length})`);
  });
});
