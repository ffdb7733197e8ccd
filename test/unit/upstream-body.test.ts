// The upstream body read from Node's HTTP parser (upstream-body.ts): the slices come as the parser
// reads them, the response stream stays empty and still ends (so the kept-alive connection goes
// back to its agent), and every other reader of a parser (the next response on the connection,
// an http server's request bodies: Node pools parsers for both) gets Node's own handling.
import assert from 'node:assert/strict';
import http, { type IncomingMessage } from 'node:http';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import net from 'node:net';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { bodyAfterHead, readBodyFromParser, skipBodySlices, skipFromHead } from '../../src/data-plane/upstream-body.ts';
import { listen } from '../helpers/listen.ts';

const require = createRequire(import.meta.url);
const kOnBody = (require('node:_http_common') as { HTTPParser: { kOnBody: number } }).HTTPParser.kOnBody;

const chunk = (text: string): string => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;

/** A raw upstream answering every request on a connection with `pieces`, one write each, 2 ms apart. */
async function rawUpstream(t: { after(fn: () => unknown): void }, pieces: readonly string[]): Promise<{ url: string; connections: () => number }> {
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    socket.on('error', () => undefined);
    // Each request head (GETs: no body) answered in turn, however the reads cut them: on a busy
    // machine two requests can come in one read.
    let received = '';
    let answering = Promise.resolve();
    socket.on('data', (data: Buffer) => {
      received += data.toString('latin1');
      for (let end = received.indexOf('\r\n\r\n'); end !== -1; end = received.indexOf('\r\n\r\n')) {
        received = received.slice(end + 4);
        answering = answering.then(async () => {
          for (const piece of pieces) {
            socket.write(piece);
            await new Promise((resolve) => setTimeout(resolve, 2));
          }
        });
      }
    });
  });
  const { url } = await listen(t, server);
  return { url, connections: () => connections };
}

/** An http server that keeps each request's body and answers `ok`: its parsers come from Node's pool too. */
async function bodyServer(t: { after(fn: () => unknown): void }): Promise<{ url: string; bodies: string[] }> {
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      bodies.push(body);
      res.end('ok');
    });
  });
  const { url } = await listen(t, server);
  return { url, bodies };
}

/** A response's body as its stream gives it (Node's own reading). */
async function textOf(res: IncomingMessage): Promise<string> {
  let text = '';
  res.setEncoding('utf8');
  res.on('data', (c: string) => (text += c));
  await once(res, 'end');
  return text;
}

function get(url: string, agent: http.Agent): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => http.get(url, { agent }, resolve).on('error', reject));
}

