// The inside half of `npm run image:test`: run by the image's own node in the simulator's
// container, whose network namespace (loopback only) infermeter's container joins. Prints one
// JSON line per command for scripts/image-test.ts to judge. Node's builtins and the image's
// dist/ only: it runs in the image, beside no node_modules of its own.
//   sim                      the simulated model server on 127.0.0.1:8000, until stopped
//   stream <tokens>          one streamed chat completion through infermeter (127.0.0.1:1025);
//                            prints {"first":...} at the first byte, then the result
//   get <url> [token]        status and body of a GET, with a bearer token if given
//   listening                the TCP addresses listened on in this network namespace
import { readFileSync } from 'node:fs';

const SIM_PORT = 8000;
const MODEL = 'sim-llama-8b';
const print = (value: unknown): void => void process.stdout.write(`${JSON.stringify(value)}\n`);

async function sim(): Promise<void> {
  // The image keeps dist/sim (Dockerfile); the model server's timings are fixed so that a
  // stream of N tokens lasts about N * 10 ms after a 50 ms first token.
  const { startSimServer } = (await import('/app/dist/sim/model-server.js' as string)) as typeof import('../src/sim/model-server.ts');
  const server = await startSimServer({ models: [MODEL], ttftMs: 50, interTokenMs: 10, defaultTokens: 16 }, '127.0.0.1', SIM_PORT);
  print({ sim: server.url });
  process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
}

async function stream(tokens: number): Promise<void> {
  const started = performance.now();
  const response = await fetch('http://127.0.0.1:1025/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, stream: true, max_tokens: tokens, messages: [{ role: 'user', content: 'hi' }] }),
  });
  let text = '';
  let firstMs: number | undefined;
  const decoder = new TextDecoder();
  for await (const chunk of response.body ?? []) {
    if (firstMs === undefined) {
      firstMs = performance.now() - started;
      print({ first: Math.round(firstMs) });
    }
    text += decoder.decode(chunk as Uint8Array, { stream: true });
  }
  const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
  const content = events
    .filter((e) => e !== 'data: [DONE]')
    .map((e) => (JSON.parse(e.slice(6)) as { choices?: Array<{ delta?: { content?: string } }> }).choices?.[0]?.delta?.content ?? '')
    .filter((c) => c !== '').length;
  print({
    status: response.status,
    contentType: response.headers.get('content-type'),
    events: events.length,
    contentEvents: content,
    done: events.at(-1) === 'data: [DONE]',
    firstByteMs: firstMs === undefined ? undefined : Math.round(firstMs),
    totalMs: Math.round(performance.now() - started),
  });
}

async function get(url: string, token: string | undefined): Promise<void> {
  const response = await fetch(url, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } });
  print({ status: response.status, body: await response.text() });
}

/** /proc/net/tcp{,6} rows in state 0A (LISTEN), as address:port. */
function listening(): void {
  const addresses: string[] = [];
  for (const [file, v6] of [
    ['/proc/net/tcp', false],
    ['/proc/net/tcp6', true],
  ] as const) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue; // no IPv6 in this namespace
    }
    for (const row of text.split('\n').slice(1)) {
      const [, local, , state] = row.trim().split(/\s+/);
      if (state !== '0A' || local === undefined) continue;
      const [hex, portHex] = local.split(':') as [string, string];
      const port = parseInt(portHex, 16);
      if (!v6) {
        const ip = [3, 2, 1, 0].map((i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join('.');
        addresses.push(`${ip}:${port}`);
      } else {
        addresses.push(`[${hex === '00000000000000000000000000000000' ? '::' : hex === '00000000000000000000000001000000' ? '::1' : hex}]:${port}`);
      }
    }
  }
  print({ listening: addresses.sort() });
}

const [command, ...args] = process.argv.slice(2);
if (command === 'sim') await sim();
else if (command === 'stream') await stream(Number(args[0] ?? 16));
else if (command === 'get') await get(args[0]!, args[1]);
else if (command === 'listening') listening();
else {
  process.stderr.write(`image-test-client: unknown command ${command}\n`);
  process.exit(2);
}
