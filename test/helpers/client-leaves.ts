// A client that leaves a streamed chat completion (or another route's stream) once `marker` has arrived: the request is
// cancelled while decoding. node:http on a connection of its own (agent: false), destroyed on
// leaving: an aborted fetch makes undici open a spare connection that then sits, without a
// request, until its keep-alive timeout (4 s), which holds up the data plane's close in teardown.
import http from 'node:http';

export function leaveStreamAfter(dataUrl: string, body: unknown, marker: string, path = '/v1/chat/completions'): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${dataUrl}${path}`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`the stream answered ${res.statusCode}`));
      let seen = '';
      res.on('data', (chunk: Buffer) => {
        seen += chunk.toString('utf8');
        if (seen.includes(marker)) {
          req.destroy();
          resolve();
        }
      });
      res.on('end', () => reject(new Error('the stream ended before the client left')));
    });
    req.on('error', (error) => {
      if (!req.destroyed) reject(error);
    });
    req.end(JSON.stringify(body));
  });
}