describe('the upstream body from the parser', () => {
  const head = 'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n';
  const events = ['data: a\n\n', 'data: bb\n\ndata: ccc\n\n', 'data: [DONE]\n\n'];
  const pieces = [head, chunk(events[0]!), chunk(events[1]!) + chunk(events[2]!), '0\r\n\r\n'];

  it('hands the body slices to the reader, not to the stream, which still ends; the connection is kept and the next response read as Node reads it', async (t) => {
    const up = await rawUpstream(t, pieces);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    const res = await get(`${up.url}/`, agent);
    const slices: string[] = [];
    assert.equal(
      readBodyFromParser(res, (b) => slices.push(b.toString())),
      true,
    );
    let streamed = 0;
    res.on('data', () => streamed++);
    await once(res, 'end');
    assert.equal(slices.join(''), events.join(''));
    assert.equal(slices.length, 3, 'one slice per HTTP chunk, as the parser reads them');
    assert.equal(streamed, 0, 'nothing went through the stream');
    assert.equal(res.complete, true);
    // The same connection (maxSockets 1, one connection seen), its parser's slot taken: read as Node reads it.
    const next = await get(`${up.url}/`, agent);
    assert.equal(await textOf(next), events.join(''));
    assert.equal(up.connections(), 1, 'the kept-alive connection was reused');
  });

  it("leaves an http server's request bodies to Node (the parsers are pooled for both)", async (t) => {
    const up = await rawUpstream(t, pieces);
    const { url, bodies } = await bodyServer(t);
    for (let round = 0; round < 5; round++) {
      // A fresh connection each time: its parser goes back to the pool when it closes.
      const agent = new http.Agent({ keepAlive: false });
      const res = await get(`${up.url}/`, agent);
      const slices: string[] = [];
      assert.equal(
        readBodyFromParser(res, (b) => slices.push(b.toString())),
        true,
      );
      await once(res, 'end');
      res.socket?.destroy();
      agent.destroy();
      assert.equal(slices.join(''), events.join(''));
      const answer = await fetch(`${url}/`, { method: 'POST', body: `body ${round}` });
      assert.equal(await answer.text(), 'ok');
    }
    assert.deepEqual(
      bodies,
      [0, 1, 2, 3, 4].map((i) => `body ${i}`),
    );
  });

  it("skips the slices once asked; the slot is given back when Node frees the parser, so the next response and a server's bodies read as Node reads them", async (t) => {
    const up = await rawUpstream(t, pieces);
    const { url, bodies } = await bodyServer(t);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    for (let round = 0; round < 4; round++) {
      const res = await get(`${up.url}/`, agent);
      const slices: string[] = [];
      let skipped: (() => void) | undefined;
      readBodyFromParser(res, (b) => {
        slices.push(b.toString());
        skipped ??= skipBodySlices(res); // after the first slice: the rest is the caller's to read
        // Round 3 is cut in the middle: its socket destroyed, its parser freed with the slot emptied.
        if (round === 3) setImmediate(() => res.socket?.destroy());
      });
      res.on('error', () => undefined); // the cut one's 'aborted'
      const parser = (res.socket as unknown as { parser: Record<number, unknown> }).parser;
      await once(res, round === 3 ? 'close' : 'end');
      if (round !== 1) assert.equal(typeof parser[kOnBody], 'function', 'the slot given back as Node freed the parser');
      assert.ok(skipped !== undefined);
      assert.deepEqual(slices, [events[0]], 'no slice after the skip');
      // Not given back by the caller (round 1 gives it back too: once more changes nothing).
      if (round === 1) skipped();
      const answer = await fetch(`${url}/`, { method: 'POST', body: `body ${round}` });
      assert.equal(await answer.text(), 'ok');
    }
    // The kept-alive connection's next response, and the server's requests, as Node reads them.
    const next = await get(`${up.url}/`, agent);
    assert.equal(await textOf(next), events.join(''));
    assert.deepEqual(
      bodies,
      [0, 1, 2, 3].map((i) => `body ${i}`),
    );
    assert.equal(skipBodySlices(next), undefined, 'declined for a response not read from the parser');
  });

  it('gives a destroyed response nothing more, and declines a stream without a parser', async (t) => {
    const up = await rawUpstream(t, [head, chunk('data: a\n\n') + chunk('data: b\n\n'), chunk('data: c\n\n'), '0\r\n\r\n']);
    const agent = new http.Agent({ keepAlive: false });
    t.after(() => agent.destroy());
    const res = await get(`${up.url}/`, agent);
    const slices: string[] = [];
    readBodyFromParser(res, (b) => {
      slices.push(b.toString());
      res.destroy(); // its client left: the rest of this read and later ones are not handed on
    });
    await once(res, 'close');
    assert.deepEqual(slices, ['data: a\n\n']);
    assert.equal(
      readBodyFromParser(new PassThrough() as unknown as IncomingMessage, () => undefined),
      false,
    );
  });

  // bodyAfterHead: called in the 'response' event, as the relay does (the parser is then in the head's read).
  /**
   * The first response of a raw upstream that writes `pieces` (one write each, 2 ms apart), with
   * what bodyAfterHead said in its 'response' event; `then` runs in that event too.
   */
  async function headRead(
    t: { after(fn: () => unknown): void },
    upPieces: readonly string[],
    then: (res: IncomingMessage) => void = () => undefined,
    insecureHTTPParser = false,
  ): Promise<{ res: IncomingMessage; body: Buffer | undefined }> {
    const up = await rawUpstream(t, upPieces);
    const agent = new http.Agent({ keepAlive: false });
    t.after(() => agent.destroy());
    return new Promise((resolve, reject) => {
      http
        .get(`${up.url}/`, { agent, insecureHTTPParser }, (res) => {
          resolve({ res, body: bodyAfterHead(res) });
          then(res);
        })
        .on('error', reject);
    });
  }

  it("finds the body's bytes after the head in the head's own read; with the slices skipped from there, Node hands none of that read", async (t) => {
    const body = `${chunk(events[0]!)}${chunk(events[1]!)}`;
    const slices: string[] = [];
    const { res, body: found } = await headRead(t, [`${head}${body}`, `${chunk(events[2]!)}0\r\n\r\n`], (res) => {
      readBodyFromParser(res, (b) => slices.push(b.toString()));
      assert.ok(skipBodySlices(res) !== undefined);
    });
    assert.equal(found?.toString('latin1'), body, 'what follows the head in its read');
    await once(res, 'end');
    assert.deepEqual(slices, [], "no slice, of the head's read or after");
  });

  it("finds an empty body when the head's read ends with the head; skipFromHead then leaves the slices on, for the first body read", async (t) => {
    const slices: string[] = [];
    let skipped: unknown = 'not called';
    const { res, body } = await headRead(t, pieces, (res) => {
      readBodyFromParser(res, (b) => slices.push(b.toString()));
      skipped = skipFromHead(res);
    });
    assert.equal(body?.length, 0);
    assert.equal(skipped, undefined);
    await once(res, 'end');
    assert.deepEqual(slices, events, 'every slice handed over, as before');
  });

  it("declines a head that began in an earlier read, a 1xx before it in its read, a body framed by its length or not chunked last, an answer to HEAD, lone LFs or a folded field (which only a lenient parser takes), and outside the 'response' event", async (t) => {
    const cases: Array<[string, readonly string[]]> = [
      ['the head in two reads', [head.slice(0, 30), head.slice(30) + chunk('data: a\n\n'), '0\r\n\r\n']],
      ['a 103 before it', [`HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n${head}${chunk('data: a\n\n')}`, '0\r\n\r\n']],
      ['content-length', ['HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\ndata: a\n\n']],
      ['not chunked last', ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\nConnection: close\r\n\r\nabc']],
      ['lone LFs', [`HTTP/1.1 200 OK\nContent-Type: text/event-stream\nTransfer-Encoding: chunked\n\n${chunk('data: a\n\n')}`, '0\r\n\r\n']],
      ['a folded field', [`HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nTransfer-Encoding: chunked\r\n\r\n${chunk('data: a\n\n')}`, '0\r\n\r\n']],
    ];
    for (const [name, upPieces] of cases) {
      // Node's own parser refuses the last two; a lenient one (insecureHTTPParser) takes them.
      const { res, body } = await headRead(t, upPieces, undefined, true);
      assert.equal(body, undefined, name);
      res.on('error', () => undefined);
      res.resume();
    }
    const up = await rawUpstream(t, [`${head}${chunk('data: a\n\n')}0\r\n\r\n`]);
    const agent = new http.Agent({ keepAlive: false });
    t.after(() => agent.destroy());
    const res = await get(`${up.url}/`, agent);
    assert.equal(bodyAfterHead(res), undefined, 'after the read: the parser holds none');
    res.resume();
    // An answer to HEAD has no body: what follows its head in the read is not its body (Node's parser skips it).
    const headAnswer = await new Promise<Buffer | undefined>((resolve, reject) => {
      http
        .request(`${up.url}/`, { method: 'HEAD', agent }, (r) => {
          resolve(bodyAfterHead(r));
          r.on('error', () => undefined); // the bytes after the head are a bad next response to Node
          r.resume();
        })
        .on('error', reject)
        .end();
    });
    assert.equal(headAnswer, undefined, 'HEAD');
  });
});
