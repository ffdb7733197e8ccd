// Nothing one client or one upstream answer sends may take the proxy down (issue 18): each class
// of hostile input, on each route kind (inference, pass-through, websocket), with a bystander
// stream in flight that must complete, and the in-flight gauges back to 0 afterwards; the
// request-target class in workers mode too (a worker that died would be restarted and counted).
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { Infermeter } from '../../src/app.ts';
import { startClusterPrimary } from '../../src/cluster/primary.ts';
import { loadConfig } from '../../src/config/config.ts';
import { silentLogger } from '../../src/log.ts';
import { parseExposition, type Exposition } from '../helpers/exposition.ts';
import { rawExchange, startBystander, startRawUpstream, type RawUpstream } from '../helpers/raw-peers.ts';
import { scrape, startProxy, clusterEnv } from '../helpers/proxy-harness.ts';
import { freePort } from '../helpers/listen.ts';

const CHAT = '/v1/chat/completions';

// Targets Node's parser accepts and URL does not resolve (or that are not origin form).
const BAD_TARGETS = [
  'http://[::1/v1/chat/completions',
  'http://[/x',
  'http://a:99999/v1/chat/completions',
  'https://exa mple/v1/models',
  '*',
  'v1/chat/completions',
  'HTTP://[zz]/v1/embeddings',
];

function rawRequest(method: string, target: string, extra = ''): string {
  const body = method === 'POST' ? '{"model":"m","stream":true}' : '';
  return `${method} ${target} HTTP/1.1\r\nHost: x\r\n${extra}Content-Length: ${body.length}\r\n\r\n${body}`;
}

function assertSettled(m: Exposition): void {
  for (const { labels, value: received } of m.series('request_received_total')) {
    assert.equal(m.value('num_requests_waiting', labels), 0, `waiting for ${labels.model_name}`);
    assert.equal(m.value('num_requests_running', labels), 0, `running for ${labels.model_name}`);
    const outcomes = ['request_success_total', 'request_failed_total', 'request_cancelled_total'].map((n) => m.sum(n, labels) ?? 0);
    assert.equal(outcomes[0]! + outcomes[1]! + outcomes[2]!, received, `every request of ${labels.model_name} has one outcome`);
  }
}

async function withBystander(
  t: TestContext,
  answer: Parameters<typeof startRawUpstream>[1],
  env: Record<string, string> = {},
): Promise<{ app: Infermeter; upstream: RawUpstream; bystander: { done: Promise<string> } }> {
  const upstream = await startRawUpstream(t, answer);
  const app = await startProxy(t, upstream.url, env);
  const bystander = await startBystander(app.dataUrl);
  return { app, upstream, bystander };
}

async function bystanderCompletes(upstream: RawUpstream, bystander: { done: Promise<string> }): Promise<void> {
  upstream.release();
  const body = await bystander.done;
  assert.match(body, /data: \[DONE\]\n\n$/, 'the bystander stream completed');
}

