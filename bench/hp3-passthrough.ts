// http-proxy-3 with nothing else: how much of infermeter's cost is the proxy library's (a bench
// reference, not a target of the goals).
import http from 'node:http';
import { createProxyServer } from 'http-proxy-3';

const target = new URL(process.argv[2] ?? 'http://127.0.0.1:8000');
const agent = new http.Agent({ keepAlive: true, scheduling: 'lifo' });
const proxy = createProxyServer({ target, agent });
proxy.on('error', (_e, _req, res) => (res as http.ServerResponse).destroy());
const server = http.createServer({ noDelay: true, keepAliveTimeout: 120_000 }, (req, res) => proxy.web(req, res));
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`);
});
