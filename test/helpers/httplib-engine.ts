// A real cpp-httplib server with llama-server's route table (test/peers/httplib_engine.cpp), for
// one test: the HTTP layer llama-server routes with, decoding paths as it does. Built with g++
// against Debian's libcpp-httplib-dev (.ci/run installs it and g++) or against the header that
// CPPHTTPLIB_HEADER names (llama.cpp's vendored httplib.h, of b4747 or of current master: a
// httplib.cpp beside it is compiled in too). The binary is cached under the temporary directory,
// keyed by the hash of the sources, so the suite pays the compile once.
//
// Policy where g++ or the header is missing (as for uvicorn): the test is skipped, saying so,
// except under CI, where it fails.
import { execFile, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { TestContext } from 'node:test';

const SOURCE = fileURLToPath(new URL('../peers/httplib_engine.cpp', import.meta.url));
const HEADER = process.env.CPPHTTPLIB_HEADER ?? '/usr/include/httplib.h';
const COMPILER = process.env.CXX ?? 'g++';

const compilerThere = spawnSync(COMPILER, ['--version'], { encoding: 'utf8' }).status === 0;
const header = existsSync(HEADER) ? readFileSync(HEADER, 'latin1') : undefined;

/** cpp-httplib's version, when a compiler and the header are here. */
export const httplibVersion = compilerThere && header !== undefined ? (/CPPHTTPLIB_VERSION "([^"]+)"/.exec(header)?.[1] ?? 'unknown') : undefined;
/** For `describe(..., { skip })`: why the cpp-httplib test is skipped here; never under CI. */
export const httplibSkip: string | false =
  httplibVersion !== undefined || process.env.CI
    ? false
    : `no ${compilerThere ? HEADER : COMPILER} (Debian packages g++ libcpp-httplib-dev, .ci/run installs them; or CPPHTTPLIB_HEADER=<llama.cpp's httplib.h>)`;

/** The server binary, compiled once per set of sources. */
async function binary(): Promise<string> {
  if (header === undefined) throw new Error(`no cpp-httplib header at ${HEADER}`);
  const dir = dirname(HEADER);
  // Header-only (llama.cpp b4747's), split with its .cpp beside it (current master's), or
  // Debian's: declarations only, the library linked.
  const split = join(dir, 'httplib.cpp');
  const sources = [SOURCE];
  const flags: string[] = [];
  if (!header.includes('inline bool Server::listen_after_bind')) {
    if (existsSync(split)) sources.push(split);
    else flags.push('-lcpp-httplib');
  }
  const hash = createHash('sha256');
  for (const file of [HEADER, ...sources]) hash.update(readFileSync(file));
  hash.update(flags.join(' '));
  const cache = join(tmpdir(), 'infermeter-httplib-engine');
  const out = join(cache, hash.digest('hex').slice(0, 24));
  if (existsSync(out)) return out;
  mkdirSync(cache, { recursive: true });
  const partial = `${out}.${process.pid}`;
  await promisify(execFile)(COMPILER, ['-std=c++17', '-O1', `-I${dir}`, '-o', partial, ...sources, ...flags, '-pthread'], { maxBuffer: 1 << 24 });
  // Another test process may have built it too: the rename is atomic either way.
  renameSync(partial, out);
  return out;
}

/** Starts the engine; its base URL. Stopped by PID in t.after. */
export async function startHttplibEngine(t: TestContext): Promise<string> {
  const child = spawn(await binary(), [], { env: {}, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  });
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`the cpp-httplib engine did not start in 30 s: ${err}`)), 30_000);
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const port = /PORT (\d+)/.exec(out)?.[1];
      if (port !== undefined) {
        clearTimeout(timer);
        resolve(`http://127.0.0.1:${port}`);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the cpp-httplib engine exited (${code}) before it listened: ${err}`));
    });
  });
}
