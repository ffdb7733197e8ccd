// The Node floor: a bare pass-through reverse proxy with node:http piping and a keep-alive
// agent, nothing else. What any Node proxy costs at least. Prints its port on stdout.
// `--head-at-once`: the response head written when the upstream's arrives (as infermeter must:
// never later than the upstream sent it) instead of with the first body bytes, Node's default
// for writeHead then pipe; what that costs the floor in the wave pattern (bench/run.ts).
import http from 'node:http';

const target = new URL(process.argv[2] ?? 'http://127.0.0.1:8000');
const headAtOnce = process.argv[3] === '--head-at-once';
const agent = new http.Agent({ keepAlive: true, scheduling: 'lifo' });

const server = http.createServer({ noDelay: true, keepAliveTimeout: 120_000 }, (req, res) => {
  const upstream = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent }, (up) => {
    res.writeHead(up.statusCode ?? 502, up.headers);
    if (headAtOnce) res.flushHeaders();
    up.pipe(res);
  });
  upstream.on('error', () => res.destroy());
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`);
});
// A clean exit on SIGTERM, so that `--cpu-prof` (bench:profile --target=passthrough) is written.
process.on('SIGTERM', () => process.exit(0));
