// What undici, the upstream client (issue 54), would do otherwise than a client's own connection
// to the engine, held to what the engine sees directly: a kept-alive client connection's HEAD,
// GET with a body, and inference requests share its one upstream connection (undici closes a
// connection after a HEAD, and after a GET with a body, unless told not to).
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, it } from 'node:test';
import { startProxy } from '../helpers/proxy-harness.ts';
import { listen } from '../helpers/listen.ts';

/** One request on `agent`, its whole answer read: status and body. */
function request(base: string, agent: http.Agent, method: string, path: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
    const req = http.request(new URL(path, base), { method, agent, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('upstream requests on undici', () => {
  it("a kept-alive client's HEAD, GET with a body and chat requests go on its one upstream connection, as directly", async (t) => {
    let connections = 0;
    const seen: string[] = [];
    const engine = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        seen.push(`${req.method} ${req.url} ${body}`);
        const answer = req.url === '/v1/chat/completions' ? '{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}' : '{"data":[]}';
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
        res.end(answer);
      });
    });
    engine.on('connection', () => connections++);
    const { url } = await listen(t, engine);
    const app = await startProxy(t, url);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    const steps: [string, string, string | undefined][] = [
      ['HEAD', '/v1/models', undefined],
      ['GET', '/v1/models', '{"q":1}'],
      ['POST', '/v1/chat/completions', '{"model":"m","messages":[]}'],
      ['HEAD', '/health', undefined],
      ['POST', '/v1/chat/completions', '{"model":"m","messages":[]}'],
    ];
    for (const [method, path, body] of steps) {
      const got = await request(app.dataUrl, agent, method, path, body);
      assert.equal(got.status, 200, `${method} ${path}`);
    }
    assert.equal(seen.length, steps.length);
    assert.equal(seen[1], 'GET /v1/models {"q":1}', 'the GET body reached the engine with its request');
    assert.equal(connections, 1, `the engine saw one connection, as directly (saw ${connections})`);
  });
});
