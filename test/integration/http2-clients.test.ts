// Clients that offer HTTP/2 on http:// (an h2c upgrade: `curl --http2`, Java's HttpClient by
// default) get from infermeter what they get from the engine directly: the offer declined, the
// request answered over HTTP/1.1 (RFC 9110 lets a server ignore an Upgrade), measured when it is
// inference. Before, every request with an Upgrade header went to the websocket path, which
// dropped it: curl got "Empty reply from server", Java "header parser received no bytes".
// curl and Java are peers (Debian's curl and default-jdk-headless; .ci/run installs them):
// skipped where missing, failing under CI.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import type { RequestSample } from '../../src/measure/sample.ts';
import { startSimServer } from '../../src/sim/model-server.ts';
import { nextFinished, startProxy } from '../helpers/proxy-harness.ts';

const curlOk = spawnSync('curl', ['--version'], { encoding: 'utf8' }).stdout?.includes('nghttp2') === true;
const javaOk = spawnSync('java', ['-version'], { encoding: 'utf8' }).status === 0;
const skipFor = (ok: boolean, what: string): string | false => (ok || process.env.CI ? false : `${what} not installed (.ci/run installs it)`);
const JAVA_CLIENT = fileURLToPath(new URL('../peers/H2cClient.java', import.meta.url));

function run(command: string, args: readonly string[], timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // execFile kills the child at the timeout; it ends by itself otherwise.
    execFile(command, args, { timeout: timeoutMs, encoding: 'utf8' }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr }),
    );
  });
}

const CHAT = JSON.stringify({ model: 'sim-llama-8b', stream: true, max_tokens: 7, messages: [{ role: 'user', content: 'hi' }] });

/** An answer's shape, ids and times aside: its status line facts and how many events it has. */
function shape(text: string): string {
  return text.replace(/"(id|created|system_fingerprint)":\s*("[^"]*"|\d+)/g, '"$1":_');
}

// The engine: Node's server, which declines an h2c offer as RFC 9110 allows (uvicorn 0.17
// answers one 400, "Unsupported upgrade request"; newer ones decline it too).
async function startEngine(t: import('node:test').TestContext): Promise<string> {
  const sim = await startSimServer({ ttftMs: 0, interTokenMs: 0 });
  t.after(() => sim.close());
  return sim.url;
}

describe('clients that offer h2c', () => {
  it('curl --http2: the same answers through infermeter as directly, inference measured', {
    skip: skipFor(curlOk, 'curl with HTTP/2 (nghttp2)'),
  }, async (t) => {
    const engine = await startEngine(t);
    const app = await startProxy(t, engine);
    const curl = (base: string, ...args: string[]) =>
      run('curl', ['-sS', '--http2', '--max-time', '20', '-w', '\\n%{http_code} %{http_version}', ...args, base]);
    for (const [path, args] of [
      ['/v1/models', []],
      ['/v1/chat/completions', ['-H', 'content-type: application/json', '-d', CHAT]],
    ] as const) {
      const direct = await curl(`${engine}${path}`, ...args);
      const finished = path === '/v1/models' ? undefined : nextFinished(app, 1);
      const proxied = await curl(`${app.dataUrl}${path}`, ...args);
      assert.equal(proxied.code, 0, `${path}: curl failed through infermeter: ${proxied.stderr}`);
      assert.equal(direct.code, 0, `${path}: curl failed directly: ${direct.stderr}`);
      assert.equal(shape(proxied.stdout), shape(direct.stdout), `${path}: the same answer over HTTP/1.1`);
      assert.match(proxied.stdout, /\n200 1\.1$/);
      if (finished !== undefined) {
        const [s] = (await finished) as [RequestSample];
        assert.equal(s.completionTokens, 7, 'measured');
      }
    }
  });

  it("Java's HttpClient: the same answers through infermeter as directly, inference measured", {
    skip: skipFor(javaOk, 'java (default-jdk-headless)'),
  }, async (t) => {
    const engine = await startEngine(t);
    const app = await startProxy(t, engine);
    const requests = (base: string) => [
      `GET\t${base}/v1/models`,
      `POST\t${base}/v1/chat/completions\t${CHAT}`,
      `POST\t${base}/v1/embeddings\t{"model":"sim-llama-8b","input":"x"}`,
    ];
    const finished = nextFinished(app, 2);
    // One JVM for both (the source launcher compiles the client each run: 2 s of CPU): the
    // engine's three answers, then infermeter's; a connection and its h2c offer per origin.
    const java = await run('java', [JAVA_CLIENT, ...requests(engine), ...requests(app.dataUrl)]);
    assert.equal(java.code, 0, java.stderr);
    const all = java.stdout.trim().split('\n');
    assert.equal(all.length, 6, java.stdout);
    const [direct, proxied] = [all.slice(0, 3), all.slice(3)];
    for (const line of proxied) assert.match(line, /^200\tHTTP_1_1\t/, line);
    assert.equal(shape(proxied.join('\n')), shape(direct.join('\n')), 'the same answers as directly');
    const samples = await finished;
    assert.deepEqual(samples.map((s) => s.api).sort(), ['chat', 'embeddings']);
    assert.equal(samples.find((s) => s.api === 'chat')!.completionTokens, 7);
  });
});
