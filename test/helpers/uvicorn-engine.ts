// A real uvicorn + FastAPI engine (test/peers/uvicorn_engine.py) for one test or one file: the server vLLM
// and SGLang run, routing and reading bodies as they do. Debian's python3-uvicorn,
// python3-fastapi and python3-httptools (.ci/run installs them), run by /usr/bin/python3 (or
// UVICORN_PYTHON): a pyenv `python3` first on the PATH usually lacks them.
//
// Policy where they are missing (as for prometheus): the test is skipped, saying so, except
// under CI, where it fails.
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';

const PYTHON = process.env.UVICORN_PYTHON ?? '/usr/bin/python3';
const SCRIPT = fileURLToPath(new URL('../peers/uvicorn_engine.py', import.meta.url));

const probe = spawnSync(PYTHON, ['-c', 'import uvicorn, fastapi, httptools; print(uvicorn.__version__, fastapi.__version__)'], { encoding: 'utf8' });
/** uvicorn's and FastAPI's versions, when they run here. */
export const uvicornVersion = probe.status === 0 ? probe.stdout.trim() : undefined;
/** For `describe(..., { skip })`: why the uvicorn tests are skipped here; never under CI. */
export const uvicornSkip: string | false =
  uvicornVersion !== undefined || process.env.CI
    ? false
    : `${PYTHON} lacks uvicorn, fastapi or httptools (Debian packages python3-uvicorn python3-fastapi python3-httptools; .ci/run installs them)`;

/** Starts the engine (`routes` or `strict`: see the script); its base URL. Stopped by PID in t.after. */
export async function startUvicornEngine(t: TestContext, mode: 'routes' | 'strict' = 'routes'): Promise<string> {
  const engine = launch(mode);
  t.after(engine.stop);
  return engine.url;
}

/**
 * The engine for every test of a file (`before`), when they share nothing but its routing and
 * body reading: its base URL, and `stop` for the file's `after`.
 */
export async function startSharedUvicornEngine(mode: 'routes' | 'strict' = 'routes'): Promise<{ url: string; stop: () => Promise<void> }> {
  const engine = launch(mode);
  try {
    return { url: await engine.url, stop: engine.stop };
  } catch (error) {
    await engine.stop();
    throw error;
  }
}

function launch(mode: 'routes' | 'strict'): { url: Promise<string>; stop: () => Promise<void> } {
  const child = spawn(PYTHON, [SCRIPT, mode], { env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  };
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const url = new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`uvicorn did not start in 30 s: ${err}`)), 30_000);
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
      reject(new Error(`uvicorn exited (${code}) before it listened: ${err}`));
    });
  });
  return { url, stop };
}
