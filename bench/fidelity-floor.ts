// The fidelity bench's Node floor: the bare pass-through (passthrough.ts) stamping a request's
// times where a plain node:http proxy can see them: t0 at the 'request' event, TTFB when the
// upstream's head is flushed to the client, TTFT when the first body chunk was handed to the
// client, e2e just before the last write (res.end). One JSON line per request, named by its
// X-Request-Id, in the access log's fields. Prints its port on stdout.
import http from 'node:http';
import { createWriteStream } from 'node:fs';

const target = new URL(process.argv[2] ?? 'http://127.0.0.1:8000');
const log = createWriteStream(process.argv[3] ?? '/dev/null', { flags: 'a' });
const agent = new http.Agent({ keepAlive: true, scheduling: 'lifo' });
const ms = (from: number, to: number | undefined) => (to === undefined ? undefined : Math.round((to - from) * 1000) / 1000);

const server = http.createServer({ noDelay: true, keepAliveTimeout: 120_000 }, (req, res) => {
  const t0 = performance.now();
  let ttfb: number | undefined;
  let ttft: number | undefined;
  let end: number | undefined;
  const upstream = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent }, (up) => {
    res.writeHead(up.statusCode ?? 502, up.headers);
    res.flushHeaders();
    ttfb = performance.now();
    // Before the pipe's own 'end' listener: the stamp precedes the last write.
    up.prependListener('end', () => (end = performance.now()));
    up.pipe(res);
    // After the pipe's listener: the chunk was handed to the client.
    up.once('data', () => (ttft = performance.now()));
  });
  upstream.on('error', () => res.destroy());
  res.on('close', () => {
    upstream.destroy();
    log.write(`${JSON.stringify({ request_id: req.headers['x-request-id'], ttfb_ms: ms(t0, ttfb), ttft_ms: ms(t0, ttft), e2e_ms: ms(t0, end) })}\n`);
  });
  req.pipe(upstream);
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`);
});
