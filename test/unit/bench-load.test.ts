// The benchmark's load client must name every failure it meets, so that an error in a bench run
// can be traced (a reset before the response on a reused connection is the keep-alive race; a
// reset in the body is a proxy or upstream that cut the stream), and must not count a
// complete stream as one.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { runLoad, type Scenario } from '../../bench/load.ts';
import { listen } from '../helpers/listen.ts';

const DONE = 'data: [DONE]\n\n';
const one: Scenario = { name: 'one', requests: 1, concurrency: 1, tokens: 1, ttftMs: 0, gapMs: 0 };

describe('bench load client', () => {
  // What the server does with the next request, set by each test.
  let behaviour: (req: http.IncomingMessage, res: http.ServerResponse) => void = () => {};
  let server: http.Server;
  let url: string;
  let close: () => Promise<void>;
  before(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => behaviour(req, res));
    });
    ({ url, close } = await listen(undefined, server));
  });
  after(() => close());

  it('counts a whole stream as no failure, even with [DONE] split across reads', async () => {
    behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"x":1}\n\ndata: [DO');
      setTimeout(() => res.end('NE]\n\n'), 5);
    };
    const agent = new http.Agent({ keepAlive: true });
    const r = await runLoad(url, one, agent);
    agent.destroy();
    assert.equal(r.errors, 0);
    assert.equal(r.events, 2);
  });

  it('names an error status, a stream cut short, a reset in the body and one before the response', async () => {
    const cases: Array<[string, (req: http.IncomingMessage, res: http.ServerResponse) => void]> = [
      ['status 503', (_req, res) => res.writeHead(503).end('{}')],
      ['ended without [DONE]', (_req, res) => res.writeHead(200).end('data: {"x":1}\n\n')],
      [
        'ECONNRESET in the body, new connection',
        (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          // A close (FIN), not a reset: a reset may overtake the bytes before it.
          res.write('data: {"x":1}\n\n', () => res.socket?.destroy());
        },
      ],
      ['ECONNRESET before the response, new connection', (_req, res) => res.socket?.resetAndDestroy()],
    ];
    for (const [kind, act] of cases) {
      behaviour = act;
      const agent = new http.Agent({ keepAlive: true });
      const r = await runLoad(url, one, agent);
      agent.destroy();
      assert.equal(r.errors, 1, kind);
      assert.deepEqual([...r.failures], [[kind, 1]]);
    }
  });

  it('tells a reused connection from a new one', async () => {
    let n = 0;
    behaviour = (_req, res) => {
      if (n++ === 0) res.writeHead(200).end(DONE);
      else res.socket?.resetAndDestroy();
    };
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const r = await runLoad(url, { ...one, requests: 2 }, agent);
    agent.destroy();
    assert.deepEqual([...r.failures], [['ECONNRESET before the response, reused connection', 1]]);
  });

  // Issue 34: the bench once always asked for usage, so infermeter's default path (inject, then
  // strip) was never measured; and its clients always kept their connections.
  it('asks for usage only when the scenario says so, and opens a connection per request when told', async () => {
    const bodies: string[] = [];
    const sockets = new Set<unknown>();
    behaviour = (req, res) => {
      sockets.add(req.socket);
      res.writeHead(200).end(DONE);
    };
    server.removeAllListeners('request');
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      let b = '';
      req.on('data', (c: Buffer) => (b += c));
      req.on('end', () => {
        bodies.push(b);
        behaviour(req, res);
      });
    });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    await runLoad(url, { ...one, requests: 3 }, agent);
    assert.equal(sockets.size, 1, 'a kept-alive client: one connection');
    sockets.clear();
    await runLoad(url, { ...one, requests: 3, includeUsage: true, freshConnections: true }, agent);
    agent.destroy();
    assert.equal(sockets.size, 3, 'fresh connections: one per request');
    assert.deepEqual(
      bodies.map((b) => 'stream_options' in (JSON.parse(b) as object)),
      [false, false, false, true, true, true],
    );
  });
});