describe('hostile peers', () => {
  it('answers a request target URL cannot resolve with 400 and closes the connection, on every route, websockets too', async (t) => {
    const { app, upstream, bystander } = await withBystander(t, ({ socket }) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}'));
    const seen = upstream.heads.length;
    for (const target of BAD_TARGETS) {
      for (const [kind, request] of [
        ['inference', rawRequest('POST', target)],
        ['pass-through', rawRequest('GET', target)],
        [
          'websocket',
          rawRequest(
            'GET',
            target,
            'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n',
          ),
        ],
      ] as const) {
        const { text, closed } = await rawExchange(app.dataUrl, request);
        assert.match(text, /^HTTP\/1\.1 400 /, `${kind} ${target}: ${JSON.stringify(text.slice(0, 60))}`);
        assert.equal(closed, true, `${kind} ${target}: the connection closes`);
      }
    }
    assert.equal(upstream.heads.length, seen, 'none of them reached the upstream');
    const m = await scrape(app);
    assert.equal(m.value('infermeter_client_errors_total', { kind: 'malformed' }), BAD_TARGETS.length * 3);
    await bystanderCompletes(upstream, bystander);
    assertSettled(await scrape(app));
  });

  it('answers 431 to a header block over the limit', async (t) => {
    const { app, upstream, bystander } = await withBystander(t, ({ socket }) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'));
    const { text, closed } = await rawExchange(app.dataUrl, rawRequest('POST', CHAT, `X-Big: ${'a'.repeat(20_000)}\r\n`));
    assert.match(text, /^HTTP\/1\.1 431 /);
    assert.equal(closed, true);
    await bystanderCompletes(upstream, bystander);
  });

  // Heads an upstream can send that Node's client accepts and its server refuses to write.
  const BAD_HEADS = ['HTTP/1.1 200 O\x01K\r\n', 'HTTP/1.1 200 O\x7fK\r\n', 'HTTP/1.1 099 Early\r\n', 'HTTP/1.1 000 Zero\r\n', 'HTTP/1.1 404 N\x1bF\r\n'];
  for (const route of ['inference', 'pass-through'] as const) {
    it(`answers an upstream head Node cannot send with a counted 502 upstream_protocol (${route})`, async (t) => {
      const { app, upstream, bystander } = await withBystander(t, ({ socket }) => {
        const head = BAD_HEADS[(upstream.heads.length - 2) % BAD_HEADS.length]!;
        socket.end(`${head}Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
      });
      for (const _ of BAD_HEADS) {
        const res = await fetch(
          `${app.dataUrl}${route === 'inference' ? CHAT : '/v1/models'}`,
          route === 'inference' ? { method: 'POST', body: '{"model":"m"}' } : {},
        );
        assert.equal(res.status, 502);
        assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'upstream_protocol');
      }
      const m = await scrape(app);
      assert.equal(m.value('infermeter_upstream_errors_total', { kind: 'upstream_protocol' }), BAD_HEADS.length);
      await bystanderCompletes(upstream, bystander);
      assertSettled(await scrape(app));
    });

    it(`answers a 101 to a request that asked for no upgrade with a 502 upstream_protocol at once (${route})`, async (t) => {
      const { app, upstream, bystander } = await withBystander(t, ({ socket }) =>
        socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n'),
      );
      const res = await fetch(
        `${app.dataUrl}${route === 'inference' ? CHAT : '/v1/models'}`,
        route === 'inference' ? { method: 'POST', body: '{"model":"m","stream":true}' } : {},
      );
      assert.equal(res.status, 502);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'upstream_protocol');
      // The same with `Expect: 100-continue` (http-proxy-3 treats such a request apart).
      const expecting = await rawExchange(
        app.dataUrl,
        rawRequest(route === 'inference' ? 'POST' : 'PUT', route === 'inference' ? CHAT : '/v1/files', 'Expect: 100-continue\r\nConnection: close\r\n'),
        5000,
      );
      assert.match(expecting.text, /HTTP\/1\.1 502 /, `with Expect: ${JSON.stringify(expecting.text.slice(0, 80))}`);
      const m = await scrape(app);
      assert.equal(m.value('infermeter_upstream_errors_total', { kind: 'upstream_protocol' }), 2);
      if (route === 'inference') assert.equal(m.value('request_failed_total', { model_name: 'm' }), 2);
      await bystanderCompletes(upstream, bystander);
      assertSettled(await scrape(app));
    });
  }

  it('closes a websocket tunnel whose upstream stays silent past the idle timeout', async (t) => {
    const { app, upstream, bystander } = await withBystander(
      t,
      ({ socket }) =>
        socket.write(
          'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n',
        ),
      { INFERMETER_UPSTREAM_IDLE_TIMEOUT_MS: '300' },
    );
    const { text, closed } = await rawExchange(
      app.dataUrl,
      rawRequest('GET', '/ws', 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n'),
      5000,
    );
    assert.match(text, /^HTTP\/1\.1 101 /, 'the tunnel opened');
    assert.equal(closed, true, 'then closed by the idle timeout (not by the test giving up after 5 s)');
    const m = await scrape(app);
    assert.equal(m.value('infermeter_upstream_errors_total', { kind: 'upstream_timeout' }), 1);
    await bystanderCompletes(upstream, bystander);
  });

  it('survives bad targets and heads in workers mode: no worker dies, every bystander completes', async (t) => {
    const upstream = await startRawUpstream(t, ({ socket, path }) => {
      if (path.includes('/bad-head')) socket.end('HTTP/1.1 200 O\x01K\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
      else socket.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}');
    });
    // A fixed port: workers share it (port 0 would give each its own).
    const port = String(await freePort());
    const env = clusterEnv(upstream.url, {
      INFERMETER_PORT: port,
      INFERMETER_LOG_LEVEL: 'error',
    });
    const app = await startClusterPrimary(loadConfig(env), env, { log: silentLogger, workers: 2 });
    t.after(() => app.close());
    // One bystander per worker, most likely (each on a connection of its own).
    const bystanders = [await startBystander(app.dataUrl), await startBystander(app.dataUrl)];
    for (let round = 0; round < 2; round++) {
      for (const target of BAD_TARGETS) {
        assert.match((await rawExchange(app.dataUrl, rawRequest('POST', target))).text, /^HTTP\/1\.1 400 /, target);
        assert.match(
          (await rawExchange(app.dataUrl, rawRequest('GET', target, 'Connection: Upgrade\r\nUpgrade: websocket\r\n'))).text,
          /^HTTP\/1\.1 400 /,
          `websocket ${target}`,
        );
      }
      assert.match(
        (await rawExchange(app.dataUrl, rawRequest('GET', '/bad-head', 'Connection: close\r\n'))).text,
        /^HTTP\/1\.1 502 /,
        'a bad head on the pass-through route',
      );
      assert.match(
        (await rawExchange(app.dataUrl, rawRequest('POST', '/bad-head/v1/chat/completions', 'Connection: close\r\n'))).text,
        /^HTTP\/1\.1 502 /,
        'a bad head on the inference route',
      );
    }
    upstream.release();
    for (const bystander of bystanders) assert.match(await bystander.done, /data: \[DONE\]\n\n$/, 'the bystander stream completed');
    const m = parseExposition(await (await fetch(app.metricsUrl!)).text());
    assert.equal(m.value('infermeter_worker_restarts_total'), 0, 'no worker died');
    assert.equal(app.workerPids().length, 2);
    assertSettled(m);
  });
});

describe('an upstream head with many headers', () => {
  for (const [route, path] of [
    ['measured', '/v1/chat/completions'],
    ['pass-through', '/v1/other'],
  ] as const) {
    it(`reaches the client whole, content-type included, past Node's default of 1000 (${route})`, async (t) => {
      const names = Array.from({ length: 1500 }, (_, i) => `X-H${i}: v\r\n`).join('');
      const upstream = await startRawUpstream(t, ({ socket }) =>
        socket.end(
          `HTTP/1.1 200 OK\r\n${names}Content-Type: text/event-stream\r\nContent-Length: 76\r\n\r\ndata: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n`,
        ),
      );
      const app = await startProxy(t, upstream.url, { INFERMETER_INJECT_USAGE: 'off' });
      const { text } = await rawExchange(app.dataUrl, rawRequest('POST', path, 'Content-Type: application/json\r\nConnection: close\r\n'));
      const head = text.slice(0, text.indexOf('\r\n\r\n'));
      assert.match(head, /\r\nContent-Type: text\/event-stream/i);
      assert.equal((head.match(/\r\nX-H\d+: v/gi) ?? []).length, 1500);
      assert.match(text, /data: \[DONE\]/);
    });
  }
});
