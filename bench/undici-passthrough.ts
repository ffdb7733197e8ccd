// The undici floor: the pass-through of passthrough.ts `--head-at-once` (a node:http server, the
// head written when the upstream's arrives, the body as it comes) with undici's Pool and a
// dispatch handler as its upstream client instead of node:http's. What a Node proxy on undici
// costs at least (bench/run.ts). Prints its port on stdout.
import http from 'node:http';
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';

const target = new URL(process.argv[2] ?? 'http://127.0.0.1:8000');
const pool = new Pool(target.origin, { connections: 256, pipelining: 1 });
// undici frames the request itself and refuses these (they are hop-by-hop anyway).
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'expect', 'proxy-connection']);

const server = http.createServer({ noDelay: true, keepAliveTimeout: 120_000 }, (req, res) => {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) if (value !== undefined && !HOP.has(name)) headers[name] = value;
  let upstream: Dispatcher.DispatchController | undefined;
  const handler: Dispatcher.DispatchHandler = {
    onRequestStart(controller) {
      upstream = controller;
    },
    onResponseStart(controller, statusCode, responseHeaders) {
      res.writeHead(statusCode, responseHeaders);
      res.flushHeaders();
      res.on('drain', () => controller.resume());
    },
    onResponseData(controller, chunk) {
      if (!res.write(chunk)) controller.pause();
    },
    onResponseEnd() {
      res.end();
    },
    onResponseError() {
      res.destroy();
    },
  };
  res.on('close', () => {
    if (!res.writableFinished) upstream?.abort(new Error('client gone'));
  });
  const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
  pool.dispatch({ origin: target.origin, path: req.url ?? '/', method: req.method as Dispatcher.HttpMethod, headers, body: hasBody ? req : null }, handler);
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`);
});
// A clean exit on SIGTERM, so that `--cpu-prof` (bench:profile) is written.
process.on('SIGTERM', () => process.exit(0));
